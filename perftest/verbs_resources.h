// rdma-core resources for one test: device, port, GID, PD, MR, CQs, one QP; and the QP
// state transitions with perftest's attribute values so both ends agree.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perftest/oob_protocol.h"

namespace rdmadiag::perftest {

struct GidEntry {
  int index = 0;
  std::array<std::uint8_t, 16> gid{};
  std::string type;    // "IB", "RoCE v1", "RoCE v2"
  std::string netdev;  // from sysfs, may be empty
  bool ipv4_mapped() const;
  std::string text() const;  // "fe80::..." / "::ffff:10.77.0.1"
};

std::vector<std::string> list_device_names();
// GID table of a port from sysfs (types and netdevs) with the verbs' values; skips empty ones.
std::vector<GidEntry> read_gid_table(const std::string& device, int port);
// perftest's automatic choice: a RoCE v2 IPv4-mapped GID, else RoCE v2, else RoCE v1 IPv4, else 0.
int choose_gid_index(const std::vector<GidEntry>& table);
// sysfs port counters ("counters" and "hw_counters"), name -> value.
std::map<std::string, std::uint64_t> read_port_counters(const std::string& device, int port);
std::string link_layer_name(int link_layer);
std::string port_state_name(int state);
int mtu_bytes(int ibv_mtu_enum);

enum class Transport { RC, UC, UD };

inline constexpr std::uint32_t kUdQkey = 0x11111111;  // perftest's DEF_QKEY
inline constexpr int kGrhSize = 40;                   // a UD receive starts with the GRH

struct ResourceRequest {
  std::string device;        // empty: the first device
  int port = 1;
  std::optional<int> gid_index;
  Transport transport = Transport::RC;
  std::size_t buffer_size = 4096;  // each of the two regions (send/source and receive/target)
  int send_queue_depth = 128;
  int recv_queue_depth = 1;
  int max_inline = 0;
  bool use_events = false;
  int out_reads = 1;               // for READ/ATOMIC: the device maximum
  // -R: the device, port and QP come from this rdma_cm id (bound to a device by address or
  // route resolution); the QP is created with rdma_create_qp and connected by rdma_cm.
  rdma_cm_id* cm_id = nullptr;
  // Only open and check the device, port and GID (no PD, buffers or QP): with -R the real
  // resources come later, on the device rdma_cm picks.
  bool probe_only = false;
  // -q: QPs sharing the PD, MR and CQs; each has its own send and receive slot in the buffer.
  // With cm_id only the first is created here; add_cm_qp adds the others, one per rdma_cm id.
  int qp_count = 1;
  // A SEND test: on iWARP the key message's address is the QP's send-credit word (see
  // credit_word), where perftest's peer RDMA WRITEs its receive count.
  bool send_test = false;
};

class VerbsResources {
 public:
  explicit VerbsResources(const ResourceRequest& request);
  ~VerbsResources();
  VerbsResources(const VerbsResources&) = delete;
  VerbsResources& operator=(const VerbsResources&) = delete;

