// Per-command NVMe over Fabrics analysis on RDMA: see nvme_analysis.h.
#include "decode/nvme_analysis.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "decode/endpoints.h"

namespace rdmadiag::decode {

namespace {

std::size_t mix(std::size_t h, std::uint64_t v) {
  return (h ^ v) * 0x100000001B3ULL;
}

std::size_t hash_address(std::size_t h, const IpAddress& a) {
  for (auto b : a) h = mix(h, b);
  return h;
}

// A cause as its bit in a set of kinds.
std::uint8_t bit(NvmeCause c) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(c)); }

// The transport events on this frame's queue pair that can delay a command: a
// bit per NvmeCause (0: none).
std::uint8_t transport_event_kinds(const DecodedPacket& p, const PacketVerdict* v) {
  std::uint8_t kinds = 0;
  if (v && v->gap) kinds |= bit(NvmeCause::psn_gap);
  if (v && v->retransmission) kinds |= bit(NvmeCause::retransmission);
  if (v && v->duplicate) kinds |= bit(NvmeCause::duplicate);
  if (v && v->out_of_order) kinds |= bit(NvmeCause::out_of_order);
  if (v && v->cnp) kinds |= bit(NvmeCause::cnp);
  if (p.has_bth && p.ib.has(kAeth)) {
    const AethKind k = p.ib.aeth.kind();
    if (k == AethKind::nak) kinds |= bit(NvmeCause::nak);
    if (k == AethKind::rnr_nak) kinds |= bit(NvmeCause::rnr_nak);
  }
  return kinds;
}

// The TCP events of an iWARP frame, as NvmeCause bits (0: none).
std::uint8_t tcp_event_kinds(const IwarpFrame& f) {
  std::uint8_t kinds = 0;
  if (f.tcp_holes) kinds |= bit(NvmeCause::tcp_hole);
  if (f.tcp_retransmissions) kinds |= bit(NvmeCause::retransmission);
  return kinds;
}

}  // namespace

void LatencyHistogram::add(double us) {
  const double v = std::max(us, 0.0);
  std::size_t i = v <= 1.0 ? 0 : static_cast<std::size_t>(std::ceil(std::log2(v) * 4));
  i = std::min(i, kBuckets - 1);
  ++counts[i];
  min_us = n == 0 ? v : std::min(min_us, v);
  max_us = n == 0 ? v : std::max(max_us, v);
  sum_us += v;
  ++n;
}

double LatencyHistogram::bucket_upper_us(std::size_t i) { return std::exp2(static_cast<double>(i) / 4); }

double LatencyHistogram::percentile_upper_us(double p) const {
  if (n == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(n)));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts[i];
    if (seen >= std::max<std::uint64_t>(rank, 1)) return std::min(bucket_upper_us(i), max_us);
  }
  return max_us;
}

std::string_view NvmeCommandResult::name() const {
  NvmeCommand c;
  c.opcode = fabrics ? kNvmeFabricsOpcode : opcode;
  c.fctype = fctype;
  return nvme_opcode_name(c, kind);
}

std::string_view nvme_cause_name(NvmeCause c) {
  static constexpr std::array<std::string_view, kNvmeCauseKinds> kNames = {
      "psn_gap", "retransmission", "duplicate", "out_of_order", "cnp", "nak", "rnr_nak", "tcp_hole"};
  return c < NvmeCause::count_ ? kNames[static_cast<std::size_t>(c)] : "unknown";
}

std::string_view NvmeCommandResult::status_name() const {
  return nvme_status_name(sct, sc, fabrics && fctype == static_cast<std::uint8_t>(FabricsType::connect));
}

std::size_t nvme_size_class(std::uint32_t bytes) {
  std::size_t c = 0;
  for (std::uint64_t upper = 512; c + 1 < kNvmeSizeClasses && bytes > upper; upper *= 2) ++c;
  return c;
}

std::uint64_t nvme_size_class_upper(std::size_t size_class) {
  return size_class + 1 < kNvmeSizeClasses ? std::uint64_t{512} << size_class : 0;
}

double NvmeCommandResult::data_transfer_us() const {
  return data_first_frame ? static_cast<double>(data_last_ns - data_first_ns) / 1e3 : -1;
}

