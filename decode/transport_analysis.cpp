#include "decode/transport_analysis.h"

#include "decode/endpoints.h"
#include "decode/prefetch.h"
#include "decode/rc_requester.h"
#include "decode/rc_responder.h"
#include "decode/unreliable_sequence.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <memory>
#include <optional>

namespace rdmadiag::decode {

// ---------------------------------------------------------------- helpers

void LatencyStats::add(double us) {
  if (us < 0) return;  // the capture's clock stepped back between the two packets: no time to tell
  if (!d_) d_ = std::make_unique<Data>();
  Data& d = *d_;
  if (d.count == 0 || us < d.min) d.min = us;
  if (d.count == 0 || us > d.max) d.max = us;
  ++d.count;
  d.sum += us;
  d.sorted = false;
  if (d.samples.size() < kReservoir) {
    // A first block of 4 (most flows of a many-QP capture carry a sample or two:
    // 1 KB blocks were 30 MB of the 149 MB peak with 16K QPs), then 256 (1 KB),
    // then doubling: rare events (recovery times) never grow past it.
    if (d.samples.size() == d.samples.capacity() && d.samples.capacity() < 256)
      d.samples.reserve(d.samples.capacity() == 0 ? 4 : 256);
    d.samples.push_back(static_cast<float>(us));
    return;
  }
  // Reservoir sampling (Algorithm R) with a fixed-seed xorshift: deterministic output.
  d.rng ^= d.rng << 13;
  d.rng ^= d.rng >> 7;
  d.rng ^= d.rng << 17;
  const std::uint64_t j = d.rng % d.count;
  if (j < kReservoir) d.samples[j] = static_cast<float>(us);
}

double LatencyStats::percentile(double p) const {
  if (!d_ || d_->samples.empty()) return 0;
  Data& d = *d_;
  if (!d.sorted || d.sorted_copy.size() != d.samples.size()) {
    d.sorted_copy = d.samples;
    std::sort(d.sorted_copy.begin(), d.sorted_copy.end());
    d.sorted = true;
  }
  // Nearest-rank percentile.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(d.sorted_copy.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  // Samples are floats (half the memory per flow; 7 significant digits): rounded,
  // one could pass the exact min or max, which a percentile never does.
  return std::clamp<double>(d.sorted_copy[std::min(i, d.sorted_copy.size() - 1)], d.min, d.max);
}

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::write: return "write";
    case OpClass::read: return "read";
    case OpClass::send: return "send";
    case OpClass::atomic: return "atomic";
    case OpClass::count_: break;
  }
  return "?";
}

std::string_view to_string(Pairing p) {
  switch (p) {
    case Pairing::none: return "none";
    case Pairing::cm: return "cm";
    case Pairing::inferred_psn: return "inferred_psn";
    case Pairing::inferred_only_flow: return "inferred_only_flow";
  }
  return "?";
}

namespace {

std::uint64_t fnv(std::uint64_t h, const std::uint8_t* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

// `point`: the capture point (FlowKey::point): the two ends seen at another point are another pair.
std::uint64_t host_pair_hash(Transport t, const std::array<std::uint8_t, 16>& src, const std::array<std::uint8_t, 16>& dst,
                             std::uint8_t len, std::uint16_t point) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<std::uint64_t>(t) ^ (std::uint64_t{point} << 32);
  h = fnv(h, src.data(), len);
  return fnv(h ^ 0xff, dst.data(), len);
}

// The pairing index's key of a PSN bucket of the requester flows from one end to the other.
std::uint64_t bucket_key(std::uint64_t host_pair, std::uint32_t bucket) {
  return host_pair ^ (static_cast<std::uint64_t>(bucket) * 0x9E3779B97F4A7C15ULL);
}

// Both directions between two ends: the path.
std::uint64_t path_hash(const FlowKey& k) {
  const bool swap = std::lexicographical_compare(k.dst.begin(), k.dst.begin() + k.addr_len, k.src.begin(),
                                                 k.src.begin() + k.addr_len);
  return host_pair_hash(k.transport, swap ? k.dst : k.src, swap ? k.src : k.dst, k.addr_len, k.point) ^ 0x5bd1e995ULL;
}

SeqFacts facts_of(const DecodedPacket& p) {
  SeqFacts x;
  x.opcode = p.ib.bth.opcode;
  x.pad = p.ib.bth.pad_count;
  x.truncated = p.truncated;
  x.payload_len = p.payload_len;
  x.reth_len = p.ib.reth.dma_len;
  return x;
}

// The two ends' addresses (the one rule, endpoints.h), into a zeroed key.
bool endpoint_addresses(const DecodedPacket& p, FlowKey& k) {
  return put_endpoints(p, k, [&](std::uint8_t len) { k.set_kind(p.transport, len, p.capture_point); });
}

// The IBA path MTUs (256 << (code - 1)).
std::uint32_t mtu_round_up(std::uint32_t bytes) {
  for (std::uint32_t m = 256; m <= 4096; m <<= 1)
    if (bytes <= m) return m;
  return 4096;
}


}  // namespace

// ---------------------------------------------------------------- flow state

// One flow: its report, its place in the table and its pairing, and the
// sequence machines of the roles it plays (made on first use: a flow carrying
// only ACKs needs no requester state).
// What a packet reads or writes comes first (the sequence states' pointers, the
// P_Key, the summary's counters at its start): with the key in front of it in
// its cell (decode/flow_slots.h) that is the first three cache lines.
struct TransportAnalyzer::Flow {
  std::unique_ptr<RequesterState> req;     // requests sent on this flow
  std::unique_ptr<ResponseCursor> resp;    // responses sent on this flow (in the peer's PSN space)
  // Read by every response (peer_requester) and written by every request
  // (index_unpaired): here, not past the summary, they share the key's lines
  // (at the cell's end they were one more line missed per packet with many flows).
  std::int64_t peer_slot = -1;
  static constexpr std::uint32_t kNotIndexed = UINT32_MAX;
  std::uint32_t unpaired_bucket = kNotIndexed;  // its PSN bucket in the pairing index
  bool pkey_set = false;
  std::uint16_t pkey = 0;
  std::uint32_t cc_slot = UINT32_MAX;      // KeyedFlow::cc_slot (in the padding before the summary)
  FlowSummary s;  // its per-packet counters first: they share the key's lines
  std::unique_ptr<UnreliableState> unrel;  // UC / UD
  std::uint32_t slot = 0;
  std::uint64_t host_pair = 0;
  std::uint64_t path = 0;
  RequesterState& requester() {
    if (!req) req = std::make_unique<RequesterState>();
    return *req;
  }
  ResponseCursor& responses() {
    if (!resp) resp = std::make_unique<ResponseCursor>();
    return *resp;
  }
  UnreliableState& unreliable() {
    if (!unrel) unrel = std::make_unique<UnreliableState>();
    return *unrel;
  }
  bool started() const { return req && req->started; }
  bool idle_state() const {
    return (!req || (req->pending.empty() && req->losses.empty())) && (!unrel || unrel->gaps.empty());
  }
};

