// The TCP connection perftest peers use for their out-of-band exchange, with a timeout on
// every blocking step and error messages that say which step failed.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace rdmadiag::perftest {

// How the two perftest peers exchange their out-of-band messages: a TCP socket (perftest's
// default) or, with -R, an RC QP of its own connected through rdma_cm (CmOobChannel).
class OobTransport {
 public:
  virtual ~OobTransport() = default;
  virtual bool is_client() const = 0;
  virtual const std::string& peer() const = 0;
  // One message: one write() on TCP (perftest reads each message with a single read()),
  // one SEND on rdma_cm.
  virtual void send(std::span<const char> bytes, const std::string& step) = 0;
  // Reads exactly size bytes (TCP) or one message that must be size bytes long (rdma_cm), or
  // throws (timeout, peer closed, error) naming the step and what arrived.
  virtual std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms) = 0;
  // The next whole message whatever its length (rdma_cm only: TCP has no message boundaries).
  virtual std::vector<char> receive_message(const std::string& step, int timeout_ms) = 0;
  virtual bool message_based() const = 0;
  // Whatever is already readable within wait_ms (for diagnosing a peer that sent something else).
  virtual std::vector<char> drain(int wait_ms) = 0;
  // Before closing: give the peer up to wait_ms to close first, so our teardown cannot fail
  // its last send (rdma_cm; TCP needs nothing).
  virtual void let_peer_close_first(int /*wait_ms*/) {}
  // Without waiting: true once the peer has closed the exchange (--run_infinitely ends then).
  virtual bool peer_closed() { return false; }
  // perftest's exchange: the client writes first, the server reads first.
  std::vector<char> exchange(std::span<const char> mine, std::size_t theirs, const std::string& step, int timeout_ms);
  // The same with whole messages of any length (message_based() transports). A client whose
  // SEND was not confirmed (SendNotConfirmed) still waits for the answer: the server answers
  // only a message it read, so its answer proves ours arrived; that is noted in *warnings.
  std::vector<char> exchange_message(std::span<const char> mine, const std::string& step, int timeout_ms,
                                     std::vector<std::string>* warnings = nullptr);
};

class OobChannel : public OobTransport {
 public:
  // Client: connects to host:port, retrying refused connections until timeout_ms (the
  // server may still be starting), then fails with "refused"/"unreachable" explanations.
  static OobChannel connect_to(const std::string& host, int port, int timeout_ms);
  // Server: listens on port (all addresses) and accepts one client within timeout_ms.
  static OobChannel accept_one(int port, int timeout_ms);

  OobChannel(OobChannel&&) noexcept;
  OobChannel& operator=(OobChannel&&) noexcept;
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;
  ~OobChannel();

  bool is_client() const override { return is_client_; }
  const std::string& peer() const override { return peer_; }
  void send(std::span<const char> bytes, const std::string& step) override;
  std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms) override;
  std::vector<char> receive_message(const std::string& step, int timeout_ms) override;
  bool message_based() const override { return false; }
  std::vector<char> drain(int wait_ms) override;
  bool peer_closed() override;
  void close();

 private:
  OobChannel(int fd, bool is_client, std::string peer) : fd_(fd), is_client_(is_client), peer_(std::move(peer)) {}
  int fd_ = -1;
  bool is_client_ = false;
  std::string peer_;
};

}  // namespace rdmadiag::perftest
