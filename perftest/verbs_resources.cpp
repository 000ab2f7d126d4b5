#include "perftest/verbs_resources.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "perftest/errors.h"

namespace rdmadiag::perftest {

namespace fs = std::filesystem;

namespace {
std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}
std::string errno_text() { return std::strerror(errno); }
}  // namespace

bool GidEntry::ipv4_mapped() const {
  for (int i = 0; i < 10; ++i)
    if (gid[static_cast<std::size_t>(i)]) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

std::string GidEntry::text() const {
  char buf[INET6_ADDRSTRLEN] = "";
  inet_ntop(AF_INET6, gid.data(), buf, sizeof buf);
  return buf;
}

std::vector<std::string> list_device_names() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return names;
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

std::vector<GidEntry> read_gid_table(const std::string& device, int port) {
  std::vector<GidEntry> table;
  const fs::path base = fs::path("/sys/class/infiniband") / device / "ports" / std::to_string(port);
  std::error_code ec;
  for (int index = 0;; ++index) {
    const fs::path gid_file = base / "gids" / std::to_string(index);
    if (!fs::exists(gid_file, ec)) break;
    const std::string text = read_line(gid_file);
    GidEntry e;
    e.index = index;
    if (inet_pton(AF_INET6, text.c_str(), e.gid.data()) != 1) continue;
    if (std::all_of(e.gid.begin(), e.gid.end(), [](std::uint8_t b) { return b == 0; })) continue;
    e.type = read_line(base / "gid_attrs" / "types" / std::to_string(index));
    if (e.type == "RoCE V2" || e.type == "RoCE v2") e.type = "RoCE v2";
    else if (e.type == "IB/RoCE v1") e.type = read_line(base / "link_layer") == "InfiniBand" ? "IB" : "RoCE v1";
    e.netdev = read_line(base / "gid_attrs" / "ndevs" / std::to_string(index));
    table.push_back(e);
  }
  return table;
}

int choose_gid_index(const std::vector<GidEntry>& table) {
  auto find = [&](auto pred) -> int {
    for (const auto& e : table)
      if (pred(e)) return e.index;
    return -1;
  };
  for (auto pred : {+[](const GidEntry& e) { return e.type == "RoCE v2" && e.ipv4_mapped(); },
                    +[](const GidEntry& e) { return e.type == "RoCE v2"; },
                    +[](const GidEntry& e) { return e.ipv4_mapped(); }}) {
    if (const int i = find(pred); i >= 0) return i;
  }
  return table.empty() ? 0 : table.front().index;
}

std::map<std::string, std::uint64_t> read_port_counters(const std::string& device, int port) {
  std::map<std::string, std::uint64_t> out;
  const fs::path base = fs::path("/sys/class/infiniband") / device / "ports" / std::to_string(port);
  std::error_code ec;
  for (const char* dir : {"counters", "hw_counters"}) {
    for (fs::directory_iterator it(base / dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string v = read_line(it->path());
      char* endp = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &endp, 10);
      if (endp != v.c_str()) out[std::string(dir) + "/" + it->path().filename().string()] = n;
    }
  }
  return out;
}

std::string link_layer_name(int ll) {
  switch (ll) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unspecified";
  }
}

std::string port_state_name(int state) {
  switch (state) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
  }
}

int mtu_bytes(int m) { return (m >= 1 && m <= 5) ? 128 << m : 0; }

VerbsResources::VerbsResources(const ResourceRequest& req)
    : cm_id_(req.probe_only ? nullptr : req.cm_id), port_(req.port), transport_(req.transport) {
  send_test_ = req.send_test;
  if (cm_id_) {
    // rdma_cm chose the device and port that reach the peer's address.
    owns_context_ = false;
    context_ = cm_id_->verbs;
    device_name_ = ibv_get_device_name(context_->device);
    port_ = cm_id_->port_num;
  } else {
    open_device(req.device);
  }
  try {
    check_port();
    choose_gid(req);
    out_reads_ = std::clamp(req.out_reads, 1, std::max(1, device_attr_.max_qp_rd_atom));
    if (req.probe_only) return;
    allocate_buffers(req);
    create_queue_pairs(req);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

// The device asked for (the first one when none was), opened.
void VerbsResources::open_device(const std::string& device) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    throw RunError(kNoDeviceMessage);
  }
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + name;
    if (device.empty() ? i == 0 : name == device) chosen = list[i];
  }
  if (!chosen) {
    ibv_free_device_list(list);
    throw RunError("RDMA device '" + device + "' not found; devices: " + names + " (see `rdmadiag devices`)");
  }
  device_name_ = ibv_get_device_name(chosen);
  context_ = ibv_open_device(chosen);
  ibv_free_device_list(list);
  if (!context_) throw RunError("cannot open RDMA device " + device_name_ + ": " + errno_text());
}