TransportAnalyzer::TransportAnalyzer(AnomalyLog& log) : log_(log), flows_(kMaxLiveFlows) {
  link_fn_ = [this](std::uint64_t request_frame, std::uint64_t response_frame, double us) {
    link_forward(request_frame, response_frame, us);
  };
}
TransportAnalyzer::~TransportAnalyzer() = default;

// The key add() files the packet under.
TransportService TransportAnalyzer::flow_key(const DecodedPacket& p, FlowKey& k) {
  k = FlowKey{};
  endpoint_addresses(p, k);
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  if (info.service == TransportService::ud && p.ib.has(kDeth)) {
    // UD: keyed by its source QP (one PSN counter for every destination, IBA 9.8.2).
    k.src_qp = p.ib.deth.src_qp;
  } else {
    k.dest_qp = p.ib.bth.dest_qp;
  }
  return info.service;
}

// `ahead` (look_ahead's, for this packet): its key and hash, and its slot if
// that still holds the flow (a frame before it may have made or retired flows).
TransportAnalyzer::Flow& TransportAnalyzer::flow_for(const DecodedPacket& p, std::uint64_t frame, double ts,
                                                     const FlowAhead* ahead) {
  FlowKey& k = last_key_.key;
  TransportService service;
  std::uint32_t slot;
  if (ahead) {
    k = ahead->key;
    last_key_.hash = ahead->hash;
    service = opcode_info(p.ib.bth.opcode).service;
    slot = flows_.holds(ahead->slot, k) ? ahead->slot : flows_.find(k, ahead->hash);
  } else {
    service = flow_key(p, k);
    last_key_.hash = flows_.hash_of(k);
    slot = flows_.find(k, last_key_.hash);
  }
  Flow& f = slot != decltype(flows_)::kNone ? *flows_.at(slot) : create_flow(k, last_key_.hash, service, frame, ts);
  last_key_.cc_slot = &f.cc_slot;
  last_key_.had_packets = f.s.packets != 0;
  prefetch_states(f);
  return f;
}

// With many flows each state is a miss: start the loads the packet will need.
void TransportAnalyzer::prefetch_states(const Flow& f) const {
  if (cc_ahead_ && f.cc_slot != UINT32_MAX) cc_ahead_->prefetch(f.cc_slot);
  if (f.req) {
    // Every request reads the state up to spur.open (rc_requester.h): five
    // lines at malloc's 16-byte alignment. Loading only the first two left a
    // miss on `pending` and one on `spur` per request when the flows outgrow
    // the cache (16K connections: 27 % of requester()'s samples on spur.open).
    prefetch_lines(f.req.get(), &f.req->spur.open);  // (addresses, not loads)
  }
}

bool TransportAnalyzer::looks_ahead() const { return flows_.cell_bytes() > kLookAheadFromBytes; }

void TransportAnalyzer::look_ahead(const DecodedPacket& p, FlowAhead& a, int step) const {
  if (step == 0) {
    a.on = p.has_bth;
    a.slot = decltype(flows_)::kNone;
    if (!a.on) return;
    flow_key(p, a.key);
    a.hash = flows_.hash_of(a.key);
    flows_.prefetch_index(a.hash);
  } else if (!a.on) {
    return;
  } else if (step == 1) {
    flows_.prefetch_candidates(a.hash);
  } else {
    a.slot = flows_.find(a.key, a.hash);
    if (a.slot != decltype(flows_)::kNone) prefetch_states(*flows_.at(a.slot));
    // A flow not made yet: the congestion analysis will look its key up in its
    // own index (same key and hash, UD aside), which nothing else has loaded,
    // and the pairing index will be read at its PSN's bucket.
    else {
      if (cc_ahead_) cc_ahead_->prefetch_index(a.hash);
      prefetch_pairing(p, a.key);
    }
  }
}

// A new reliable flow's first packet reads the pairing index at its PSN's
// bucket: a request files its flow there (index_unpaired, under the PSN after
// it: the same bucket but at a bucket's last PSN), a response looks for its
// requester there first (infer_peer, the reverse direction's buckets). With
// many flows that line is a miss per new flow (1M connections: 3 % of the
// samples each in index_unpaired and infer_peer).
void TransportAnalyzer::prefetch_pairing(const DecodedPacket& p, const FlowKey& k) const {
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  if (info.service == TransportService::ud || info.service == TransportService::uc) return;  // never paired by PSN
  const bool request = info.is_request();
  if (!request && !info.is_response()) return;
  const std::uint64_t ends = request ? host_pair_hash(k.transport, k.src, k.dst, k.addr_len, k.point)
                                     : host_pair_hash(k.transport, k.dst, k.src, k.addr_len, k.point);
  const std::uint32_t psn = (p.ib.bth.psn + (request ? 1 : 0)) & 0xFFFFFF;
  unpaired_by_psn_.prefetch(bucket_key(ends, psn >> kPsnBucketBits));
}

TransportAnalyzer::Flow& TransportAnalyzer::create_flow(const FlowKey& k, std::uint64_t hash, TransportService service,
                                                        std::uint64_t frame, double ts) {
  // Counted on its path before the cap may retire flows, so that a path's last
  // flow retired to make room does not take the path's state with it.
  const std::uint32_t index = next_index_++;
  const std::uint64_t path = path_hash(k);
  ++paths_[path].flows;
  const std::uint32_t slot = flows_.emplace_hashed(
      k, hash, [](const Flow& x) { return x.s.last_ts; },
      [this](std::uint32_t s, Flow& x) {  // only at the live-flow cap
        ++cap_retired_;
        retire(s, x);
      });
  Flow& made = *flows_.at(slot);
  made.s.key = k;
  made.s.service = service;
  made.s.index = index;
  made.s.first_frame = frame;
  made.s.first_ts = ts;
  made.s.last_ts = ts;  // its packet's time (counted next), or the REP's for a flow a CM exchange made
  live_ts_floor_ = std::min(live_ts_floor_, ts);
  made.host_pair = host_pair_hash(k.transport, k.src, k.dst, k.addr_len, k.point);
  made.path = path;
  made.slot = slot;
  return made;
}

void TransportAnalyzer::pair(Flow& a, Flow& b, Pairing how) {
  unindex_unpaired(a);
  unindex_unpaired(b);
  a.peer_slot = b.slot;
  b.peer_slot = a.slot;
  a.s.peer = b.s.index;
  b.s.peer = a.s.index;
  a.s.peer_qp = b.s.key.dest_qp;
  b.s.peer_qp = a.s.key.dest_qp;
  a.s.pairing = b.s.pairing = how;
}