// One NVMe queue pair direction: (destination address, destination QPN).
struct NvmeAnalyzer::QueuePair {
  bool controller_side = false;  // receives commands (else: receives completions)
  bool bound = false;            // its queue is known
  std::uint64_t bound_frame = 0; // since this frame (a command ending earlier but reported later is not on it)
  NvmeQueueKey queue;
  std::int64_t last_ns = 0;
  // The other direction of the same connection (from the rdma_cm exchange; iWARP: the TCP connection).
  std::optional<NvmeQpKey> peer;
  NvmeQpKey key;
  // Mid-stream: the CIDs of its latest unbound commands and who sent them (find_peer).
  std::array<std::uint16_t, 8> recent_cids{};
  std::uint8_t recent_next = 0, recent_count = 0, peer_tries = 0;
  IpAddress sender{};
  void note_unbound(std::uint16_t cid, const IpAddress& from) {
    recent_cids[recent_next] = cid;
    recent_next = static_cast<std::uint8_t>((recent_next + 1) % recent_cids.size());
    recent_count = static_cast<std::uint8_t>(std::min<std::size_t>(recent_count + 1u, recent_cids.size()));
    sender = from;
  }
  bool recently(std::uint16_t cid) const {
    const auto end = recent_cids.begin() + recent_count;
    return std::find(recent_cids.begin(), end, cid) != end;
  }
  // (PSN, CID) of its latest capsules (iWARP: TCP sequence number, CID). A
  // capsule with both again is a copy (an RC resend after its first copy was
  // seen, a network duplicate; iWARP: bytes the TCP pass took for new, as
  // after the connection's FIN), however late: not a new command or
  // completion (IBA 9.7.4.1: a resend keeps its PSN). Notes a new one.
  std::array<std::uint64_t, 64> recent_capsules{};
  std::uint8_t capsule_next = 0;
  bool copy_of_recent(std::int64_t psn, std::uint16_t cid) {
    if (psn < 0) return false;
    const std::uint64_t k = std::uint64_t{1} << 63 | static_cast<std::uint64_t>(psn) << 16 | cid;
    if (std::find(recent_capsules.begin(), recent_capsules.end(), k) != recent_capsules.end()) return true;
    recent_capsules[capsule_next] = k;
    capsule_next = static_cast<std::uint8_t>((capsule_next + 1) % recent_capsules.size());
    return false;
  }
};

struct PendingCommand {
  NvmeCommandResult result;
  std::uint64_t events_at_submit = 0;
  std::array<std::uint64_t, kNvmeCauseKinds> causes_at_submit{};
};

struct NvmeAnalyzer::Queue {
  NvmeQueueStats stats;
  std::unordered_map<std::uint16_t, PendingCommand> outstanding;
  NvmeDataMatcher data;
  NvmeIwarpDataMatcher iwarp_data;
};

std::size_t NvmeAnalyzer::QpKeyHash::operator()(const NvmeQpKey& k) const {
  const std::size_t h = mix(mix(hash_address(0xCBF29CE484222325ULL, k.dst), k.qpn), k.point);
  return k.tcp ? hash_address(mix(h, 1), k.src) : h;
}

std::size_t NvmeAnalyzer::QueueKeyHash::operator()(const NvmeQueueKey& k) const {
  return mix(mix(hash_address(hash_address(0xCBF29CE484222325ULL, k.host), k.controller), k.qid), k.point);
}

NvmeAnalyzer::NvmeAnalyzer() : qps_(kMaxQueuePairs), queues_(kMaxQueues) {}
NvmeAnalyzer::~NvmeAnalyzer() = default;

std::size_t NvmeAnalyzer::opcode_index(const NvmeCommandResult& r) {
  const std::size_t kind = r.fabrics ? 3 : static_cast<std::size_t>(r.kind);
  return kind * 256 + (r.fabrics ? r.fctype : r.opcode);
}

std::int64_t NvmeAnalyzer::time_of(std::uint64_t frame, std::int64_t fallback) const {
  const auto& [f, ns] = frame_times_[frame % kFrameTimes];
  return f == frame ? ns : fallback;
}

void NvmeAnalyzer::add(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, const PacketAnalysis* analysis) {
  frame_times_[frame % kFrameTimes] = {frame, ts_ns};
  if (!p.has_bth) {
    if (p.tcp && analysis) add_iwarp(p, analysis->iwarp, frame, ts_ns);
    return;
  }
  if (p.cm) add_cm(p);
  const NvmeRdmaPayload c = classify_nvme_rdma(p);
  const Endpoints e = endpoints_of(p);
  const NvmeQpKey to{e.dst, p.ib.bth.dest_qp, false, {}, p.capture_point};
  const Hop h{to, e.src, e.dst, p.ib.bth.psn};
  if (c.role == NvmeRdmaRole::data)
    add_data(p, frame, ts_ns);
  else
    add_capsule(h, c, frame, ts_ns, analysis && (analysis->duplicate || analysis->retransmission));
  if (const std::uint8_t kinds = transport_event_kinds(p, analysis))
    add_transport_event(to, frame, ts_ns, kinds);
}

void NvmeAnalyzer::add_capsule(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns,
                               bool resent) {
  if (c.role == NvmeRdmaRole::command)
    add_command(h, c, frame, ts_ns);
  else if (c.role == NvmeRdmaRole::response)
    add_response(h, c, frame, ts_ns, resent);
}