// The device's attributes and the port's, which must be ACTIVE.
void VerbsResources::check_port() {
  if (ibv_query_device(context_, &device_attr_)) throw RunError("ibv_query_device failed: " + errno_text());
  if (port_ < 1 || port_ > device_attr_.phys_port_cnt)
    throw RunError("device " + device_name_ + " has no port " + std::to_string(port_) + " (it has " +
                   std::to_string(device_attr_.phys_port_cnt) + ")");
  if (ibv_query_port(context_, static_cast<std::uint8_t>(port_), &port_attr_))
    throw RunError("ibv_query_port failed: " + errno_text());
  if (port_attr_.state != IBV_PORT_ACTIVE)
    throw RunError("port " + std::to_string(port_) + " of " + device_name_ + " is " + port_state_name(port_attr_.state) +
                   ", not ACTIVE: check the link/cable, the netdev under it (ip link) or the subnet manager (IB)");
}

void VerbsResources::choose_gid(const ResourceRequest& req) {
  if (cm_id_) {
    choose_gid_for_cm_address();
    return;
  }
  // GID: RoCE always needs one; IB uses LID addressing unless -x was given (as perftest).
  const auto table = read_gid_table(device_name_, port_);
  const bool ethernet = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (req.gid_index || ethernet) {
    const int index = req.gid_index ? *req.gid_index : choose_gid_index(table);
    const auto it = std::find_if(table.begin(), table.end(), [&](const GidEntry& e) { return e.index == index; });
    if (it == table.end()) {
      std::string valid;
      for (const auto& e : table)
        valid += "\n  " + std::to_string(e.index) + "  " + e.type + "  " + e.text() + (e.netdev.empty() ? "" : "  " + e.netdev);
      throw RunError("GID index " + std::to_string(index) + " is not valid on " + device_name_ + " port " +
                     std::to_string(port_) + (valid.empty() ? " (the GID table is empty: no IP address on the netdev?)"
                                                               : "; valid GIDs:" + valid));
    }
    gid_index_ = index;
    gid_ = *it;
  }
}