std::uint32_t TransportAnalyzer::pmtu_for(const Flow& f) const {
  if (pmtu_override_) return pmtu_override_;
  if (f.s.pmtu) return f.s.pmtu;
  if (f.peer_slot >= 0) {
    const Flow* peer = flows_.at(static_cast<std::uint32_t>(f.peer_slot));
    if (peer && peer->s.pmtu) return peer->s.pmtu;
  }
  const auto it = paths_.find(f.path);
  return it != paths_.end() ? it->second.pmtu : 0;
}

void TransportAnalyzer::learn_pmtu(Flow& f, std::uint32_t payload) {
  if (payload < 256 || f.s.pmtu_from_cm) return;
  const std::uint32_t m = mtu_round_up(payload);
  if (m <= f.s.pmtu) return;  // already noted on the path (this runs for most FIRST/MIDDLE packets)
  f.s.pmtu = m;
  note_path_pmtu(f, m);
}

void TransportAnalyzer::note_path_pmtu(const Flow& f, std::uint32_t m) {
  if (m > global_pmtu_) global_pmtu_ = m;
  PathState& ps = paths_[f.path];
  if (m > ps.pmtu) ps.pmtu = m;
}

void TransportAnalyzer::link_forward(std::uint64_t request_frame, std::uint64_t response_frame, double latency_us) {
  if (forward_links_on_) forward_.try_emplace(request_frame, ForwardLink{response_frame, latency_us});
}

// ---------------------------------------------------------------- per packet

void TransportAnalyzer::count_packet(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts,
                                     PacketAnalysis& out) {
  FlowSummary& s = f.s;
  ++s.packets;
  s.bytes += p.wirelen;
  s.payload_bytes += p.payload_len;
  s.last_frame = frame;
  s.last_ts = ts;
  if (ts < live_ts_floor_) live_ts_floor_ = ts;  // capture times may step back
  out.analysed = true;
  out.flow = s.index;
  // Congestion signals (Annex A17.9).
  const int ecn = ecn_codepoint(p);
  if (ecn) ++s.ecn_ect;
  if (ecn == 3) {
    ++s.ecn_ce;
    out.ecn_ce = true;
  }
  if (p.ib.bth.fecn) ++s.fecn;
  if (p.ib.bth.becn) ++s.becn;
}

std::size_t TransportAnalyzer::report_bad_crc(Flow& f, const DecodedPacket& p, std::uint64_t frame,
                                              PacketAnalysis& out) {
  ++f.s.faults_for_update().icrc_bad;
  Anomaly a{p.icrc == CrcStatus::bad ? AnomalyKind::icrc_bad : AnomalyKind::vcrc_bad};
  a.frame = frame;
  a.psn = p.ib.bth.psn;
  if (p.udp && p.diags.contains(DiagCode::udp_port_bit_error)) a.count = p.udp->dst_port;  // off 4791
  SeqSink sink(log_, f.s, &out);
  return sink.report(a);
}

void TransportAnalyzer::check_pkey(Flow& f, const DecodedPacket& p, std::uint64_t frame, PacketAnalysis& out) {
  if (!f.pkey_set) {
    f.pkey_set = true;
    f.pkey = p.ib.bth.pkey;
    return;
  }
  if (f.pkey == p.ib.bth.pkey) return;
  ++f.s.faults_for_update().pkey_changes;
  Anomaly a{AnomalyKind::pkey_change};
  a.frame = frame;
  a.psn = p.ib.bth.psn;
  a.count = p.ib.bth.pkey;
  SeqSink(log_, f.s, &out).report(a);
  f.pkey = p.ib.bth.pkey;
}

void TransportAnalyzer::add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out,
                            std::int64_t ts_ns, const FlowAhead* ahead) {
  if (!p.has_bth) return;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  Flow& f = flow_for(p, frame, ts, ahead);
  count_packet(f, p, frame, ts, out);
  IcrcOriginTracker::Direction* origin = nullptr;  // a bad ICRC's direction (icrc_origin.h)
  bool corrupt = p.vcrc == CrcStatus::bad;
  if (p.icrc == CrcStatus::bad && !corrupt) {
    origin = icrc_origin(f, frame);
    corrupt = !origin || origin->origin != IcrcOrigin::not_wire;
    out.icrc_not_wire = !corrupt;
  } else if (origin_.learning() && p.icrc == CrcStatus::ok) {
    learn_icrc_origin(f, p, info, frame);
  }
  if (info.kind == OpKind::cnp) {
    ++f.s.cnp;
    out.cnp = true;
    return;
  }
  SeqPacket sp;
  sp.frame = frame;
  sp.ts = ts;
  sp.ts_ns = ts_ns != kNoNs ? ts_ns : std::llround(ts * 1e9);
  sp.psn = p.ib.bth.psn;
  sp.kind = info.kind;
  sp.ip_id = p.ipv4 ? p.ipv4->id : -1;
  sp.ack_req = p.ib.bth.ack_req;
  sp.aeth = p.ib.aeth;
  sp.dest_qp = p.ib.bth.dest_qp;
  if (corrupt) return corrupt_packet(f, p, sp, origin, out);
  if (!info.valid) return;
  check_pkey(f, p, frame, out);
  if (p.cm) cm_message(p, frame, ts);
  if (info.service == TransportService::ud || info.service == TransportService::uc) {
    if (info.service == TransportService::ud) ++f.s.requests;
    unreliable(f, p, sp, out);
  } else if (info.is_request()) {
    ++f.s.requests;
    if (f.started()) {
      // (The recent one is used up only by the flow whose PSN it carried.)
      const bool skips = recent_unplaced_count_ && skips_unplaced_request(f, sp.psn);
      if (skips || follows_unplaced(f, frame, false)) f.requester().corrupt_unplaced = true;
      if (follows_unplaced(f, frame, true)) note_unplaced_ack(f.requester());
    }
    requester(f, facts_of(p), sp, out);
    index_unpaired(f);
  } else {
    ++f.s.responses;
    if (follows_unplaced(f, frame, false)) place_corrupt_response(f, p, sp);
    responder(f, facts_of(p), sp, out);
  }
}