// NVMe over iWARP: the DDP segments that ended in this TCP frame (iwarp_analysis.h).
// The connection's two directions are bound as one queue pair's, as rdma_cm's
// REQ/REP does on RoCE: the port says which end is the controller.
void NvmeAnalyzer::add_iwarp(const DecodedPacket& p, const IwarpFrame& units, std::uint64_t frame, std::int64_t ts_ns) {
  const bool to_controller = p.tcp->dst_port == port_, from_controller = p.tcp->src_port == port_;
  if (p.tcp_payload_len && (to_controller || from_controller)) ++totals_.iwarp_segments;
  const std::uint8_t kinds = tcp_event_kinds(units);
  if ((units.empty() && !kinds) || (!to_controller && !from_controller && !assume_all_)) return;
  const Endpoints e = endpoints_of(p);
  const auto ports = [](std::uint16_t src, std::uint16_t dst) { return std::uint32_t{src} << 16 | dst; };
  const Hop h{NvmeQpKey{e.dst, ports(p.tcp->src_port, p.tcp->dst_port), true, e.src, p.capture_point}, e.src, e.dst};
  const NvmeQpKey back{e.src, ports(p.tcp->dst_port, p.tcp->src_port), true, e.dst, p.capture_point};
  if (to_controller || from_controller) mark_connection(to_controller ? back : h.qp, to_controller ? h.qp : back);
  for (const IwarpPdu& u : units) {
    if (u.kind != IwarpPdu::Kind::fpdu || !u.header_decoded) continue;
    const bool long_head = !units.long_head.empty() && &u == units.items.data() + units.long_head_unit;
    const NvmeRdmaPayload c = classify_nvme_iwarp(u.seg, long_head ? Bytes(units.long_head) : u.payload_head_bytes());
    // A unit held behind a TCP hole or framed late (resync) crossed the wire in an earlier frame.
    const std::uint64_t at = u.end_frame ? u.end_frame : frame;
    const std::int64_t at_ns = time_of(at, ts_ns);
    if (c.role == NvmeRdmaRole::data)
      add_iwarp_data(h, u.seg, long_head ? Bytes(units.long_head) : Bytes(), at, at_ns);
    else
      add_capsule(Hop{h.qp, h.src, h.dst, u.seq}, c, at, at_ns, false);  // a copy has its TCP sequence number
  }
  // Bytes from the controller cut by the snap length: a completion may be among them.
  if (from_controller && p.caplen < p.wirelen && p.tcp_payload_len) note_uncaptured(h.qp, frame, ts_ns);
  // After the units it released: a command they complete ended before the event.
  if (kinds) {
    const QueuePair* here = qps_.at(qps_.find(h.qp));
    add_transport_event(here && here->bound ? h.qp : back, frame, ts_ns, kinds);
  }
}

// rdma_cm over IB CM: the REQ names the host's QPN, the REP the controller's.
void NvmeAnalyzer::add_cm(const DecodedPacket& p) {
  const Endpoints e = endpoints_of(p);
  const CmMessage& cm = *p.cm;
  if (cm.type == CmMessageType::req && is_nvme_service(cm.service_id, port_)) {
    if (pending_req_.size() < kMaxQueuePairs)
      pending_req_[std::uint64_t{p.capture_point} << 32 | cm.local_comm_id] = {e.src, cm.local_qpn, false, {}, p.capture_point};
    return;
  }
  if (cm.type != CmMessageType::rep) return;
  const auto it = pending_req_.find(std::uint64_t{p.capture_point} << 32 | cm.remote_comm_id);
  if (it == pending_req_.end()) return;
  mark_connection(it->second, NvmeQpKey{e.src, cm.local_qpn, false, {}, p.capture_point});
  pending_req_.erase(it);
}

// The two directions of one NVMe connection: the host's (completions and data
// come to it) and the controller's (commands come to it).
void NvmeAnalyzer::mark_connection(const NvmeQpKey& host, const NvmeQpKey& controller) {
  const auto mark = [&](const NvmeQpKey& k, const NvmeQpKey& peer, bool controller_side) {
    if (qps_.find(k) != decltype(qps_)::kNone) return;
    const std::uint32_t slot = qps_.emplace(
        k, [](const QueuePair& q) { return static_cast<double>(q.last_ns); }, [](std::uint32_t, QueuePair&) {});
    QueuePair& qp = *qps_.at(slot);
    qp.controller_side = controller_side;
    qp.peer = peer;
    qp.key = k;
    ++totals_.queue_pairs;
  };
  mark(host, controller, false);
  mark(controller, host, true);
}