// The protection domain, the registered buffer, the completion channel and queues.
void VerbsResources::allocate_buffers(const ResourceRequest& req) {
  pd_ = ibv_alloc_pd(context_);
  if (!pd_) throw RunError("ibv_alloc_pd failed: " + errno_text());
  const std::size_t grh_room = req.transport == Transport::UD ? kGrhSize : 0;
  region_size_ = (std::max<std::size_t>(req.buffer_size + grh_room, 64) + kCreditRoom + 4095) / 4096 * 4096;
  const int qp_count = std::max(req.qp_count, 1);
  planned_qps_ = static_cast<std::size_t>(qp_count);
  const std::size_t buffer_bytes = 2 * static_cast<std::size_t>(qp_count) * region_size_;
  if (posix_memalign(reinterpret_cast<void**>(&buffer_), 4096, buffer_bytes) != 0)
    throw RunError("cannot allocate " + std::to_string(buffer_bytes) + " bytes of buffer");
  std::memset(buffer_, 0, buffer_bytes);
  mr_ = ibv_reg_mr(pd_, buffer_, buffer_bytes,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  if (!mr_) throw RunError("ibv_reg_mr of " + std::to_string(buffer_bytes) + " bytes failed: " + errno_text() +
                           " (locked-memory limit? see ulimit -l)");
  if (req.use_events) {
    channel_ = ibv_create_comp_channel(context_);
    if (!channel_) throw RunError("ibv_create_comp_channel failed: " + errno_text());
  }
  send_cq_ = ibv_create_cq(context_, req.send_queue_depth * qp_count + 1, nullptr, channel_, 0);
  recv_cq_ = ibv_create_cq(context_, req.recv_queue_depth * qp_count + 1, nullptr, channel_, 0);
  if (!send_cq_ || !recv_cq_) throw RunError("ibv_create_cq failed: " + errno_text());
}

void VerbsResources::create_queue_pairs(const ResourceRequest& req) {
  const int qp_count = std::max(req.qp_count, 1);
  ibv_qp_init_attr init{};
  qp_ = create_qp(req, init, cm_id_);
  // Inline only up to what was asked for (as perftest): providers round the capacity up
  // (rxe grants 16 bytes for 0), and using it would change what is measured.
  inline_size_ = std::min(static_cast<int>(init.cap.max_inline_data), std::max(req.max_inline, 0));

  std::random_device rd;
  psn_ = rd() & 0xffffff;
  if (cm_id_) return;  // rdma_cm moves the QP through INIT, RTR and RTS when it connects
  move_to_init(qp_);
  for (int i = 1; i < qp_count; ++i) {
    ibv_qp_init_attr extra_init{};
    extra_qps_.push_back({create_qp(req, extra_init, nullptr), static_cast<std::uint32_t>(rd() & 0xffffff)});
    move_to_init(extra_qps_.back().qp);
  }
}

void VerbsResources::add_cm_qp(rdma_cm_id* id, const ResourceRequest& request) {
  if (qp_count() >= planned_qps_) throw RunError("more rdma_cm QPs than -q planned (internal error)");
  ibv_qp_init_attr init{};
  std::random_device rd;
  extra_qps_.push_back({create_qp(request, init, id), static_cast<std::uint32_t>(rd() & 0xffffff), id});
}

void VerbsResources::remove_last_cm_qp() {
  if (extra_qps_.empty() || !extra_qps_.back().cm_id) return;
  rdma_destroy_qp(extra_qps_.back().cm_id);
  extra_qps_.pop_back();
}

ibv_qp* VerbsResources::create_qp(const ResourceRequest& req, ibv_qp_init_attr& init, rdma_cm_id* id) {
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.cap.max_send_wr = static_cast<std::uint32_t>(req.send_queue_depth);
  init.cap.max_recv_wr = static_cast<std::uint32_t>(req.recv_queue_depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = static_cast<std::uint32_t>(std::max(req.max_inline, 0));
  init.qp_type = req.transport == Transport::UC ? IBV_QPT_UC : req.transport == Transport::UD ? IBV_QPT_UD : IBV_QPT_RC;
  init.sq_sig_all = 0;
  ibv_qp* qp = nullptr;
  if (id) {
    if (rdma_create_qp(id, pd_, &init) == 0) qp = id->qp;
  } else {
    qp = ibv_create_qp(pd_, &init);
  }
  if (!qp)
    throw RunError("ibv_create_qp failed: " + errno_text() +
                   (req.max_inline > 0 ? " (inline size " + std::to_string(req.max_inline) + " may exceed the device's; try -I 0)" : ""));
  return qp;
}

void VerbsResources::move_to_init(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<std::uint8_t>(port_);
  int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (transport_ == Transport::UD) {
    attr.qkey = kUdQkey;  // what the peer puts in its UD sends
    init_mask |= IBV_QP_QKEY;
  } else {
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    init_mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (ibv_modify_qp(qp, &attr, init_mask)) throw RunError("cannot move the QP to INIT: " + errno_text());
}

VerbsResources::~VerbsResources() { release(); }

void VerbsResources::choose_gid_for_cm_address() {
  // The GID is only reported with -R (rdma_cm addresses the peer itself): the entry that
  // holds the local IPv4 address rdma_cm bound to, preferring RoCE v2; none on iWARP.
  const sockaddr* local = rdma_get_local_addr(cm_id_);
  if (!local || local->sa_family != AF_INET) return;
  std::array<std::uint8_t, 16> mapped{};
  mapped[10] = mapped[11] = 0xff;
  std::memcpy(mapped.data() + 12, &reinterpret_cast<const sockaddr_in*>(local)->sin_addr, 4);
  const auto table = read_gid_table(device_name_, port_);
  const GidEntry* best = nullptr;
  for (const auto& e : table)
    if (e.gid == mapped && (!best || e.type == "RoCE v2")) best = &e;
  if (best) {
    gid_index_ = best->index;
    gid_ = *best;
  }
}

int VerbsResources::qp_path_mtu() const {
  if (!qp_) return 0;
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp_, &attr, IBV_QP_PATH_MTU, &init)) return 0;
  return attr.path_mtu >= IBV_MTU_256 && attr.path_mtu <= IBV_MTU_4096 ? static_cast<int>(attr.path_mtu) : 0;
}

void VerbsResources::release() {
  if (ah_) ibv_destroy_ah(ah_);
  ah_ = nullptr;
  for (auto& extra : extra_qps_)
    if (extra.cm_id) rdma_destroy_qp(extra.cm_id);
    else if (extra.qp) ibv_destroy_qp(extra.qp);
  extra_qps_.clear();
  if (qp_ && cm_id_) rdma_destroy_qp(cm_id_);
  else if (qp_) ibv_destroy_qp(qp_);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (mr_) ibv_dereg_mr(mr_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (context_ && owns_context_) ibv_close_device(context_);
  std::free(buffer_);
  qp_ = nullptr;
  send_cq_ = recv_cq_ = nullptr;
  channel_ = nullptr;
  mr_ = nullptr;
  pd_ = nullptr;
  context_ = nullptr;
  buffer_ = nullptr;
}

oob::KeyMessage VerbsResources::key_message(std::size_t qp_index) const {
  oob::KeyMessage k;
  k.lid = port_attr_.lid;
  k.out_reads = static_cast<std::uint32_t>(out_reads_);
  k.qpn = qp(qp_index)->qp_num;
  k.psn = qp_psn(qp_index);
  k.rkey = mr_->rkey;
  // perftest's SEND tests on iWARP advertise their credit word here (a SEND needs no address).
  const bool credit = send_test_ && context_->device->transport_type == IBV_TRANSPORT_IWARP;
  k.vaddr = reinterpret_cast<std::uintptr_t>(credit ? credit_word(qp_index) : recv_region(qp_index));
  if (gid_) k.gid = gid_->gid;
  k.srqn = 0;
  return k;
}

void VerbsResources::connect(const oob::KeyMessage& remote, int mtu, int traffic_class, int qp_timeout, int sl,
                             std::size_t qp_index) {
  ibv_qp* const target = qp(qp_index);
  const std::uint32_t start_psn = qp_psn(qp_index);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(mtu);
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.ah_attr.dlid = static_cast<std::uint16_t>(remote.lid);
  attr.ah_attr.sl = static_cast<std::uint8_t>(sl);
  attr.ah_attr.port_num = static_cast<std::uint8_t>(port_);
  if (gid_) {
    if (!remote.gid) throw RunError("the peer sent no GID but this port needs one (RoCE): use -x on both sides");
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid->data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
    attr.ah_attr.grh.hop_limit = 64;
    attr.ah_attr.grh.traffic_class = static_cast<std::uint8_t>(std::max(traffic_class, 0));
    attr.ah_attr.grh.flow_label = flow_label_;
  }
  if (transport_ == Transport::UD) {
    // UD: no peer in the QP; the peer's address goes into an address handle for each send.
    if (!ah_) ah_ = ibv_create_ah(pd_, &attr.ah_attr);  // -q: one peer, one address handle
    if (!ah_) throw RunError("ibv_create_ah toward the peer failed: " + errno_text() + " (wrong GID index or type?)");
    ibv_qp_attr rtr{};
    rtr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(target, &rtr, IBV_QP_STATE)) throw RunError("cannot move the UD QP to RTR: " + errno_text());
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.sq_psn = start_psn;
    if (ibv_modify_qp(target, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN)) throw RunError("cannot move the UD QP to RTS: " + errno_text());
    return;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (transport_ == Transport::RC) {
    // Accept as many incoming reads/atomics as we announced; perftest does the same.
    attr.max_dest_rd_atomic = static_cast<std::uint8_t>(std::min(out_reads_, 255));
    attr.min_rnr_timer = 12;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  if (ibv_modify_qp(target, &attr, mask))
    throw RunError("cannot move the QP to RTR: " + errno_text() +
                   " (wrong GID index/type for the peer's GID, or an MTU the port does not support)");
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = start_psn;
  int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (transport_ == Transport::RC) {
    rts.timeout = static_cast<std::uint8_t>(qp_timeout);
    rts.retry_cnt = 7;
    rts.rnr_retry = 7;
    // We issue at most as many reads/atomics as the peer accepts.
    rts.max_rd_atomic = static_cast<std::uint8_t>(std::min<std::uint32_t>({static_cast<std::uint32_t>(out_reads_), remote.out_reads ? remote.out_reads : 1u, 255u}));
    rts_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (ibv_modify_qp(target, &rts, rts_mask)) throw RunError("cannot move the QP to RTS: " + errno_text());
}

std::string completion_status_name(int status) {
  return std::string("IBV_WC_") + [&] {
    switch (status) {
      case IBV_WC_SUCCESS: return "SUCCESS";
      case IBV_WC_LOC_LEN_ERR: return "LOC_LEN_ERR";
      case IBV_WC_LOC_QP_OP_ERR: return "LOC_QP_OP_ERR";
      case IBV_WC_LOC_EEC_OP_ERR: return "LOC_EEC_OP_ERR";
      case IBV_WC_LOC_PROT_ERR: return "LOC_PROT_ERR";
      case IBV_WC_WR_FLUSH_ERR: return "WR_FLUSH_ERR";
      case IBV_WC_MW_BIND_ERR: return "MW_BIND_ERR";
      case IBV_WC_BAD_RESP_ERR: return "BAD_RESP_ERR";
      case IBV_WC_LOC_ACCESS_ERR: return "LOC_ACCESS_ERR";
      case IBV_WC_REM_INV_REQ_ERR: return "REM_INV_REQ_ERR";
      case IBV_WC_REM_ACCESS_ERR: return "REM_ACCESS_ERR";
      case IBV_WC_REM_OP_ERR: return "REM_OP_ERR";
      case IBV_WC_RETRY_EXC_ERR: return "RETRY_EXC_ERR";
      case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR_RETRY_EXC_ERR";
      case IBV_WC_LOC_RDD_VIOL_ERR: return "LOC_RDD_VIOL_ERR";
      case IBV_WC_REM_INV_RD_REQ_ERR: return "REM_INV_RD_REQ_ERR";
      case IBV_WC_REM_ABORT_ERR: return "REM_ABORT_ERR";
      case IBV_WC_INV_EECN_ERR: return "INV_EECN_ERR";
      case IBV_WC_INV_EEC_STATE_ERR: return "INV_EEC_STATE_ERR";
      case IBV_WC_FATAL_ERR: return "FATAL_ERR";
      case IBV_WC_RESP_TIMEOUT_ERR: return "RESP_TIMEOUT_ERR";
      case IBV_WC_GENERAL_ERR: return "GENERAL_ERR";
      default: return "UNKNOWN";
    }
  }();
}

std::string completion_status_hint(int status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer never acknowledged: it is unreachable on the RDMA path (wrong GID index or GID type, "
             "different subnet/VLAN, peer QP gone because the peer exited, or packets dropped)";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted: it is not running a SEND test or fell behind";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused the remote address/rkey: it runs a different test or buffer size (-s/-a)";
    case IBV_WC_REM_INV_REQ_ERR:
      return "the peer's QP rejected the operation: mismatched test (e.g. READ/ATOMIC against a QP without "
             "remote access) or message larger than its receive buffer";
    case IBV_WC_LOC_LEN_ERR:
      return "a message was longer than the posted receive buffer: the two sides use different sizes (-s)";
    case IBV_WC_WR_FLUSH_ERR:
      return "the QP went to the error state because of an earlier error";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return "a local buffer/key problem (an rdmadiag bug if it happens)";
    case IBV_WC_REM_OP_ERR:
      return "the peer could not complete the operation (its QP or memory is in error)";
    default:
      return "see ibv_poll_cq(3)";
  }
}

}  // namespace rdmadiag::perftest