// A packet with a bad ICRC/VCRC (its direction's ICRCs the wire's, or not yet known).
void TransportAnalyzer::corrupt_packet(Flow& f, const DecodedPacket& p, SeqPacket& sp,
                                       IcrcOriginTracker::Direction* origin, PacketAnalysis& out) {
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  const std::uint64_t frame = sp.frame;
  // Its receiver drops it: counted, and sequenced only where what it says can be checked.
  sp.corrupt = true;
  sp.anomaly = report_bad_crc(f, p, frame, out);
  if (origin) origin_.hold(*origin, {sp, facts_of(p), f.s.key});
  if (origin && p.cm && info.valid) hold_cm(*origin, p, frame, sp.ts);
  Flow* seq = &f;  // the flow it is sequenced in
  if (f.s.packets == 1) {  // it made a flow of its own
    const bool ack = info.kind == OpKind::acknowledge || info.kind == OpKind::atomic_acknowledge;
    // An ACK whose QP number a bit error damaged: its flow's. (Only ACKs so far: a
    // corrupt READ response placed this way was taken for a resend, docs/fault-matrix.md.)
    if (Flow* g = ack ? one_bit_from(f, p) : nullptr) {
      seq = g;
    } else {
      unplaced_frame_ = frame;
      unplaced_hosts_ = with_qps(f.s.key);
      unplaced_ack_ = ack;
      unplaced_psn_ = sp.psn;
      if (info.valid && info.is_request()) remember_unplaced_request(unplaced_hosts_, sp.psn, frame);
      // Alone on its address pair: most likely a damaged address, which a sharded
      // analysis may have put in another shard than its flow's.
      if (const auto ps = paths_.find(f.path); ps != paths_.end() && ps->second.flows == 1) ++unplaced_alone_;
    }
  }
  const bool reliable = info.service != TransportService::ud && info.service != TransportService::uc;
  if (info.valid && reliable && info.is_request() && seq->started()) {
    requester(*seq, facts_of(p), sp, out);
    index_unpaired(*seq);
  }
  if (info.valid && reliable && info.is_response() && seq->resp) responder(*seq, facts_of(p), sp, out);
  if (info.valid && info.service == TransportService::uc) unreliable(*seq, p, sp, out);
}

// The direction of a packet captured with a bad ICRC (icrc_origin.h), told
// `wire` if its flow had intact packets; nullptr past the tracker's bound. On a
// direction whose ICRCs are not the wire's, the packet is counted on its note.
IcrcOriginTracker::Direction* TransportAnalyzer::icrc_origin(Flow& f, std::uint64_t frame) {
  const FlowKey hosts = with_qps(f.s.key);
  IcrcOriginTracker::Direction* d = origin_.bad_packet(hosts, frame);
  if (d && d->origin == IcrcOrigin::undecided && f.s.packets > f.s.faults().icrc_bad + 1) origin_.intact_packet(hosts);
  // (A not_wire direction's flow counts no icrc_bad: its intact packets are checked as they come.)
  if (d && d->origin == IcrcOrigin::not_wire) {
    ++icrc_not_wire_packets_;
    if (Anomaly* a = d->anomaly < log_.items().size() ? &log_.items()[d->anomaly] : nullptr) ++a->count;
  }
  return d;
}

// An intact packet while some direction's ICRCs are undecided: its own
// direction computes them before the capture point, and an answer may show
// that the reverse direction's were not the wire's.
void TransportAnalyzer::learn_icrc_origin(Flow& f, const DecodedPacket& p, const OpcodeInfo& info, std::uint64_t frame) {
  const FlowKey hosts = with_qps(f.s.key);
  if (origin_.intact_packet(hosts)) {  // a not_wire verdict contradicted: its note says where
    const IcrcOriginTracker::Direction* d = origin_.find(hosts);
    if (Anomaly* a = d->anomaly < log_.items().size() ? &log_.items()[d->anomaly] : nullptr) a->relate(frame);
  }
  std::uint32_t taken = 0;
  const bool names_cm = info.valid && p.cm;
  const bool names_psn = info.valid && psn_taken_by_answer(info.kind, p.ib.bth.psn, p.ib.aeth, taken);
  if (!names_cm && !names_psn) return;
  FlowKey requests = hosts;
  std::swap(requests.src, requests.dst);
  if ((names_cm && origin_.cm_answer(requests, p.cm->remote_comm_id, frame)) ||
      (names_psn && origin_.answer(requests, taken, frame)))
    withdraw_corrupt_verdicts(*origin_.find(requests), f);
}

// A CM message captured with a bad ICRC while its direction is undecided.
void TransportAnalyzer::hold_cm(IcrcOriginTracker::Direction& d, const DecodedPacket& p, std::uint64_t frame,
                                double ts) {
  IcrcOriginTracker::HeldCm m;
  m.cm = *p.cm;
  m.frame = frame;
  m.ts = ts;
  if (endpoint_addresses(p, m.ends)) origin_.hold_cm(d, m);
}

// The direction's captured ICRCs were not the ones its receiver checked: the
// packets held as corrupt were not (their entries withdrawn, their flows'
// counts mended), and one note says so, counting them and every later one.
void TransportAnalyzer::withdraw_corrupt_verdicts(IcrcOriginTracker::Direction& d, Flow& answer_flow) {
  Flow* first = nullptr;
  std::size_t cm = 0;  // held CM messages go to the CM pairing in capture order with the packets
  auto cms_upto = [&](std::uint64_t frame) {
    for (; cm < d.cms.size() && d.cms[cm].frame <= frame; ++cm)
      cm_message(d.cms[cm].cm, d.cms[cm].ends, d.cms[cm].frame, d.cms[cm].ts, true);
  };
  for (const IcrcOriginTracker::Held& h : d.held) {
    cms_upto(h.sp.frame);
    log_.retract(h.sp.anomaly);
    const std::uint32_t slot = flows_.find(h.flow);
    if (slot == decltype(flows_)::kNone) continue;
    Flow* g = flows_.at(slot);
    if (!first) first = g;
    if (g->s.faults().icrc_bad) --g->s.faults_for_update().icrc_bad;
    replay_intact(*g, h);
  }
  cms_upto(UINT64_MAX);
  Anomaly a{AnomalyKind::icrc_not_wire};
  a.frame = d.first_bad_frame;
  a.psn = d.held.empty() ? 0 : d.held.front().sp.psn;
  a.count = static_cast<std::uint32_t>(d.held.size());
  icrc_not_wire_packets_ += d.held.size();
  a.expected_psn = d.not_held;  // (this kind's meaning: packets past the bounds, still called corrupt; JSON not_replayed)
  a.relate(d.evidence);
  d.anomaly = SeqSink(log_, (first ? *first : answer_flow).s, nullptr).report(a);
  origin_.settle(d);
}

// A reliable-service packet first taken for corrupt, analysed again as intact
// (its per-packet verdict was given; the flow's state and log are mended).
void TransportAnalyzer::replay_intact(Flow& f, const IcrcOriginTracker::Held& h) {
  const OpcodeInfo& info = opcode_info(h.facts.opcode);
  if (info.valid && info.service == TransportService::ud) ++f.s.requests;  // (not sequenced: corrupt or not)
  if (!info.valid || info.service == TransportService::ud || info.service == TransportService::uc) return;
  SeqPacket sp = h.sp;
  sp.corrupt = false;
  sp.anomaly = SIZE_MAX;
  PacketAnalysis v;
  if (info.is_request()) {
    ++f.s.requests;
    requester(f, h.facts, sp, v);
    index_unpaired(f);
  } else if (info.is_response()) {
    ++f.s.responses;
    responder(f, h.facts, sp, v);
  }
  ReplayRevision r;
  r.frame = sp.frame;
  r.flow = f.s.index;
  r.ts = sp.ts;
  r.psn = sp.psn;
  r.expected_psn = v.expected_psn;
  r.gap = v.gap;
  r.duplicate = v.duplicate;
  r.out_of_order = v.out_of_order;
  r.retransmission = v.retransmission;
  r.spurious_retransmission = v.spurious_retransmission;
  r.request_frame = v.request_frame;
  r.latency_us = v.latency_us;
  log_.note_revision(r);
}