NvmeAnalyzer::QueuePair* NvmeAnalyzer::queue_pair(const NvmeQpKey& k, bool create, std::int64_t ts_ns) {
  std::uint32_t slot = qps_.find(k);
  if (slot == decltype(qps_)::kNone) {
    if (!create || !assume_all_) return nullptr;
    slot = qps_.emplace(k, [](const QueuePair& q) { return static_cast<double>(q.last_ns); },
                        [](std::uint32_t, QueuePair&) {});
    ++totals_.queue_pairs;
  }
  QueuePair* qp = qps_.at(slot);
  qp->key = k;
  qp->last_ns = ts_ns;
  return qp;
}

NvmeAnalyzer::Queue* NvmeAnalyzer::queue(const NvmeQueueKey& k, bool create, std::uint64_t frame, std::int64_t ts_ns) {
  std::uint32_t slot = queues_.find(k);
  if (slot == decltype(queues_)::kNone) {
    if (!create) return nullptr;
    slot = queues_.emplace(k, [](const Queue& s) { return static_cast<double>(s.stats.last_ns); },
                           [this](std::uint32_t, Queue& s) {
                             totals_.queue_cap_reached = true;
                             retire_queue(s);
                           });
    Queue& made = *queues_.at(slot);
    made.stats.key = k;
    made.stats.first_frame = frame;
    made.stats.first_ns = ts_ns;
  }
  Queue* q = queues_.at(slot);
  q->stats.last_ns = ts_ns;
  return q;
}

namespace {

NvmeCommandResult command_result(const NvmeCommand& cmd, const NvmeQueueKey& key, std::uint64_t frame,
                                 std::int64_t ts_ns) {
  NvmeCommandResult r;
  r.queue = key;
  r.command_frame = frame;
  r.submit_ns = ts_ns;
  r.cid = cmd.cid;
  r.opcode = cmd.opcode;
  r.fabrics = cmd.fabrics();
  r.fctype = cmd.fctype;
  r.kind = key.qid == kNvmeUnknownQid ? NvmeQueueKind::unknown : key.qid == 0 ? NvmeQueueKind::admin : NvmeQueueKind::io;
  r.nsid = cmd.nsid;
  if (!r.fabrics && r.kind == NvmeQueueKind::io && nvme_io_has_lba(cmd.opcode)) {
    r.slba = cmd.slba();
    r.blocks = cmd.blocks();
  }
  if (cmd.sgl.keyed() || cmd.sgl.in_capsule()) r.data_len = cmd.sgl.length;
  if (cmd.sgl.keyed()) {
    r.sgl_address = cmd.sgl.address;
    r.sgl_key = cmd.sgl.key;
    r.sgl_invalidate = cmd.sgl.invalidate();
  }
  return r;
}

// Connect binds the queue pair it arrives on to its queue; its data (when in
// the capsule, as on Linux I/O queues) names the subsystem and the host.
void note_connect(const NvmeCommand& cmd, const NvmeRdmaPayload& c, NvmeQueueStats& stats) {
  stats.connect_seen = true;
  stats.sqsize = cmd.sqsize;
  stats.kato_ms = cmd.kato;
  if (!cmd.sgl.in_capsule() || c.capsule.size() < kNvmeSqeLength) return;
  NvmeConnectData data;
  if (parse_nvme_connect_data(c.capsule.subspan(kNvmeSqeLength), data) != ParseStatus::ok) return;
  stats.subnqn = std::string(data.subsystem());
  stats.hostnqn = std::string(data.host());
}

}  // namespace

