// Connection setup through librdmacm for perftest's -R/--rdma_cm, with a deadline on every
// blocking step (address and route resolution, connect, accept, every event wait) and errors
// that say what happened (refused, unreachable, no RDMA device behind the address, timeout).
//
// perftest -R uses rdma_cm twice on the same port (18515 by default, TCP port space; on iWARP
// that is a real TCP port): first for its out-of-band exchange (CmOobChannel: one RC QP of its
// own carrying the version, system data, MTU and key messages as SENDs), then, after one key
// exchange on that channel, for the test's QP; the server stops listening between the two.
#pragma once
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perftest/oob_channel.h"

namespace rdmadiag::perftest {

// What the QP's owner asks of rdma_connect / rdma_accept.
struct CmConnectParams {
  int responder_resources = 0;  // incoming RDMA READ/atomic depth (0: the QP accepts no reads)
  int initiator_depth = 0;      // outgoing RDMA READ/atomic depth
  int retry_count = 7;
  int rnr_retry_count = 7;
};

struct CmHooks {
  // Called once the id is bound to a device (after route resolution on the client, on the
  // connection request on the server): create the QP with rdma_create_qp(id, ...).
  std::function<CmConnectParams(rdma_cm_id*)> create_qp;
  // Undo create_qp (rdma_destroy_qp): a client that retries starts again with a new id.
  std::function<void()> destroy_qp;
  std::function<void()> listening;  // server: called once it listens
  int tos = -1;                       // -T: RDMA_OPTION_ID_TOS when >= 0
  int ack_timeout = -1;               // -u: RDMA_OPTION_ID_ACK_TIMEOUT when >= 0
};

// One RC connection made through rdma_cm, with its own event channel. The caller's QP
// (rdma_destroy_qp) must be gone before this object is destroyed.
class CmConnection {
 public:
  // Client: resolves host:port and connects; a refused or failed attempt is retried (the
  // server may not listen yet) until timeout_ms, then fails with the last reason.
  static CmConnection connect(const std::string& host, int port, int timeout_ms, const CmHooks& hooks,
                              const std::string& what);
  // Server: listens on port (IPv4, every address, as perftest) and accepts one connection
  // within timeout_ms; then stops listening.
  static CmConnection accept(int port, int timeout_ms, const CmHooks& hooks, const std::string& what);
  // The same in two steps: listen now, accept later (accept_one), so a client told to connect
  // in between finds the listener already there.
  static CmConnection listen(int port, const std::string& what, int backlog = 1);
  void accept_one(int timeout_ms, const CmHooks& hooks, const std::string& what);
  // -q with -R: one more connection on this listener (which keeps listening), on a channel of
  // its own, as perftest's server accepts one connection per QP on one port.
  CmConnection accept_next(int timeout_ms, const CmHooks& hooks, const std::string& what);

  CmConnection(CmConnection&&) noexcept;
  CmConnection& operator=(CmConnection&&) = delete;
  CmConnection(const CmConnection&) = delete;
  ~CmConnection();

  rdma_cm_id* id() const { return id_; }
  rdma_event_channel* channel() const { return channel_; }
  const std::string& peer() const { return peer_; }
  // Reads one pending event without waiting; true when the peer disconnected (or the
  // connection failed) since.
  bool poll_disconnected();

 private:
  CmConnection() = default;
  rdma_cm_event* wait_request(std::uint64_t deadline, int timeout_ms, const std::string& what);
  void complete_accept(const rdma_conn_param& offered, std::uint64_t deadline, const CmHooks& hooks, const std::string& what);
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;  // server, until it has accepted
  int listen_port_ = 0;
  std::string peer_;
  bool disconnected_ = false;
};

// perftest's out-of-band exchange over rdma_cm: an RC QP of its own, each message one SEND into
// the peer's posted receive (perftest posts one receive of its struct pingpong_dest's size and
// posts the next after reading; messages are exchanged strictly in turn, client first).
class CmOobChannel : public OobTransport {
 public:
  // Empty host: server. listening is called once the server listens (the banner).
  CmOobChannel(const std::string& host, int port, int timeout_ms, std::function<void()> listening);
  ~CmOobChannel() override;
  CmOobChannel(const CmOobChannel&) = delete;
  CmOobChannel& operator=(const CmOobChannel&) = delete;

  bool is_client() const override { return is_client_; }
  const std::string& peer() const override { return peer_; }
  void send(std::span<const char> bytes, const std::string& step) override;
  std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms) override;
  std::vector<char> receive_message(const std::string& step, int timeout_ms) override;
  bool message_based() const override { return true; }
  std::vector<char> drain(int wait_ms) override;
  void let_peer_close_first(int wait_ms) override;
  bool peer_closed() override { return connection_ && connection_->poll_disconnected(); }

 private:
  CmConnectParams create_resources(rdma_cm_id* id);
  void release_resources();
  void post_receive(std::size_t slot);
  // One completion from cq before deadline_ns; nullopt on timeout. Throws when the peer
  // disconnects or the completion failed (SendNotConfirmed for a SEND's LOC_QP_OP_ERR).
  std::optional<ibv_wc> wait_completion(ibv_cq* cq, std::uint64_t deadline_ns, const std::string& step);

  static constexpr std::size_t kSlotSize = 4096;  // larger than any perftest message (320 bytes)
  static constexpr std::size_t kReceiveSlots = 4;

  bool is_client_ = false;
  std::string peer_;
  int timeout_ms_ = 0;
  rdma_cm_id* qp_id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<char> buffer_;  // slot 0: send; slots 1..kReceiveSlots: receives
  std::optional<CmConnection> connection_;
};

// "RDMA_CM_EVENT_REJECTED (status 28)" and what it usually means, for error messages.
std::string describe_cm_failure(int event, int status, const std::string& peer);

}  // namespace rdmadiag::perftest