  ibv_context* context() const { return context_; }
  ibv_qp* qp() const { return qp_; }
  ibv_qp* qp(std::size_t index) const { return index == 0 ? qp_ : extra_qps_[index - 1].qp; }
  std::size_t qp_count() const { return 1 + extra_qps_.size(); }
  ibv_cq* send_cq() const { return send_cq_; }
  ibv_cq* recv_cq() const { return recv_cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  ibv_mr* mr() const { return mr_; }
  // The buffer holds qp_count() send slots, then qp_count() receive slots.
  char* send_region(std::size_t qp_index = 0) const { return buffer_ + qp_index * region_size_; }
  char* recv_region(std::size_t qp_index = 0) const { return buffer_ + (planned_qps_ + qp_index) * region_size_; }
  std::size_t region_size() const { return region_size_; }
  // The last kCreditRoom bytes of receive slot q, past any message received there: the word the
  // peer's send-credit RDMA WRITE lands in, then (at +32) the word ours is written from.
  static constexpr std::size_t kCreditRoom = 64;
  char* credit_word(std::size_t qp_index = 0) const { return recv_region(qp_index) + region_size_ - kCreditRoom; }
  char* credit_source(std::size_t qp_index = 0) const { return credit_word(qp_index) + 32; }
  const ibv_port_attr& port_attr() const { return port_attr_; }
  const ibv_device_attr& device_attr() const { return device_attr_; }
  const std::string& device_name() const { return device_name_; }
  int port() const { return port_; }
  int gid_index() const { return gid_index_; }  // -1 when the link is IB and no GID is used
  const std::optional<GidEntry>& gid() const { return gid_; }
  bool uses_gid() const { return gid_index_ >= 0; }
  int inline_size() const { return inline_size_; }
  std::uint32_t psn() const { return psn_; }
  int out_reads() const { return out_reads_; }
  int max_initiator_depth() const { return std::max(1, device_attr_.max_qp_init_rd_atom); }
  bool connected_by_rdma_cm() const { return cm_id_ != nullptr; }
  // UD: the address handle toward the peer (after connect), else null.
  ibv_ah* address_handle() const { return ah_; }
  int receive_overhead() const { return transport_ == Transport::UD ? kGrhSize : 0; }
  // The path MTU (ibv_mtu enum) of the connected QP, 0 when the provider does not say.
  int qp_path_mtu() const;

  // Our key message (receive region address, rkey, QPN, PSN, GID, out_reads).
  oob::KeyMessage key_message(std::size_t qp_index = 0) const;
  // --flow_label: the GRH flow label connect() gives every QP.
  void set_flow_label(std::uint32_t label) { flow_label_ = label & 0xfffff; }
  // INIT -> RTR -> RTS toward the peer; mtu is the ibv_mtu enum agreed with the peer.
  void connect(const oob::KeyMessage& remote, int mtu, int traffic_class, int qp_timeout, int sl,
               std::size_t qp_index = 0);
  // -q with -R: the next QP, created on its own rdma_cm id (same PD, CQs and buffer slots as
  // planned by request.qp_count); remove_last_cm_qp undoes it (a client's failed attempt).
  void add_cm_qp(rdma_cm_id* id, const ResourceRequest& request);
  void remove_last_cm_qp();

 private:
  struct ExtraQp {
    ibv_qp* qp = nullptr;
    std::uint32_t psn = 0;
    rdma_cm_id* cm_id = nullptr;  // -R: created by rdma_create_qp on this id
  };
  void release();
  void choose_gid_for_cm_address();
  // The constructor's steps, in order.
  void open_device(const std::string& device);
  void check_port();
  void choose_gid(const ResourceRequest& req);
  void allocate_buffers(const ResourceRequest& req);
  void create_queue_pairs(const ResourceRequest& req);
  ibv_qp* create_qp(const ResourceRequest& req, ibv_qp_init_attr& init, rdma_cm_id* id);
  void move_to_init(ibv_qp* qp);
  std::uint32_t qp_psn(std::size_t index) const { return index == 0 ? psn_ : extra_qps_[index - 1].psn; }
  std::vector<ExtraQp> extra_qps_;  // -q: QPs 1..N-1
  std::uint32_t flow_label_ = 0;
  rdma_cm_id* cm_id_ = nullptr;
  bool owns_context_ = true;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_ah* ah_ = nullptr;
  char* buffer_ = nullptr;
  std::size_t region_size_ = 0;
  std::size_t planned_qps_ = 1;  // request.qp_count: the buffer's slots
  bool send_test_ = false;
  ibv_port_attr port_attr_{};
  ibv_device_attr device_attr_{};
  std::string device_name_;
  int port_ = 1;
  int gid_index_ = -1;
  std::optional<GidEntry> gid_;
  int inline_size_ = 0;
  std::uint32_t psn_ = 0;
  int out_reads_ = 1;
  Transport transport_ = Transport::RC;
};

}  // namespace rdmadiag::perftest