void NvmeAnalyzer::add_command(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns) {
  QueuePair* qp = queue_pair(h.qp, true, ts_ns);
  if (!qp) return;
  NvmeCapsuleRecord rec;
  rec.frame = frame;
  rec.command = true;
  ++totals_.capsules;
  const ParseStatus st = parse_nvme_command(c.capsule, c.capsule_len, rec.cmd);
  if (st != ParseStatus::ok) {
    ++(st == ParseStatus::truncated ? totals_.truncated_capsules : totals_.malformed_capsules);
    return;
  }
  const bool copy = qp->copy_of_recent(h.psn, rec.cmd.cid);
  if (rec.cmd.is(FabricsType::connect) && !copy) bind_connect(*qp, NvmeQueueKey{h.src, h.dst, rec.cmd.qid, h.qp.point}, frame);
  const bool on_queue = qp->bound && frame >= qp->bound_frame;
  rec.queue = on_queue ? qp->queue : NvmeQueueKey{h.src, h.dst, kNvmeUnknownQid, h.qp.point};
  NvmeCommandResult r = command_result(rec.cmd, rec.queue, frame, ts_ns);
  if (capsule_sink_) capsule_sink_(rec);
  if (copy) {  // submitted once, when its first copy was seen
    ++totals_.resent_commands;
    return;
  }
  if (!on_queue) {
    ++totals_.commands;
    ++by_opcode_[opcode_index(r)].commands;
    ++totals_.unbound_commands;
    note_unbound_command(qps_.find(h.qp), *qp, r.cid, h.src);
    return;
  }
  if (rec.cmd.is(FabricsType::connect)) restart_queue(qp->queue);
  Queue* q = queue(qp->queue, true, frame, ts_ns);
  if (rec.cmd.is(FabricsType::connect)) note_connect(rec.cmd, c, q->stats);
  const auto same = q->outstanding.find(r.cid);
  if (same != q->outstanding.end() && same->second.result.opcode == r.opcode && same->second.result.slba == r.slba) {
    // An RC resend of a capsule (the first copy, or an ACK, was lost): the
    // command was submitted once, when its first copy was seen.
    ++totals_.resent_commands;
    return;
  }
  ++totals_.commands;
  ++by_opcode_[opcode_index(r)].commands;
  ++q->stats.commands;
  if (same != q->outstanding.end()) {
    // The CID names one outstanding command (NVMe Base 1.4 section 4.2): the
    // earlier one's completion was not captured, so it stays unanswered.
    ++totals_.duplicate_cids;
    leave_unanswered(*q, same->second.result);
  } else if (q->outstanding.size() >= kMaxOutstanding) {
    ++q->stats.outstanding_dropped;
    return;
  }
  q->outstanding[r.cid] = PendingCommand{r, q->stats.transport_events, q->stats.causes};
  const auto depth = static_cast<std::uint32_t>(q->outstanding.size());
  q->stats.max_outstanding = std::max(q->stats.max_outstanding, depth);
  q->stats.timeline.outstanding(ts_ns, depth);
}

// Connect binds the queue pair it arrives on, and the other direction of the
// same connection (the host's, which the data and completions come to).
void NvmeAnalyzer::bind_connect(QueuePair& qp, const NvmeQueueKey& key, std::uint64_t frame) {
  qp.controller_side = true;
  bind_both(qp, key, frame);
}

void NvmeAnalyzer::bind_both(QueuePair& qp, const NvmeQueueKey& key, std::uint64_t frame) {
  for (QueuePair* q : {&qp, qp.peer ? qps_.at(qps_.find(*qp.peer)) : nullptr}) {
    if (!q) continue;
    q->bound = true;
    q->queue = key;
    q->bound_frame = frame;
  }
}

std::size_t NvmeAnalyzer::CidKeyHash::operator()(const CidKey& k) const {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ k.cid ^ std::uint64_t{k.point} << 16;
  for (auto b : k.controller) h = (h ^ b) * 0x100000001b3ULL;
  for (auto b : k.host) h = (h ^ b) * 0x100000001b3ULL;
  return static_cast<std::size_t>(h);
}

// A command on an unbound queue pair: its CID joins the queue pair's latest,
// and the queue pair is listed as holding it (all its CIDs again when the
// commands now come from another host: the list is keyed by the sender).
void NvmeAnalyzer::note_unbound_command(std::uint32_t slot, QueuePair& qp, std::uint16_t cid, const IpAddress& from) {
  const bool new_sender = qp.recent_count && qp.sender != from;
  const bool listed = !new_sender && qp.recently(cid);
  qp.note_unbound(cid, from);
  if (new_sender) {
    for (std::size_t i = 0; i < qp.recent_count; ++i) list_holder(slot, qp, qp.recent_cids[i]);
  } else if (!listed) {
    list_holder(slot, qp, cid);
  }
}

void NvmeAnalyzer::list_holder(std::uint32_t slot, const QueuePair& qp, std::uint16_t cid) {
  // Keys nobody asked for: purge the stale. Crowded keys stay, so the next
  // purge waits until the table has doubled: amortised O(1) per command.
  if (cid_holders_.size() > std::max(cid_purge_at_, 8 * qps_.size() + 4096)) {
    for (auto it = cid_holders_.begin(); it != cid_holders_.end();) {
      drop_stale(it->first, it->second);
      it = it->second.n == 0 && !it->second.crowded ? cid_holders_.erase(it) : std::next(it);
    }
    cid_purge_at_ = 2 * cid_holders_.size();
  }
  const CidKey k{qp.key.dst, qp.sender, cid, qp.key.point};
  CidHolders& c = cid_holders_[k];
  if (std::find(c.slots.begin(), c.slots.begin() + c.n, slot) != c.slots.begin() + c.n) return;
  if (c.n == kCidHolders) drop_stale(k, c);
  if (c.n == kCidHolders) {
    c.crowded = true;
    return;
  }
  c.slots[c.n++] = slot;
}

// The queue pair in `slot` is a candidate for the controller side of key k.
bool NvmeAnalyzer::holds(std::uint32_t slot, const CidKey& k) const {
  ++peer_probes_;
  const QueuePair* q = qps_.at(slot);
  return q && !q->bound && !q->peer && q->key.dst == k.controller && q->sender == k.host && q->recently(k.cid);
}