// The live flow of corrupt packet `p`, which made flow `f` of its own, when a
// single bit error in its destination QP is what damaged it: the flow one QP
// bit away whose number makes the ICRC hold (a link's or netem's corruption
// flips one bit). nullptr otherwise; UD flows (keyed by the source QP) are not tried.
TransportAnalyzer::Flow* TransportAnalyzer::one_bit_from(const Flow& f, const DecodedPacket& p) {
  if (f.s.key.src_qp != 0 || p.icrc != CrcStatus::bad) return nullptr;
  for (unsigned bit = 0; bit < 24; ++bit) {
    FlowKey k = f.s.key;
    k.dest_qp ^= 1u << bit;
    const std::uint32_t slot = flows_.find(k);
    if (slot == decltype(flows_)::kNone || !icrc_holds_with_dest_qp(p.icrc_input, p.icrc_wire, k.dest_qp)) continue;
    Flow* g = flows_.at(slot);
    return g->s.service == f.s.service ? g : nullptr;
  }
  return nullptr;
}

// The corrupt packet just before a request, its QP number damaged, said it was
// an ACK from the other end: this requester dropped it (a timer resend may follow).
void TransportAnalyzer::note_unplaced_ack(RequesterState& q) const {
  q.corrupt_ack_frame = unplaced_frame_;
  q.corrupt_ack_psn = unplaced_psn_;
}

namespace {
// Whether two keys differ in one bit of their addresses and nowhere else: a bit
// error in a packet's IP address (or LID, GID) made it a flow of its own. The
// ICRC covers the addresses (IBA Annex A17.3.3), so the packet is also corrupt.
bool one_address_bit_apart(const FlowKey& a, const FlowKey& b) {
  FlowKey same = a;
  same.src = b.src;
  same.dst = b.dst;
  if (!(same == b)) return false;
  int bits = 0;
  for (std::size_t i = 0; i < a.src.size(); ++i)
    bits += std::popcount(static_cast<unsigned>(a.src[i] ^ b.src[i])) + std::popcount(static_cast<unsigned>(a.dst[i] ^ b.dst[i]));
  return bits == 1;
}
}  // namespace

// The packet right after an unplaced corrupt one, between the same hosts (or
// hosts one address bit from them: the bit error hit an address): in the same
// direction (it was this flow's), or the reverse for an ACK (its requester's).
bool TransportAnalyzer::follows_unplaced(const Flow& f, std::uint64_t frame, bool ack) const {
  if (!unplaced_frame_ || frame != unplaced_frame_ + 1 || unplaced_ack_ != ack) return false;  // (per packet: cheap first)
  FlowKey hosts = with_qps(f.s.key);
  if (ack) std::swap(hosts.src, hosts.dst);
  return hosts == unplaced_hosts_ || one_address_bit_apart(hosts, unplaced_hosts_);
}

void TransportAnalyzer::remember_unplaced_request(const FlowKey& hosts, std::uint32_t psn, std::uint64_t frame) {
  UnplacedRequest& u = recent_unplaced_[recent_unplaced_next_];
  recent_unplaced_next_ = (recent_unplaced_next_ + 1) % kRecentUnplaced;
  if (!u.frame) ++recent_unplaced_count_;
  u = UnplacedRequest{frame, hosts, psn};
}

// A request of `f` one PSN past the next, the skipped PSN carried by a recent
// unplaced corrupt request between the same hosts (or hosts one address bit
// from them), however many other flows' packets came in between: that packet
// was this flow's, its receiver dropped it (not a loss). The PSN must match
// exactly, so another connection's corrupt packet fits by chance once in 2^24.
bool TransportAnalyzer::skips_unplaced_request(const Flow& f, std::uint32_t psn) {
  const RequesterState& q = *f.req;
  const std::uint32_t skipped = q.resending ? q.resend_next : q.high_next;
  if (psn_diff(psn, skipped) != 1) return false;
  const FlowKey hosts = with_qps(f.s.key);
  for (UnplacedRequest& u : recent_unplaced_) {
    if (!u.frame || u.psn != skipped || !(u.hosts == hosts || one_address_bit_apart(hosts, u.hosts))) continue;
    u.frame = 0;
    --recent_unplaced_count_;
    return true;
  }
  return false;
}

// READ response data one PSN past the next, right after an unplaced corrupt
// packet: that packet was the response at the next PSN (its QP number damaged),
// or the first response of the flow, to a READ starting there; or, before a new
// response, the last packet of the one in progress. Its requester dropped it;
// it is held, not lost.
void TransportAnalyzer::place_corrupt_response(Flow& f, const DecodedPacket& p, const SeqPacket& sp) {
  const bool continues = sp.kind == OpKind::read_response_middle || sp.kind == OpKind::read_response_last;
  const bool starts = sp.kind == OpKind::read_response_first || sp.kind == OpKind::read_response_only;
  const std::uint32_t before = (sp.psn - 1) & kPsnMask;
  if (!continues && !(starts && f.resp)) return;
  OpKind kind = continues ? OpKind::read_response_middle : OpKind::read_response_last;
  if (!f.resp) {
    const Flow* qf = peer_requester(f, before);
    if (!qf || !qf->req || !read_starts_at(*qf->req, before)) return;
    kind = OpKind::read_response_first;
  } else if (!f.resp->in_read_response || f.resp->expected != before) {
    return;
  }
  SeqPacket held = sp;
  held.psn = before;
  held.frame = unplaced_frame_;
  held.kind = kind;
  held.corrupt = true;
  held.anomaly = SIZE_MAX;
  PacketAnalysis scratch;  // its own frame was reported already
  responder(f, facts_of(p), held, scratch);
}

// PSNs a request occupies: one, or one per READ response packet (IBA 9.7.2.1).
void TransportAnalyzer::set_span(const Flow& f, const SeqFacts& p, SeqPacket& sp) const {
  sp.span = 1;
  sp.span_known = true;
  if (sp.kind != OpKind::read_request) return;
  sp.read_len = p.reth_len;
  const std::uint32_t mtu = pmtu_for(f);
  const std::uint32_t len = p.reth_len;
  if (mtu) sp.span = len ? (len + mtu - 1) / mtu : 1;
  else sp.span_known = len <= 256;
  // A corrupt READ's length may be damaged too: believed only if it is a plausible span.
  if (sp.corrupt && sp.span > static_cast<std::uint32_t>(kCorruptAhead)) sp.span_known = false;
}