void NvmeAnalyzer::drop_stale(const CidKey& k, CidHolders& c) const {
  std::uint8_t n = 0;
  for (std::uint8_t i = 0; i < c.n; ++i)
    if (holds(c.slots[i], k)) c.slots[n++] = c.slots[i];
  c.n = n;
}

// The one queue pair holding k, else kNone (none, or several).
std::uint32_t NvmeAnalyzer::sole_holder(const CidKey& k) {
  const auto it = cid_holders_.find(k);
  if (it == cid_holders_.end()) return decltype(qps_)::kNone;
  CidHolders& c = it->second;
  drop_stale(k, c);
  if (c.crowded || c.n != 1) {
    if (c.n == 0 && !c.crowded) cid_holders_.erase(it);
    return decltype(qps_)::kNone;
  }
  return c.slots[0];
}

void NvmeAnalyzer::find_peer(QueuePair& host, const Hop& h, std::uint16_t cid, std::uint64_t frame) {
  if (host.peer || host.peer_tries >= kPeerTries) return;
  ++host.peer_tries;
  QueuePair* found = qps_.at(sole_holder(CidKey{h.src, h.dst, cid, h.qp.point}));
  if (!found) return;
  host.peer = found->key;
  found->peer = host.key;
  found->controller_side = true;
  bind_both(host, host.queue, frame);
}

// A Connect starts a queue afresh (after a reconnect the host reuses QIDs and
// CIDs on new queue pairs, the Connect's CID too): what the old one left
// outstanding stays unanswered. Copies of a Connect (RDMA resends) never get
// here: add_command knows them by PSN / TCP sequence number.
void NvmeAnalyzer::restart_queue(const NvmeQueueKey& key) {
  const std::uint32_t slot = queues_.find(key);
  if (!queues_.at(slot)) return;
  queues_.erase(slot, [this](std::uint32_t, Queue& q) { retire_queue(q); });  // O(1): not a walk of every queue
}

void NvmeAnalyzer::add_response(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns,
                                bool resent) {
  QueuePair* qp = queue_pair(h.qp, true, ts_ns);
  if (!qp) return;
  NvmeCapsuleRecord rec;
  rec.frame = frame;
  ++totals_.capsules;
  if (parse_nvme_completion(c.capsule, rec.cqe) != ParseStatus::ok) {
    ++totals_.truncated_capsules;
    note_uncaptured(h.qp, frame, ts_ns);
    return;
  }
  rec.queue = NvmeQueueKey{h.dst, h.src, rec.cqe.sqid, h.qp.point};
  if (qp->copy_of_recent(h.psn, rec.cqe.cid)) {  // its first copy completed the command (or found none)
    ++totals_.resent_responses;
    if (capsule_sink_) capsule_sink_(rec);
    return;
  }
  Queue* q = queue(rec.queue, false, frame, ts_ns);
  const auto it = q ? q->outstanding.find(rec.cqe.cid) : decltype(q->outstanding)::iterator{};
  if (!q || it == q->outstanding.end()) {
    if (resent) {  // a copy: counted once, as its first copy was
      ++totals_.resent_responses;
    } else {
      ++totals_.responses;
      ++totals_.unmatched_responses;
    }
    // Mid-stream: the first CQE names the queue; until the controller's
    // queue pair is found, each of the first kPeerTries unmatched ones looks
    // for it (a first CQE whose command preceded the capture names no holder).
    if (!qp->bound) bind_both(*qp, rec.queue, frame);
    if (!qp->peer && qp->queue == rec.queue) find_peer(*qp, h, rec.cqe.cid, frame);
    if (capsule_sink_) capsule_sink_(rec);
    return;
  }
  ++totals_.responses;
  NvmeCommandResult r = it->second.result;
  r.response_frame = frame;
  if (c.invalidate) note_invalidate(r, c.invalidated_key);
  r.latency_us = static_cast<double>(ts_ns - r.submit_ns) / 1e3;
  r.status = rec.cqe.status >> 1;
  r.sct = rec.cqe.sct();
  r.sc = rec.cqe.sc();
  r.transport_events = static_cast<std::uint32_t>(q->stats.transport_events - it->second.events_at_submit);
  for (std::size_t k = 0; k < kNvmeCauseKinds; ++k)
    r.causes[k] = static_cast<std::uint32_t>(q->stats.causes[k] - it->second.causes_at_submit[k]);
  q->outstanding.erase(it);
  q->stats.timeline.outstanding(ts_ns, static_cast<std::uint32_t>(q->outstanding.size()));
  if (!qp->bound) {
    qp->bound = true;
    qp->queue = rec.queue;
    qp->bound_frame = frame;
  }
  rec.paired_frame = r.command_frame;
  rec.latency_us = r.latency_us;
  if (capsule_sink_) capsule_sink_(rec);
  complete(*q, r, ts_ns);
}

// The admin queue's Connect data (host ID, NQNs) comes by RDMA READ: its first
// response packet holds it whole at a path MTU of 1024 or more (a smaller path
// MTU splits it, and it is left unread); on iWARP the first Read Response
// segment (siw sends it whole).
void NvmeAnalyzer::note_connect_data(Bytes payload, NvmeQueueStats& stats) {
  NvmeConnectData data;
  if (parse_nvme_connect_data(payload, data) != ParseStatus::ok) return;
  stats.subnqn = std::string(data.subsystem());
  stats.hostnqn = std::string(data.host());
}

void NvmeAnalyzer::note_invalidate(NvmeCommandResult& r, std::uint32_t key) {
  r.remote_invalidate = true;
  r.invalidated_key = key;
  ++totals_.remote_invalidates;
  if (!r.sgl_invalidate || key != r.sgl_key) ++totals_.invalidate_mismatches;
}

// An RDMA READ/WRITE packet on an NVMe queue: credited to the outstanding
// command whose keyed SGL it addresses (nvme_data.h).
namespace {
// The outstanding command whose keyed SGL holds (key, address).
auto sgl_finder(const std::unordered_map<std::uint16_t, PendingCommand>& outstanding) {
  return [&outstanding](std::uint32_t key, std::uint64_t address) -> std::optional<std::uint16_t> {
    for (const auto& [cid, pending] : outstanding) {
      const NvmeCommandResult& r = pending.result;
      if (r.sgl_key == key && address >= r.sgl_address && address - r.sgl_address < std::max<std::uint32_t>(r.data_len, 1))
        return cid;
    }
    return std::nullopt;
  };
}
}  // namespace

NvmeAnalyzer::Queue* NvmeAnalyzer::data_queue(const NvmeQpKey& k, std::uint64_t frame, std::int64_t ts_ns) {
  const QueuePair* qp = qps_.at(qps_.find(k));
  return qp && qp->bound ? queue(qp->queue, false, frame, ts_ns) : nullptr;
}

// A completion for any command outstanding on the host's queue pair k may have
// been in bytes the capture lacks.
void NvmeAnalyzer::note_uncaptured(const NvmeQpKey& host, std::uint64_t frame, std::int64_t ts_ns) {
  Queue* q = data_queue(host, frame, ts_ns);
  if (!q) return;
  for (auto& [cid, pending] : q->outstanding) pending.result.completion_maybe_uncaptured = true;
}

void NvmeAnalyzer::add_data(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns) {
  Queue* q = data_queue(NvmeQpKey{endpoints_of(p).dst, p.ib.bth.dest_qp, false, {}, p.capture_point}, frame, ts_ns);
  if (!q) return;
  NvmeCommandResult* r = credit_data(*q, q->data.on_packet(p, sgl_finder(q->outstanding)), frame, ts_ns);
  const OpKind kind = p.opcode()->kind;
  const bool first = kind == OpKind::read_response_first || kind == OpKind::read_response_only;
  if (r && first && r->fabrics && r->fctype == static_cast<std::uint8_t>(FabricsType::connect))
    note_connect_data(p.payload, q->stats);
}

// iWARP: Writes and Read Requests go to the host's direction, Read Responses
// to the controller's; both are bound to the queue at Connect.
void NvmeAnalyzer::add_iwarp_data(const Hop& h, const DdpSegment& seg, Bytes read_response_head, std::uint64_t frame,
                                  std::int64_t ts_ns) {
  Queue* q = data_queue(h.qp, frame, ts_ns);
  if (!q) return;
  NvmeCommandResult* r = credit_data(*q, q->iwarp_data.on_segment(seg, sgl_finder(q->outstanding)), frame, ts_ns);
  // A Read Response that carries a Connect's whole data (so from its start).
  if (r && !read_response_head.empty() && r->fabrics && r->fctype == static_cast<std::uint8_t>(FabricsType::connect) &&
      seg.payload_len == r->data_len)
    note_connect_data(read_response_head, q->stats);
}

// Credits a data packet to the command the matcher named (nvme_data.h).
NvmeCommandResult* NvmeAnalyzer::credit_data(Queue& q, const std::optional<NvmeDataPacket>& d, std::uint64_t frame,
                                             std::int64_t ts_ns) {
  const auto it = d ? q.outstanding.find(d->target.cid) : q.outstanding.end();
  if (it == q.outstanding.end() || it->second.result.sgl_key != d->target.key) {
    ++totals_.unmatched_data_packets;
    return nullptr;
  }
  ++totals_.data_packets;
  NvmeCommandResult& r = it->second.result;
  if (!r.data_first_frame) {
    r.data_first_frame = frame;
    r.data_first_ns = ts_ns;
  }
  r.data_last_frame = frame;
  r.data_last_ns = ts_ns;
  if (d->starts_operation) ++r.data_operations;
  if (d->names_range) r.data_bytes = std::max<std::uint64_t>(r.data_bytes, d->address - r.sgl_address + d->length);
  return &r;
}