// Requests on a reliable connection (RC, XRC, RD): rc_requester.h.
void TransportAnalyzer::requester(Flow& f, const SeqFacts& p, SeqPacket& sp, PacketAnalysis& out) {
  const OpcodeInfo& info = opcode_info(p.opcode);
  if (info.full_mtu_payload() && !sp.corrupt) learn_pmtu(f, p.payload_len);
  set_span(f, p, sp);
  RequesterState& q = f.requester();
  SeqSink sink(log_, f.s, &out, &link_fn_);
  const std::uint32_t read_len = q.read_len;
  if (const std::uint32_t k = before_request(q, sp, sink); k > 1 && !f.s.pmtu_from_cm) {
    f.s.pmtu = mtu_round_up((read_len + k - 1) / k);
    note_path_pmtu(f, f.s.pmtu);
  }
  const RequesterEvent e = classify(q, sp);

  apply(q, e, sp, sink);
  if (e.step != ReqStep::restart && e.step != ReqStep::in_order && e.step != ReqStep::gap && e.step != ReqStep::resend)
    return;
  MessageFacts m;
  m.payload_len = p.payload_len;
  m.pad = p.pad;
  m.reth_len = p.reth_len;
  m.pmtu = pmtu_for(f);
  m.flow_pmtu = f.s.pmtu;
  m.truncated = p.truncated;
  m.carries_payload = info.carries_payload();
  check_message(q, e, sp, m, sink);
}

// Responses and acknowledgements (IBA 9.7.5, 9.7.6): rc_responder.h.
void TransportAnalyzer::responder(Flow& f, const SeqFacts& p, const SeqPacket& sp, PacketAnalysis& out) {
  Flow* qf = peer_requester(f, sp.psn, sp.aeth.psn_sequence_nak());
  if (opcode_info(p.opcode).full_mtu_payload() && !sp.corrupt) learn_pmtu(f, p.payload_len);
  RequesterState* q = qf ? &qf->requester() : nullptr;
  SeqSink resp(log_, f.s, &out, &link_fn_);
  std::optional<SeqSink> req;
  if (qf) req.emplace(log_, qf->s, nullptr, &link_fn_);
  const ResponseEvent e = classify(f.responses(), q, sp);
  const std::uint32_t segment = apply(f.responses(), q, e, sp, resp, req ? &*req : nullptr);
  if (segment && !qf->s.pmtu_from_cm && !qf->s.pmtu) learn_pmtu(*qf, segment);
}

// UD and UC (IBA 9.8): unreliable_sequence.h.
void TransportAnalyzer::unreliable(Flow& f, const DecodedPacket& p, const SeqPacket& sp, PacketAnalysis& out) {
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  if (info.full_mtu_payload()) learn_pmtu(f, p.payload_len);
  UnreliableState& u = f.unreliable();
  SeqSink sink(log_, f.s, &out);
  apply(u, classify(u, info.service == TransportService::ud, sp), sp, sink);
}

// The requester flow that a response on `resp` answers: its pair, or inferred.
TransportAnalyzer::Flow* TransportAnalyzer::peer_requester(Flow& resp, std::uint32_t psn, bool seq_nak) {
  if (resp.peer_slot >= 0) {
    Flow* q = flows_.at(static_cast<std::uint32_t>(resp.peer_slot));
    if (q && q->s.index == static_cast<std::uint32_t>(resp.s.peer)) return q;
    resp.peer_slot = -1;  // its pair was retired: it may pair again, as a response or a requester
    index_unpaired(resp);
  }
  return infer_peer(resp, psn, seq_nak);
}

// The slot of the first flow in a bucket of the pairing index, or kNotIndexed.
std::uint32_t TransportAnalyzer::unpaired_bucket(std::uint64_t host_pair, std::uint32_t bucket) {
  ++pair_probes_;
  return unpaired_by_psn_.find(bucket_key(host_pair, bucket));
}

// Keeps `f` in the pairing index exactly while it is a candidate (started,
// reliable, unpaired), under the bucket of its current high_next. Runs after
// each request: one comparison unless the flow changed bucket or state.
void TransportAnalyzer::index_unpaired(Flow& f) {
  const bool candidate = f.started() && f.peer_slot < 0 && f.s.service != TransportService::ud &&
                         f.s.service != TransportService::uc;
  const std::uint32_t bucket = candidate ? (f.req->high_next & 0xFFFFFF) >> kPsnBucketBits : Flow::kNotIndexed;
  if (candidate) {
    PairLink& l = link_of(f.slot);
    l.high_next = f.req->high_next;
    l.first_unanswered = f.req->pending.empty() ? f.req->high_next : f.req->pending.front().first;
  }
  if (bucket == f.unpaired_bucket) return;
  unindex_unpaired(f);
  if (bucket == Flow::kNotIndexed) return;
  const std::uint64_t key = bucket_key(f.host_pair, bucket);
  const std::uint32_t head = unpaired_by_psn_.find(key);
  PairLink& l = link_of(f.slot);
  l.host_pair = f.host_pair;
  l.prev = Flow::kNotIndexed;
  l.next = head;
  if (head == Flow::kNotIndexed) {
    unpaired_by_psn_.insert(key, f.slot);
  } else {
    links_[head].prev = f.slot;
    unpaired_by_psn_.assign(key, f.slot);
  }
  UnpairedEnds& e = unpaired_[f.host_pair];
  ++e.count;
  e.slot_xor ^= f.slot;
  f.unpaired_bucket = bucket;
}

void TransportAnalyzer::unindex_unpaired(Flow& f) {
  if (f.unpaired_bucket == Flow::kNotIndexed) return;
  const std::uint64_t key = bucket_key(f.host_pair, f.unpaired_bucket);
  PairLink& l = links_[f.slot];
  if (l.next != Flow::kNotIndexed) links_[l.next].prev = l.prev;
  if (l.prev != Flow::kNotIndexed) links_[l.prev].next = l.next;
  else if (l.next != Flow::kNotIndexed) unpaired_by_psn_.assign(key, l.next);
  else unpaired_by_psn_.erase(key);
  l.next = l.prev = Flow::kNotIndexed;
  if (auto e = unpaired_.find(f.host_pair); e != unpaired_.end()) {
    e->second.slot_xor ^= f.slot;
    if (--e->second.count == 0) unpaired_.erase(e);
  }
  f.unpaired_bucket = Flow::kNotIndexed;
}

TransportAnalyzer::PairLink& TransportAnalyzer::link_of(std::uint32_t slot) {
  if (slot >= links_.size()) links_.resize(slot + 1);
  return links_[slot];
}

// Whether `psn` may answer a request of the requester `q` (whose link is `l`):
// `holds`, an outstanding request carries it (IBA 9.7.5.1: an ACK, NAK or READ
// response carries the PSN of the request it answers); `unseen`, it names a
// request the capture point did not see (a NAK names the first PSN lost before
// it, IBA 9.7.5.2): below the requester's next PSN and above its first
// unanswered request less kUnseenBelow. Anything farther is as likely another
// connection's PSN. A NAK for a PSN sequence error (`seq_nak`) names the PSN
// its responder expected when a later request came (IBA 9.7.5.2), and that
// request passed the capture point too: a requester that sent nothing after
// `psn` is not its addressee. The link's copy of the range sorts out most flows
// of a bucket without a read of their state.
TransportAnalyzer::PsnFit TransportAnalyzer::psn_fit(const PairLink& l, std::uint32_t slot, std::uint32_t psn,
                                                     bool seq_nak) {
  const std::int32_t sent_after = psn_diff(l.high_next, psn) - 1;  // PSNs used after `psn`
  if (sent_after < (seq_nak ? 1 : 0) || psn_diff(l.first_unanswered, psn) > kUnseenBelow) return PsnFit::none;
  ++pair_probes_;
  for (const auto& r : flows_.at(slot)->req->pending)
    if (psn_diff(psn, r.first) >= 0 && psn_diff(r.last, psn) >= 0) return PsnFit::holds;
  return PsnFit::unseen;
}

// infer_peer's look at one bucket, into `fits`. The flows of the bucket are
// passed over in the dense links_; a flow's requester state is read only when
// `psn` lies in or just below its unanswered requests.
void TransportAnalyzer::fits_in_bucket(const Flow& resp, std::uint64_t reverse, std::uint32_t bucket,
                                       std::uint32_t psn, bool seq_nak, Fits& fits) {
  for (std::uint32_t n = unpaired_bucket(reverse, bucket); n != Flow::kNotIndexed; n = links_[n].next) {
    const PairLink& l = links_[n];
    ++pair_probes_;
    if (n == resp.slot || l.host_pair != reverse) continue;
    switch (psn_fit(l, n, psn, seq_nak)) {
      case PsnFit::holds: fits.holder = flows_.at(n), ++fits.holders; break;
      case PsnFit::unseen: fits.unseen = flows_.at(n), ++fits.unseens; break;
      case PsnFit::none: break;
    }
  }
}

// Candidates: the unpaired reliable requester flows in the opposite direction
// between the same two ends. The one with an outstanding request holding `psn`;
// else the one that missed a request at `psn` (psn_fit); none when two fit
// alike (a wrong pair makes false verdicts: the next response tries again);
// else the only candidate. The buckets from `psn`'s up to 65536 PSNs above it
// are looked at, nearest first, and the search stops at the first bucket with
// a fit: no flow between those ends is scanned.
TransportAnalyzer::Flow* TransportAnalyzer::infer_peer(Flow& resp, std::uint32_t psn, bool seq_nak) {
  const FlowKey& k = resp.s.key;
  const std::uint64_t reverse = host_pair_hash(k.transport, k.dst, k.src, k.addr_len, k.point);
  ++pair_probes_;
  const auto ends = unpaired_.find(reverse);
  if (ends == unpaired_.end()) return nullptr;
  const std::uint32_t candidates = ends->second.count;
  Fits fits;
  constexpr std::uint32_t kBuckets = 1u << (24 - kPsnBucketBits);
  const std::uint32_t first = (psn & 0xFFFFFF) >> kPsnBucketBits;
  for (std::uint32_t i = 0; i <= (1u << (16 - kPsnBucketBits)) && !fits.holders && !fits.unseens; ++i)
    fits_in_bucket(resp, reverse, (first + i) % kBuckets, psn, seq_nak, fits);
  Flow* found = fits.holders == 1 ? fits.holder : !fits.holders && fits.unseens == 1 ? fits.unseen : nullptr;
  if (found) {
    pair(*found, resp, candidates == 1 ? Pairing::inferred_only_flow : Pairing::inferred_psn);
    return found;
  }
  if (fits.holders || fits.unseens) return nullptr;  // two fit alike: no guess
  Flow* only = candidates == 1 ? flows_.at(ends->second.slot_xor) : nullptr;
  if (only && only != &resp) {
    pair(*only, resp, Pairing::inferred_only_flow);
    return only;
  }
  return nullptr;
}

namespace {
// A REQ's place among those pending: its Communication ID at its capture point
// (the same REQ seen at two points is two REQs, each answered by its point's REP).
std::uint64_t cm_side_key(std::uint32_t comm_id, std::uint16_t point) { return std::uint64_t{point} << 32 | comm_id; }
}  // namespace

// CM REQ/REP pair the two QPs of a connection and give both starting PSNs (IBA 12.6, 12.7.2/12.7.8).
void TransportAnalyzer::cm_message(const DecodedPacket& p, std::uint64_t frame, double ts) {
  FlowKey ends;
  if (endpoint_addresses(p, ends)) cm_message(*p.cm, ends, frame, ts, false);
}

// `ends`: the message's addresses (transport set). `replayed`: a message held
// as corrupt until its direction's ICRCs were found not the wire's (icrc_origin.h),
// taken now, later than its place: flows its REP makes that carried packets
// since keep their sequence (no restart).
void TransportAnalyzer::cm_message(const CmMessage& cm, const FlowKey& ends, std::uint64_t frame, double ts,
                                   bool replayed) {
  if (cm.type == CmMessageType::req) {
    if (cm_reqs_.size() > 65536) cm_reqs_.clear();
    cm_reqs_[cm_side_key(cm.local_comm_id, ends.point)] = CmSide{ends, cm.local_qpn, cm.starting_psn, cm.path_mtu};
    if (track_cm_ids_) note_cm_id(cm_req_ids_, cm.local_comm_id);
    return;
  }
  if (cm.type != CmMessageType::rep) return;
  auto it = cm_reqs_.find(cm_side_key(cm.remote_comm_id, ends.point));
  if (it == cm_reqs_.end()) {
    if (track_cm_ids_) note_cm_id(cm_unmatched_reps_, cm.remote_comm_id);
    return;
  }
  const CmSide req = it->second;
  cm_reqs_.erase(it);
  // REQ sender A (QPN qa) and REP sender B (QPN qb); flow ab is A's packets to qb.
  auto make = [&](bool a_to_b) -> Flow& {
    FlowKey k = req.from;
    k.transport = ends.transport;
    if (!a_to_b) std::swap(k.src, k.dst);
    k.dest_qp = a_to_b ? cm.local_qpn : req.qpn;
    k.src_qp = 0;
    const std::uint64_t hash = flows_.hash_of(k);
    const std::uint32_t found = flows_.find(k, hash);
    // Made at the REP (its frame and time: the connection's start as the capture saw it).
    return found != decltype(flows_)::kNone ? *flows_.at(found) : create_flow(k, hash, TransportService::rc, frame, ts);
  };
  Flow& ab = make(true);
  Flow& ba = make(false);
  auto start = [&](Flow& f, std::uint32_t psn) {
    if (!replayed || f.s.packets == 0) {
      RequesterState& q = f.requester();
      q.spur.open = false;  // a new connection: no verdict on the old one's resend
      q.restart(psn);
      q.msg.kind = MessageState::Kind::none;
    }
    if (req.mtu_code >= 1 && req.mtu_code <= 5) {
      f.s.pmtu = 256u << (req.mtu_code - 1);
      f.s.pmtu_from_cm = true;
    }
  };
  // Each message's Starting PSN is the first PSN its sender will *receive*:
  // Linux's CM gives the REQ's to the passive side's send queue and the REP's
  // to the active side's, and the rxe traffic on the wire agrees. A's requests start at the REP's
  // PSN, B's at the REQ's. Regression: tests/pcaps/lab_rxe_send_lat_rdmacm_near_psn.
  start(ab, cm.starting_psn);
  start(ba, req.psn);
  pair(ab, ba, Pairing::cm);
}