void NvmeAnalyzer::add_transport_event(const NvmeQpKey& k, std::uint64_t frame, std::int64_t ts_ns,
                                       std::uint8_t kinds) {
  const QueuePair* qp = qps_.at(qps_.find(k));
  if (!qp || !qp->bound) return;
  Queue* q = queue(qp->queue, false, frame, ts_ns);
  if (!q) return;
  ++q->stats.transport_events;
  for (std::size_t k = 0; k < kNvmeCauseKinds; ++k)
    if (kinds & (1u << k)) ++q->stats.causes[k];
  // The first event inside each outstanding command's window (bounded by kMaxOutstanding).
  for (auto& [cid, pending] : q->outstanding)
    if (!pending.result.first_event_frame) pending.result.first_event_frame = frame;
}

void NvmeAnalyzer::complete(Queue& q, NvmeCommandResult& r, std::int64_t ts_ns) {
  const bool ok = r.sct == 0 && r.sc == 0;
  ++q.stats.completed;
  ++totals_.completed;
  if (!ok) {
    ++q.stats.errors;
    ++totals_.errors;
  }
  const bool read = r.kind == NvmeQueueKind::io && !r.fabrics && r.opcode == 0x02;
  const bool write = r.kind == NvmeQueueKind::io && !r.fabrics && r.opcode == 0x01;
  if (r.kind == NvmeQueueKind::io && !r.fabrics) ++q.stats.io_completed;
  if (read) q.stats.read_bytes += r.data_len;
  if (write) q.stats.write_bytes += r.data_len;
  q.stats.timeline.completion(ts_ns, read || write ? r.data_len : 0);
  const auto count = [&](NvmeOpcodeStats& s) {
    ++s.completed;
    if (!ok) ++s.errors;
    s.bytes += r.data_len;
    s.latency.add(r.latency_us);
  };
  count(by_opcode_[opcode_index(r)]);
  if (read || write) {
    NvmeOpcodeStats& s = by_size_[(write ? kNvmeSizeClasses : 0) + nvme_size_class(r.data_len)];
    ++s.commands;
    count(s);
  }
  keep_slowest(r);
  if (command_sink_) command_sink_(r);
}

namespace {
bool earlier(const NvmeCommandResult& a, const NvmeCommandResult& b) { return a.command_frame < b.command_frame; }
// Slowest first; ties by frame, so the list does not depend on arrival order.
bool slower(const NvmeCommandResult& a, const NvmeCommandResult& b) {
  return a.latency_us != b.latency_us ? a.latency_us > b.latency_us : a.command_frame < b.command_frame;
}
}  // namespace

void NvmeAnalyzer::keep_slowest(const NvmeCommandResult& r) {
  // A heap whose top is the fastest of the kept ones.
  slowest_.push_back(r);
  std::push_heap(slowest_.begin(), slowest_.end(), slower);
  if (slowest_.size() > kSlowest) {
    std::pop_heap(slowest_.begin(), slowest_.end(), slower);
    slowest_.pop_back();
  }
}

// A command of q whose completion the capture lacks (the first kMaxListed by frame are listed).
void NvmeAnalyzer::leave_unanswered(Queue& q, const NvmeCommandResult& r) {
  ++q.stats.unanswered;
  ++totals_.unanswered;
  if (r.completion_maybe_uncaptured) ++totals_.unanswered_maybe_uncaptured;
  unanswered_.push_back(r);
  if (unanswered_.size() <= 2 * kMaxListed) return;
  std::sort(unanswered_.begin(), unanswered_.end(), earlier);
  unanswered_.resize(kMaxListed);
}

void NvmeAnalyzer::retire_queue(Queue& q) {
  for (const auto& [cid, pending] : q.outstanding) leave_unanswered(q, pending.result);
  q.outstanding.clear();
  finished_queues_.push_back(std::move(q.stats));
}

void NvmeAnalyzer::finish() {
  queues_.for_each([this](std::uint32_t, Queue& q) { retire_queue(q); });
  queues_.clear();
  cid_holders_.clear();
  std::sort(finished_queues_.begin(), finished_queues_.end(),
            [](const NvmeQueueStats& a, const NvmeQueueStats& b) { return a.first_frame < b.first_frame; });
  std::sort(slowest_.begin(), slowest_.end(), slower);
  std::sort(unanswered_.begin(), unanswered_.end(), earlier);
  if (unanswered_.size() > kMaxListed) unanswered_.resize(kMaxListed);
}

}  // namespace rdmadiag::decode