void TransportAnalyzer::note_cm_id(std::vector<std::uint32_t>& ids, std::uint32_t id) {
  constexpr std::size_t kMaxCmIds = 65536;
  if (ids.size() < kMaxCmIds) ids.push_back(id);
  else cm_ids_overflow_ = true;
}

// ---------------------------------------------------------------- memory bound

// Called by the flow table just before it frees the slot.
void TransportAnalyzer::retire(std::uint32_t, Flow& f) {
  settle_spurious(f);
  keep_summary(std::move(f.s));  // f.s is not read again
  unindex_unpaired(f);
  if (auto ps = paths_.find(f.path); ps != paths_.end() && --ps->second.flows == 0) paths_.erase(ps);
}

// Up to kMaxRetiredFlows summaries. Past a few thousand the room for all is
// taken at once: doubling moved every summary (408 bytes) again at each step
// and faulted in each new block (1M QPs: 131,072 summaries).
void TransportAnalyzer::keep_summary(FlowSummary&& s) {
  if (summaries_.size() >= kMaxRetiredFlows) {
    ++evicted_;
    return;
  }
  if (summaries_.size() == summaries_.capacity() && summaries_.size() >= 4096) summaries_.reserve(kMaxRetiredFlows);
  summaries_.push_back(std::move(s));
}

void TransportAnalyzer::retire_idle(double now) {
  if (now - live_ts_floor_ <= kIdleRetireSeconds) return;  // none idle that long
  double floor = std::numeric_limits<double>::infinity();
  flows_.retire_if(
      [now, &floor](const Flow& f) {
        const bool idle = now - f.s.last_ts > kIdleRetireSeconds && f.idle_state();
        if (!idle) floor = std::min(floor, f.s.last_ts);
        return idle;
      },
      [this](std::uint32_t slot, Flow& f) { retire(slot, f); });
  live_ts_floor_ = floor;
}

// An open spurious-resend check at the end: a verdict only if its answers were
// due (one beyond the resent PSNs came); otherwise they may come after the capture.
void TransportAnalyzer::settle_spurious(Flow& f) {
  if (!f.req || !f.req->spur.open) return;
  SeqSink sink(log_, f.s, nullptr);
  spurious_verdict(*f.req, sink, f.req->spur.closing);
}

void TransportAnalyzer::finish() {
  if (finished_) return;
  finished_ = true;
  // The live flows' summaries are listed in their cells, not copied out
  // (FlowList); past kMaxRetiredFlows in all they are only counted, as
  // keep_summary counts the retired ones. Sorted as (index, summary) pairs,
  // so that the sort does not read each summary again.
  std::vector<std::pair<std::uint32_t, FlowSummary*>> order;
  order.reserve(std::min<std::size_t>(summaries_.size() + flows_.size(), kMaxRetiredFlows));
  for (FlowSummary& s : summaries_) order.emplace_back(s.index, &s);
  flows_.for_each([this, &order](std::uint32_t, Flow& f) {
    settle_spurious(f);
    if (order.size() >= kMaxRetiredFlows) ++evicted_;
    else order.emplace_back(f.s.index, &f.s);
  });
  // The live flows' states stay allocated with the analyzer (their summaries
  // are listed; analyze leaves its analysis to the kernel at exit,
  // AnalysisSession::keep_analysis_until_exit).
  unpaired_by_psn_.clear();
  unpaired_.clear();
  paths_.clear();
  std::sort(order.begin(), order.end());  // creation order: indexes are unique
  listed_.items_.reserve(order.size());
  for (const auto& o : order) listed_.items_.push_back(o.second);
}

TransportAnalyzer::Bounds TransportAnalyzer::bounds() const {
  return Bounds{evicted_ != 0 || flows_.cap_reached(), flows_.peak(), finished_ ? listed_.size() : summaries_.size()};
}

void TransportAnalyzer::merge(std::span<TransportAnalyzer* const> parts,
                              std::vector<std::vector<std::uint32_t>>& flow_index) {
  struct FlowRef {
    std::uint64_t first_frame;
    std::size_t part, pos;
  };
  std::vector<FlowRef> refs;
  flow_index.assign(parts.size(), {});
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const TransportAnalyzer& x = *parts[s];
    flow_index[s].assign(x.next_index_, UINT32_MAX);
    for (std::size_t i = 0; i < x.listed_.size(); ++i) refs.push_back({x.listed_[i].first_frame, s, i});
    evicted_ += x.evicted_;
    cap_retired_ += x.cap_retired_;
    icrc_not_wire_packets_ += x.icrc_not_wire_packets_;
    global_pmtu_ = std::max(global_pmtu_, x.global_pmtu_);
  }
  const auto by_creation = [](const FlowRef& a, const FlowRef& b) {
    return std::tie(a.first_frame, a.part, a.pos) < std::tie(b.first_frame, b.part, b.pos);
  };
  // (each part's list is in creation order: one part with flows, as one address pair gives, is already merged)
  if (!std::is_sorted(refs.begin(), refs.end(), by_creation)) std::sort(refs.begin(), refs.end(), by_creation);
  // The summaries stay where the parts keep them (their retired lists and live
  // cells): moving them into one vector wrote 248 bytes of fresh memory per flow
  // (49 MB at the flow caps of a 1M-QP capture), for reports that read each once.
  summaries_.clear();
  listed_.items_.clear();
  listed_.items_.reserve(refs.size());
  for (const FlowRef& r : refs) {
    FlowSummary* f = parts[r.part]->listed_.items_[r.pos];
    flow_index[r.part][f->index] = static_cast<std::uint32_t>(listed_.items_.size());
    listed_.items_.push_back(f);
  }
  for (std::size_t i = 0; i < refs.size(); ++i) {
    FlowSummary& f = *listed_.items_[i];
    const auto& map = flow_index[refs[i].part];
    f.index = static_cast<std::uint32_t>(i);
    if (f.peer >= 0) {
      const std::uint32_t p = static_cast<std::size_t>(f.peer) < map.size() ? map[static_cast<std::size_t>(f.peer)] : UINT32_MAX;
      f.peer = p == UINT32_MAX ? -1 : static_cast<std::int64_t>(p);
    }
  }
  next_index_ = static_cast<std::uint32_t>(listed_.items_.size());
  for (TransportAnalyzer* x : parts) x->listed_.items_.clear();
  finished_ = true;  // listed_ is complete: no live flows here
}

}  // namespace rdmadiag::decode
