#include "decode/transport_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace rdmadiag::decode {

// ---------------------------------------------------------------- helpers

void LatencyStats::add(double us) {
  if (count_ == 0 || us < min_) min_ = us;
  if (count_ == 0 || us > max_) max_ = us;
  ++count_;
  sum_ += us;
  sorted_ = false;
  if (samples_.size() < kReservoir) {
    // A first block of 256 (1 KB), then doubling: rare events (recovery times) never grow past it.
    if (samples_.capacity() == 0) samples_.reserve(256);
    samples_.push_back(static_cast<float>(us));
    return;
  }
  // Reservoir sampling (Algorithm R) with a fixed-seed xorshift: deterministic output.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const std::uint64_t j = rng_ % count_;
  if (j < kReservoir) samples_[j] = static_cast<float>(us);
}

double LatencyStats::percentile(double p) const {
  if (samples_.empty()) return 0;
  if (!sorted_ || sorted_copy_.size() != samples_.size()) {
    sorted_copy_ = samples_;
    std::sort(sorted_copy_.begin(), sorted_copy_.end());
    sorted_ = true;
  }
  // Nearest-rank percentile.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted_copy_.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return sorted_copy_[std::min(i, sorted_copy_.size() - 1)];
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

std::uint64_t host_pair_hash(Transport t, const std::array<std::uint8_t, 16>& src, const std::array<std::uint8_t, 16>& dst,
                             std::uint8_t len) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<std::uint64_t>(t);
  h = fnv(h, src.data(), len);
  return fnv(h ^ 0xff, dst.data(), len);
}

// Both directions between two ends: the path.
std::uint64_t path_hash(const FlowKey& k) {
  const bool swap = std::lexicographical_compare(k.dst.begin(), k.dst.begin() + k.addr_len, k.src.begin(),
                                                 k.src.begin() + k.addr_len);
  return host_pair_hash(k.transport, swap ? k.dst : k.src, swap ? k.src : k.dst, k.addr_len) ^ 0x5bd1e995ULL;
}

// Addresses that identify the two ends at the RDMA layer.
bool endpoint_addresses(const DecodedPacket& p, FlowKey& k) {
  k.transport = p.transport;
  if (p.ipv4) {
    k.addr_len = 4;
    std::copy(p.ipv4->src.begin(), p.ipv4->src.end(), k.src.begin());
    std::copy(p.ipv4->dst.begin(), p.ipv4->dst.end(), k.dst.begin());
  } else if (p.ipv6) {
    k.addr_len = 16;
    k.src = p.ipv6->src;
    k.dst = p.ipv6->dst;
  } else if (p.lrh) {
    // Native IB: LIDs identify the ports (a GRH may also be present; LIDs are what switches route on).
    k.addr_len = 2;
    k.src[0] = static_cast<std::uint8_t>(p.lrh->slid >> 8);
    k.src[1] = static_cast<std::uint8_t>(p.lrh->slid);
    k.dst[0] = static_cast<std::uint8_t>(p.lrh->dlid >> 8);
    k.dst[1] = static_cast<std::uint8_t>(p.lrh->dlid);
  } else if (p.grh) {
    k.addr_len = 16;
    k.src = p.grh->sgid;
    k.dst = p.grh->dgid;
  } else {
    return false;
  }
  return true;
}

OpClass op_class(OpKind k) {
  switch (k) {
    case OpKind::write_first: case OpKind::write_middle: case OpKind::write_last: case OpKind::write_only:
    case OpKind::atomic_write: case OpKind::flush:
      return OpClass::write;
    case OpKind::read_request: return OpClass::read;
    case OpKind::compare_swap: case OpKind::fetch_add: return OpClass::atomic;
    default: return OpClass::send;
  }
}

bool is_first(OpKind k) { return k == OpKind::send_first || k == OpKind::write_first; }
bool is_middle(OpKind k) { return k == OpKind::send_middle || k == OpKind::write_middle; }
bool is_last(OpKind k) { return k == OpKind::send_last || k == OpKind::write_last; }
bool is_only(OpKind k) { return k == OpKind::send_only || k == OpKind::write_only; }

// The IBA path MTUs (256 << (code - 1)).
std::uint32_t mtu_round_up(std::uint32_t bytes) {
  for (std::uint32_t m = 256; m <= 4096; m <<= 1)
    if (bytes <= m) return m;
  return 4096;
}

constexpr std::int32_t kRestartJump = 1 << 20;  // a PSN jump this large is a new connection, not loss
constexpr std::size_t kMaxPending = 4096;
constexpr std::size_t kMaxOpenGaps = 64;
constexpr double kTimeoutSilenceSeconds = 0.001;

}  // namespace

// Word-at-a-time (the key's own bytes, zero past addr_len): this runs once per packet.
std::size_t FlowKeyHash::operator()(const FlowKey& k) const {
  std::uint64_t w[4];
  std::memcpy(w, k.src.data(), 16);
  std::memcpy(w + 2, k.dst.data(), 16);
  std::uint64_t h = (static_cast<std::uint64_t>(k.transport) << 56) ^ (static_cast<std::uint64_t>(k.src_qp) << 24) ^ k.dest_qp;
  for (std::uint64_t x : w) h = (h ^ x) * 0x9E3779B97F4A7C15ULL + (h >> 31);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  return static_cast<std::size_t>(h ^ (h >> 32));
}

// ---------------------------------------------------------------- flow state

struct PendingRequest {
  std::uint32_t first, last;  // PSNs this request occupies
  std::uint64_t frame;
  double ts;
  OpClass op;
  bool ack_req;
  std::uint32_t read_len;
};

struct OpenGap {
  std::uint32_t first, last;  // missing PSNs, inclusive
  std::uint32_t next_fill;    // resends fill a gap from its start (go-back-N)
  std::uint64_t frame;
  double ts;
  std::size_t anomaly;        // index in the log (SIZE_MAX if not kept)
  std::uint64_t nak_frame = 0;
};

struct TransportAnalyzer::Flow {
  FlowSummary s;
  std::uint32_t slot = 0;
  std::int64_t peer_slot = -1;
  std::uint64_t host_pair = 0;
  std::uint64_t path = 0;
  // Requester side (requests sent on this flow).
  bool started = false;
  std::uint32_t expected = 0;   // next PSN in order
  std::uint32_t high_next = 0;  // one past the highest PSN sent
  bool resending = false;
  bool resend_after_nak = false;
  bool spurious_episode = false;
  // The verdict on a spurious-looking resend waits for the ACKs: if fewer ACKs
  // (or READ responses) than copies of the request reach the capture point, an
  // ACK was lost before it and the resend was a real recovery.
  bool spur_open = false;
  std::uint32_t spur_psn = 0, spur_copies = 0, spur_acks = 0;
  std::uint64_t spur_frame = 0;
  bool spur_is_read = false;
  bool acked_valid = false;
  std::uint32_t acked_through = 0;  // the highest PSN an ACK or response covered
  std::size_t episode_anomaly = SIZE_MAX;
  std::uint64_t nak_frame = 0;  // a NAK (or RNR NAK) not yet followed by its resend
  double nak_ts = 0;
  std::uint32_t nak_psn = 0;
  FlowRing<PendingRequest> pending;
  std::vector<OpenGap> gaps;
  struct RecentCopy {
    std::uint32_t psn;
    std::int32_t ip_id;  // -1: no IPv4 header
    double ts;
  };
  std::array<RecentCopy, 64> recent{};  // the last requests seen, to recognise copies made by the network
  std::size_t recent_pos = 0;
  enum class Msg : std::uint8_t { none, send, write, unknown } msg = Msg::unknown;
  std::uint64_t msg_bytes = 0;
  std::uint32_t msg_reth_len = 0;
  bool pkey_set = false;
  std::uint16_t pkey = 0;
  bool read_span_unknown = false;
  std::uint32_t read_psn = 0, read_len = 0;
  // Responder side (responses sent on this flow, in the peer's PSN space).
  std::uint32_t resp_expected = 0;
  bool in_read_response = false;
};

TransportAnalyzer::TransportAnalyzer(AnomalyLog& log) : log_(log) {}

void TransportAnalyzer::record_gap(Flow& f, std::uint64_t frame, double ts, std::uint32_t psn, std::uint32_t first,
                                   std::uint32_t count, PacketAnalysis& out, bool track) {
  ++f.s.gaps;
  f.s.missing += count;
  out.gap += count;
  Anomaly a{AnomalyKind::psn_gap};
  a.frame = frame;
  a.psn = psn;
  a.expected_psn = first;
  a.count = count;
  const std::size_t idx = log_.items().size();
  add_anomaly(a, &f, &out);
  if (!track) return;
  // Kept open until resends (or late originals) fill it, to link NAKs and measure recovery.
  if (f.gaps.size() == kMaxOpenGaps) f.gaps.erase(f.gaps.begin());
  f.gaps.push_back(OpenGap{first, (first + count - 1) & kPsnMask, first, frame, ts,
                           idx < log_.items().size() ? idx : SIZE_MAX});
}
TransportAnalyzer::~TransportAnalyzer() = default;

void TransportAnalyzer::add_anomaly(Anomaly a, Flow* f, PacketAnalysis* out) {
  if (f) {
    a.flow = f->s.index;
    if (!a.dest_qp) a.dest_qp = f->s.key.dest_qp;
  } else {
    a.flow = UINT32_MAX;
  }
  log_.add(a);
  if (out && out->anomaly_count < 255) ++out->anomaly_count;
}

TransportAnalyzer::Flow& TransportAnalyzer::flow_for(const DecodedPacket& p, std::uint64_t frame, double ts,
                                                     bool& created) {
  FlowKey k;
  endpoint_addresses(p, k);
  k.dest_qp = p.ib.bth.dest_qp;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  if (info.service == TransportService::ud && p.ib.has(kDeth)) k.src_qp = p.ib.deth.src_qp;
  const std::uint32_t slot = by_key_.find(k);
  created = slot == FlowIndex::kNone;
  if (!created) return *slots_[slot];
  return create_flow(k, info.service, frame, ts);
}

TransportAnalyzer::Flow& TransportAnalyzer::create_flow(const FlowKey& k, TransportService service, std::uint64_t frame,
                                                        double ts) {
  if (by_key_.size() >= kMaxLiveFlows) {
    live_cap_reached_ = true;
    retire_idle(std::numeric_limits<double>::infinity());
  }
  auto f = std::make_unique<Flow>();
  f->s.key = k;
  f->s.service = service;
  f->s.index = next_index_++;
  f->s.first_frame = frame;
  f->s.first_ts = ts;
  f->host_pair = host_pair_hash(k.transport, k.src, k.dst, k.addr_len);
  f->path = path_hash(k);
  ++paths_[f->path].flows;
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(f);
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(f));
  }
  slots_[slot]->slot = slot;
  by_key_.insert(k, slot);
  peak_live_ = std::max(peak_live_, by_key_.size());
  by_host_pair_[slots_[slot]->host_pair].push_back(slot);
  return *slots_[slot];
}

void TransportAnalyzer::pair(Flow& a, Flow& b, Pairing how) {
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
  if (f.peer_slot >= 0 && slots_[f.peer_slot] && slots_[f.peer_slot]->s.pmtu) return slots_[f.peer_slot]->s.pmtu;
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

void TransportAnalyzer::add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out) {
  if (!p.has_bth) return;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  bool created = false;
  Flow& f = flow_for(p, frame, ts, created);
  FlowSummary& s = f.s;
  ++s.packets;
  s.bytes += p.wirelen;
  s.payload_bytes += p.payload_len;
  s.last_frame = frame;
  s.last_ts = ts;
  out.analysed = true;
  out.flow = s.index;

  // Congestion signals.
  const int ecn = p.ipv4 ? p.ipv4->ecn : p.ipv6 ? p.ipv6->ecn() : p.grh ? (p.grh->traffic_class & 3) : 0;
  if (ecn) ++s.ecn_ect;
  if (ecn == 3) {
    ++s.ecn_ce;
    out.ecn_ce = true;
    last_ce_[f.host_pair] = ts;
  }
  if (p.ib.bth.fecn) ++s.fecn;
  if (p.ib.bth.becn) ++s.becn;
  if (info.kind == OpKind::cnp) {
    ++s.cnp;
    out.cnp = true;
    return;
  }

  if (p.icrc == CrcStatus::bad || p.vcrc == CrcStatus::bad) {
    // A receiver drops such a packet: its header fields cannot be trusted for sequencing.
    ++s.icrc_bad;
    Anomaly a{p.icrc == CrcStatus::bad ? AnomalyKind::icrc_bad : AnomalyKind::vcrc_bad};
    a.frame = frame;
    a.psn = p.ib.bth.psn;
    add_anomaly(a, &f, &out);
    return;
  }
  if (!info.valid) return;

  if (!f.pkey_set) {
    f.pkey_set = true;
    f.pkey = p.ib.bth.pkey;
  } else if (f.pkey != p.ib.bth.pkey) {
    ++s.pkey_changes;
    Anomaly a{AnomalyKind::pkey_change};
    a.frame = frame;
    a.psn = p.ib.bth.psn;
    a.count = p.ib.bth.pkey;
    add_anomaly(a, &f, &out);
    f.pkey = p.ib.bth.pkey;
  }

  if (p.cm) cm_message(p, frame);

  if (info.service == TransportService::ud || info.service == TransportService::uc) {
    if (info.service == TransportService::ud) ++s.requests;
    unreliable(f, p, frame, ts, out);
    if (info.service == TransportService::ud) return;
  } else if (info.is_request()) {
    ++s.requests;
    requester(f, p, frame, ts, out);
  } else {
    ++s.responses;
    responder(f, p, frame, ts, out);
  }
}

// Requests on a reliable connection (RC, XRC, RD): IBA 9.7.1 / 9.7.2.
void TransportAnalyzer::requester(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out) {
  FlowSummary& s = f.s;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  const std::uint32_t psn = p.ib.bth.psn;
  const std::int32_t ip_id = p.ipv4 ? p.ipv4->id : -1;

  if (info.full_mtu_payload()) learn_pmtu(f, p.payload_len);

  // PSNs this request occupies: one, or one per READ response packet (IBA 9.7.2.1).
  std::uint32_t consumed = 1;
  bool read_span_known = true;
  if (info.kind == OpKind::read_request) {
    const std::uint32_t mtu = pmtu_for(f);
    const std::uint32_t len = p.ib.reth.dma_len;
    if (mtu) consumed = len ? (len + mtu - 1) / mtu : 1;
    else read_span_known = len <= 256;
  }

  // A READ whose span was unknown: the next request's PSN tells the span, and so the PMTU.
  if (f.read_span_unknown) {
    f.read_span_unknown = false;
    const std::int32_t k = psn_diff(psn, f.read_psn);
    const std::uint32_t most = (f.read_len + 255) / 256;
    if (k >= 1 && static_cast<std::uint32_t>(k) <= std::max<std::uint32_t>(most, 1)) {
      f.expected = psn;
      if (psn_diff(psn, f.high_next) > 0) f.high_next = psn;
      if (k > 1 && !s.pmtu_from_cm) {
        s.pmtu = mtu_round_up((f.read_len + static_cast<std::uint32_t>(k) - 1) / static_cast<std::uint32_t>(k));
        note_path_pmtu(f, s.pmtu);
      }
    }
  }

  // A READ is answered by its data, which comes before the next request is sent
  // in the cases that matter (ping-pong); other requests wait for a newer ACK.
  if (f.spur_open && f.spur_is_read && f.started && psn_diff(psn, f.spur_psn) > 0 && psn_diff(psn, f.high_next) >= 0)
    spurious_verdict(f);

  // Two cursors model the connection (IBA 9.7.2, 9.7.5.2.2): `high_next`, one past
  // the highest PSN seen on the wire (PSNs skipped beyond it were lost before the
  // capture point), and, during a resend, `expected` (the resend cursor: the next
  // PSN the resend must carry). A NAK for PSN n makes the responder discard
  // everything from n on, so after it those PSNs are needed again, and a resend
  // that skips some of them has lost them again.
  enum class Class { in_order, gap, retransmission, duplicate, out_of_order, restart, stray } cls = Class::in_order;
  OpenGap* gap_hit = nullptr;
  std::int32_t d = 0;
  std::uint32_t resend_skip = 0;  // PSNs a NAK-driven resend skipped
  if (!f.started) {
    cls = Class::restart;
  } else {
    d = psn_diff(psn, f.high_next);
    if (d > kRestartJump || d < -kRestartJump) {
      cls = Class::restart;
    } else if (d >= 0) {
      cls = d > 0 ? Class::gap : Class::in_order;
    } else {
      for (auto& g : f.gaps)
        if (psn_diff(psn, g.first) >= 0 && psn_diff(g.last, psn) >= 0) gap_hit = &g;
      // A copy made by the network keeps the IPv4 ID of its original; without an
      // IPv4 header, only a copy right behind its original is taken for one.
      bool network_duplicate = false;
      for (const auto& r : f.recent)
        if (r.psn == psn && r.ts > 0 &&
            (ip_id >= 0 ? r.ip_id == ip_id : (!gap_hit && !f.nak_frame && ts - r.ts < kTimeoutSilenceSeconds)))
          network_duplicate = true;
      if (network_duplicate) {
        cls = Class::duplicate;
      } else if (gap_hit && !f.nak_frame && !f.resending) {
        cls = Class::out_of_order;
      } else if (f.nak_frame && psn == f.nak_psn) {
        cls = Class::retransmission;  // the resend the NAK asked for (IBA 9.7.5.2.2)
      } else if (f.nak_frame && !f.resending) {
        // Older than what the NAK asks for: a delayed copy, not the resend.
        cls = psn_diff(psn, f.nak_psn) < 0 && !gap_hit ? Class::stray : Class::retransmission;
      } else if (f.resending) {
        // Continuing a resend; a NAK that arrived meanwhile waits for its own PSN.
        const std::int32_t c = psn_diff(psn, f.expected);
        if (c == 0 || gap_hit) {
          cls = Class::retransmission;
        } else if (c > 0) {
          cls = Class::retransmission;
          if (f.resend_after_nak) resend_skip = static_cast<std::uint32_t>(c);
        } else {
          cls = Class::stray;
        }
      } else {
        cls = Class::retransmission;  // a resend without a NAK: the requester's timer
      }
    }
  }
  out.expected_psn = !f.started ? -1 : f.resending ? static_cast<std::int64_t>(f.expected) : static_cast<std::int64_t>(f.high_next);

  auto fill_gaps = [&](std::uint32_t first, std::uint32_t last) {
    for (std::size_t i = 0; i < f.gaps.size();) {
      OpenGap& g = f.gaps[i];
      if (psn_diff(first, g.next_fill) <= 0 && psn_diff(last, g.next_fill) >= 0) g.next_fill = (last + 1) & kPsnMask;
      if (psn_diff(g.next_fill, g.last) > 0) {
        ++s.gaps_recovered;
        const double us = (ts - g.ts) * 1e6;
        s.recovery.add(us);
        if (g.anomaly < log_.items().size()) log_.items()[g.anomaly].relate(frame);
        if (f.episode_anomaly < log_.items().size()) {
          Anomaly& e = log_.items()[f.episode_anomaly];
          e.duration_us = std::max(e.duration_us, us);
        }
        f.gaps.erase(f.gaps.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  };
  auto open_gap = [&](std::uint32_t first, std::uint32_t count) { record_gap(f, frame, ts, psn, first, count, out, true); };

  switch (cls) {
    case Class::restart:
      if (f.spur_open) spurious_verdict(f, false);  // a new incarnation of the QP
      f.started = true;
      f.resending = false;
      f.nak_frame = 0;
      f.gaps.clear();
      f.pending.clear();
      f.msg = Flow::Msg::unknown;
      f.high_next = psn;
      break;
    case Class::in_order:
      break;
    case Class::gap:
      // New data beyond anything seen: the PSNs in between never passed the capture point.
      open_gap(f.high_next, static_cast<std::uint32_t>(d));
      f.msg = Flow::Msg::unknown;
      break;
    case Class::duplicate: {
      ++s.duplicates;
      out.duplicate = true;
      Anomaly a{AnomalyKind::psn_duplicate};
      a.frame = frame;
      a.psn = psn;
      a.expected_psn = f.high_next;
      add_anomaly(a, &f, &out);
      return;  // a copy: the sequence state is unchanged
    }
    case Class::out_of_order: {
      ++s.out_of_order;
      out.out_of_order = true;
      Anomaly a{AnomalyKind::psn_out_of_order};
      a.frame = frame;
      a.psn = psn;
      a.expected_psn = f.high_next;
      a.relate(gap_hit->frame);
      add_anomaly(a, &f, &out);
      fill_gaps(psn, (psn + consumed - 1) & kPsnMask);
      return;  // a late original: the stream goes on from where it was
    }
    case Class::stray:
      // An older copy than the resend in progress (a delayed packet): the sender did
      // send it again, but it changes nothing in the sequence.
      ++s.spurious_retransmissions;
      out.retransmission = out.spurious_retransmission = true;
      return;
    case Class::retransmission: {
      out.retransmission = true;
      const bool new_episode = !f.resending || (f.nak_frame && psn == f.nak_psn) ||
                               (psn_diff(psn, f.expected) < 0 && !gap_hit);
      if (new_episode) {
        // A new go-back-N episode starts at this PSN. Without a NAK and without a
        // gap to fill, the original got through: the resend is spurious.
        f.resending = true;
        f.resend_after_nak = f.nak_frame != 0;
        f.msg = Flow::Msg::unknown;  // go-back-N may restart in the middle of a message
        f.spurious_episode = !f.nak_frame && !gap_hit;
        f.episode_anomaly = SIZE_MAX;
        if (f.spurious_episode) {
          if (f.spur_open && f.spur_psn == psn) {
            ++f.spur_copies;
          } else {
            if (f.spur_open) spurious_verdict(f);
            f.spur_open = true;
            f.spur_psn = psn;
            f.spur_copies = 2;
            // The original may have been answered already (the requester was slow to see it).
            f.spur_acks = f.acked_valid && psn_diff(f.acked_through, psn) >= 0 ? 1 : 0;
            f.spur_frame = frame;
            f.spur_is_read = info.kind == OpKind::read_request;
          }
        } else {
          ++s.retransmission_episodes;
          if (!f.nak_frame) ++s.timeout_retransmissions;
          Anomaly a{AnomalyKind::retransmission};
          a.frame = frame;
          a.psn = psn;
          a.expected_psn = f.high_next;
          a.count = 1;
          a.duration_us = -1;
          if (f.nak_frame) a.relate(f.nak_frame);
          if (gap_hit) a.relate(gap_hit->frame);
          else
            for (const auto& g : f.gaps)
              if (psn_diff(g.first, psn) >= 0) {
                a.relate(g.frame);
                break;
              }
          f.episode_anomaly = log_.items().size();
          add_anomaly(a, &f, &out);
        }
        f.nak_frame = 0;
      } else {
        if (resend_skip) {
          open_gap(f.expected, resend_skip);  // lost again in the resend
          f.msg = Flow::Msg::unknown;
        }
        if (f.episode_anomaly < log_.items().size()) ++log_.items()[f.episode_anomaly].count;
      }
      if (f.spurious_episode) {
        ++s.spurious_retransmissions;
        out.spurious_retransmission = true;
      } else {
        ++s.retransmissions;
      }
      fill_gaps(psn, (psn + consumed - 1) & kPsnMask);
      break;
    }
  }

  // Message structure (IBA 9.4: FIRST, MIDDLE..., LAST; or ONLY), checked in order only.
  const OpKind k = info.kind;
  auto bad_sequence = [&] {
    ++s.bad_opcode_sequence;
    Anomaly a{AnomalyKind::bad_opcode_sequence};
    a.frame = frame;
    a.psn = psn;
    add_anomaly(a, &f, &out);
  };
  auto length_mismatch = [&](std::uint32_t expected_len, std::uint64_t got) {
    ++s.length_mismatches;
    Anomaly a{AnomalyKind::payload_length_mismatch};
    a.frame = frame;
    a.psn = psn;
    a.expected_psn = expected_len;
    a.count = static_cast<std::uint32_t>(got);
    add_anomaly(a, &f, &out);
  };
  const bool checkable = (cls == Class::in_order || cls == Class::retransmission) && !p.truncated;
  const Flow::Msg kind_msg = (k == OpKind::send_first || k == OpKind::send_middle || k == OpKind::send_last) ? Flow::Msg::send : Flow::Msg::write;
  if (checkable) {
    const bool in_msg = f.msg == Flow::Msg::send || f.msg == Flow::Msg::write;
    if (is_first(k) || is_only(k) || k == OpKind::read_request || k == OpKind::compare_swap || k == OpKind::fetch_add) {
      if (in_msg) bad_sequence();
    } else if ((is_middle(k) || is_last(k)) && f.msg != Flow::Msg::unknown && f.msg != kind_msg) {
      bad_sequence();
    }
    const std::uint32_t mtu = pmtu_for(f);
    if (info.full_mtu_payload() && mtu && p.payload_len != mtu && s.pmtu == mtu) length_mismatch(mtu, p.payload_len);
    if ((p.payload_len + p.ib.bth.pad_count) % 4 != 0 && info.carries_payload()) length_mismatch(0, p.payload_len);
  }
  if (is_first(k)) {
    f.msg = kind_msg;
    f.msg_bytes = p.payload_len;
    f.msg_reth_len = k == OpKind::write_first ? p.ib.reth.dma_len : 0;
  } else if (is_middle(k)) {
    f.msg_bytes += p.payload_len;
  } else if (is_last(k)) {
    if (f.msg == Flow::Msg::write && checkable && f.msg_bytes + p.payload_len != f.msg_reth_len)
      length_mismatch(f.msg_reth_len, f.msg_bytes + p.payload_len);
    f.msg = Flow::Msg::none;
  } else {
    if (k == OpKind::write_only && checkable && p.payload_len != p.ib.reth.dma_len) length_mismatch(p.ib.reth.dma_len, p.payload_len);
    f.msg = Flow::Msg::none;
  }

  // Advance the cursors.
  const std::uint32_t next = (psn + consumed) & kPsnMask;
  if (cls == Class::retransmission) {
    f.expected = next;
    if (psn_diff(f.expected, f.high_next) >= 0) f.resending = false;  // the resend caught up
  } else if (f.resending) {
    // New data while a resend was incomplete: what it did not resend after a NAK is lost again.
    if (f.resend_after_nak && psn_diff(f.high_next, f.expected) > 0 && cls != Class::restart)
      open_gap(f.expected, static_cast<std::uint32_t>(psn_diff(f.high_next, f.expected)));
    f.resending = false;
  }
  if (!f.started || psn_diff(next, f.high_next) > 0 || cls == Class::restart) f.high_next = next;
  if (!f.resending) f.expected = f.high_next;
  if (!read_span_known) {
    f.read_span_unknown = true;
    f.read_psn = psn;
    f.read_len = p.ib.reth.dma_len;
  }
  f.recent[f.recent_pos++ % f.recent.size()] = Flow::RecentCopy{psn, ip_id, ts};

  // Outstanding requests, matched by responses on the reverse flow. Only the
  // packet that ends a message (or a READ / atomic) is answered as an operation.
  if (is_first(k) || is_middle(k)) return;
  if (f.pending.size() == kMaxPending) f.pending.pop_front();
  f.pending.push_back(PendingRequest{psn, (psn + consumed - 1) & kPsnMask, frame, ts, op_class(k),
                                     p.ib.bth.ack_req, k == OpKind::read_request ? p.ib.reth.dma_len : 0});
}

// The requester flow that a response on `resp` answers: its pair, or inferred.
TransportAnalyzer::Flow* TransportAnalyzer::peer_requester(Flow& resp, std::uint32_t psn) {
  if (resp.peer_slot >= 0) {
    Flow* q = slots_[resp.peer_slot].get();
    if (q && q->s.index == static_cast<std::uint32_t>(resp.s.peer)) return q;
    resp.peer_slot = -1;
  }
  // Candidates: reliable flows in the opposite direction between the same two ends.
  const FlowKey& k = resp.s.key;
  const std::uint64_t reverse = host_pair_hash(k.transport, k.dst, k.src, k.addr_len);
  Flow* by_psn = nullptr;
  Flow* only = nullptr;
  int candidates = 0;
  const auto hp = by_host_pair_.find(reverse);
  if (hp == by_host_pair_.end()) return nullptr;
  for (const std::uint32_t slot : hp->second) {
    Flow* q = slots_[slot].get();
    if (!q || q == &resp || q->host_pair != reverse || !q->started || q->peer_slot >= 0) continue;
    if (q->s.service == TransportService::ud || q->s.service == TransportService::uc) continue;
    ++candidates;
    only = q;
    for (const auto& r : q->pending)
      if (psn_diff(psn, r.first) >= 0 && psn_diff(r.last, psn) >= 0) by_psn = q;
    if (!by_psn && psn_diff(psn, q->high_next) < 0 && psn_diff(psn, q->high_next) > -65536) by_psn = q;
  }
  if (by_psn) {
    pair(*by_psn, resp, candidates == 1 ? Pairing::inferred_only_flow : Pairing::inferred_psn);
    return by_psn;
  }
  if (candidates == 1) {
    pair(*only, resp, Pairing::inferred_only_flow);
    return only;
  }
  return nullptr;
}

// Responses and acknowledgements (IBA 9.7.5, 9.7.6): on this flow, in the peer's PSN space.
void TransportAnalyzer::responder(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out) {
  FlowSummary& s = f.s;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  const std::uint32_t psn = p.ib.bth.psn;
  Flow* q = peer_requester(f, psn);
  if (info.full_mtu_payload()) learn_pmtu(f, p.payload_len);

  // Completes the requests whose PSNs end at or before `upto`; latency for those asking for an ACK.
  auto complete_upto = [&](std::uint32_t upto, bool include_reads) {
    if (!q) return;
    if (!q->acked_valid || psn_diff(upto, q->acked_through) > 0) {
      q->acked_valid = true;
      q->acked_through = upto;
    }
    while (!q->pending.empty() && psn_diff(q->pending.front().last, upto) <= 0) {
      const PendingRequest r = q->pending.front();
      q->pending.pop_front();
      if (r.op == OpClass::read && !include_reads) continue;  // a READ completes with its data, not an ACK
      if (!r.ack_req && r.op != OpClass::read) continue;
      const double us = (ts - r.ts) * 1e6;
      q->s.latency[static_cast<std::size_t>(r.op)].add(us);
      out.request_frame = r.frame;
      out.latency_us = us;
      link_forward(r.frame, frame, us);
    }
  };

  switch (info.kind) {
    case OpKind::acknowledge: {
      const Aeth& aeth = p.ib.aeth;
      if (aeth.kind() == AethKind::ack) {
        ++s.acks;
        // Responders answer every copy of a request (IBA 9.7.5.1.2); the responder
        // answers in order, so an ACK beyond the resent PSN closes the count.
        if (q && q->spur_open && psn == q->spur_psn) ++q->spur_acks;
        if (q && q->spur_open && psn_diff(psn, q->spur_psn) > 0) spurious_verdict(*q, psn_diff(psn, q->spur_psn) < kRestartJump);
        complete_upto(psn, false);
        if (q) out.expected_psn = q->expected;
        break;
      }
      Anomaly a{AnomalyKind::rnr_nak};
      a.frame = frame;
      a.psn = psn;
      if (aeth.kind() == AethKind::rnr_nak) {
        ++s.rnr_naks;
        a.duration_us = aeth.rnr_timer_ms() * 1000.0;
      } else if (aeth.kind() == AethKind::nak && aeth.value() <= 4) {
        ++s.naks[aeth.value()];
        static constexpr AnomalyKind kNak[] = {AnomalyKind::nak_psn_seq_error, AnomalyKind::nak_invalid_request,
                                               AnomalyKind::nak_remote_access, AnomalyKind::nak_remote_op,
                                               AnomalyKind::nak_invalid_rd_request};
        a.kind = kNak[aeth.value()];
      } else {
        break;  // reserved syndromes: the decoder already flags nothing more to link
      }
      if (q) {
        a.dest_qp = f.s.key.dest_qp;
        a.expected_psn = q->expected;
        // The responder expects PSN `psn`: everything before it is acknowledged (IBA 9.7.5.2.2).
        complete_upto((psn - 1) & kPsnMask, false);
        if (a.kind == AnomalyKind::nak_psn_seq_error) {
          for (auto& g : q->gaps)
            if (psn_diff(psn, g.first) >= 0 && psn_diff(g.last, psn) >= 0) {
              a.relate(g.frame);
              out.nak_gap_frame = g.frame;
              g.nak_frame = frame;
              if (g.anomaly < log_.items().size()) log_.items()[g.anomaly].relate(frame);
              break;
            }
        } else {
          for (const auto& r : q->pending)
            if (psn_diff(psn, r.first) >= 0 && psn_diff(r.last, psn) >= 0) {
              a.relate(r.frame);
              out.request_frame = r.frame;
              break;
            }
        }
        q->nak_frame = frame;
        q->nak_ts = ts;
        q->nak_psn = psn;
      }
      add_anomaly(a, &f, &out);
      break;
    }
    case OpKind::read_response_first:
    case OpKind::read_response_middle:
    case OpKind::read_response_last:
    case OpKind::read_response_only: {
      const bool starts = info.kind == OpKind::read_response_first || info.kind == OpKind::read_response_only;
      if (!starts && f.in_read_response) {
        const std::int32_t d = psn_diff(psn, f.resp_expected);
        if (d > 0) {
          record_gap(f, frame, ts, psn, f.resp_expected, static_cast<std::uint32_t>(d), out, false);
        } else if (d < 0) {
          const bool resent_request = q && q->resending;
          Anomaly a{resent_request ? AnomalyKind::retransmission : AnomalyKind::psn_duplicate};
          if (resent_request) { ++s.retransmissions; out.retransmission = true; }
          else { ++s.duplicates; out.duplicate = true; }
          a.frame = frame;
          a.psn = psn;
          a.expected_psn = f.resp_expected;
          if (!resent_request) add_anomaly(a, &f, &out);
        }
        out.expected_psn = f.resp_expected;
      }
      f.in_read_response = !(info.kind == OpKind::read_response_last || info.kind == OpKind::read_response_only);
      if (!f.in_read_response && q && q->spur_open && psn_diff(psn, q->spur_psn) >= 0) ++q->spur_acks;
      f.resp_expected = (psn + 1) & kPsnMask;
      if (!q) break;
      // A READ sent while no PMTU was known holds one PSN so far; its response
      // packets, following on from it in order, show how many it occupies.
      if (!starts && q->read_span_unknown && !q->pending.empty()) {
        PendingRequest& r = q->pending[q->pending.size() - 1];
        const std::uint32_t most = std::max<std::uint32_t>((r.read_len + 255) / 256, 1);
        if (r.op == OpClass::read && r.first == q->read_psn && ((r.last + 1) & kPsnMask) == psn &&
            static_cast<std::uint32_t>(psn_diff(psn, r.first)) < most)
          r.last = psn;
      }
      // Which READ is this data for?
      for (auto it = q->pending.begin(); it != q->pending.end(); ++it) {
        if (it->op != OpClass::read || psn_diff(psn, it->first) < 0 || psn_diff(it->last, psn) < 0) continue;
        out.request_frame = it->frame;
        if (!f.in_read_response) {
          const double us = (ts - it->ts) * 1e6;
          out.latency_us = us;
          q->s.latency[static_cast<std::size_t>(OpClass::read)].add(us);
          link_forward(it->frame, frame, us);
          const std::uint32_t span = static_cast<std::uint32_t>(psn_diff(psn, it->first)) + 1;
          if (span > 1 && it->read_len && !q->s.pmtu_from_cm && !q->s.pmtu) learn_pmtu(*q, (it->read_len + span - 1) / span);
          // Data for a READ also acknowledges every request before it (IBA 9.7.5.1.3).
          const std::uint32_t last = it->last;
          q->pending.erase(q->pending.begin(), it + 1);
          complete_upto(last, false);
        }
        break;
      }
      break;
    }
    case OpKind::atomic_acknowledge: {
      ++s.acks;
      if (!q) break;
      if (q->spur_open && psn == q->spur_psn) ++q->spur_acks;
      if (q->spur_open && psn_diff(psn, q->spur_psn) > 0) spurious_verdict(*q, psn_diff(psn, q->spur_psn) < kRestartJump);
      for (auto it = q->pending.begin(); it != q->pending.end(); ++it) {
        if (it->first != psn) continue;
        const double us = (ts - it->ts) * 1e6;
        out.request_frame = it->frame;
        out.latency_us = us;
        q->s.latency[static_cast<std::size_t>(OpClass::atomic)].add(us);
        link_forward(it->frame, frame, us);
        q->pending.erase(it);
        break;
      }
      complete_upto(psn, false);
      break;
    }
    default:
      break;
  }
}

// UD and UC (IBA 9.8): no acknowledgements and no retransmission, so only gaps,
// duplicates and late arrivals. UC also has the message structure.
void TransportAnalyzer::unreliable(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out) {
  FlowSummary& s = f.s;
  const std::uint32_t psn = p.ib.bth.psn;
  const OpcodeInfo& info = opcode_info(p.ib.bth.opcode);
  if (info.full_mtu_payload()) learn_pmtu(f, p.payload_len);
  const std::int32_t d = f.started ? psn_diff(psn, f.expected) : 0;
  if (!f.started || d > kRestartJump || d < -kRestartJump) {
    f.started = true;
    f.gaps.clear();
  } else if (d > 0) {
    record_gap(f, frame, ts, psn, f.expected, static_cast<std::uint32_t>(d), out, true);
  } else if (d < 0) {
    bool late = false;
    for (auto it = f.gaps.begin(); it != f.gaps.end(); ++it)
      if (psn_diff(psn, it->first) >= 0 && psn_diff(it->last, psn) >= 0) late = true;
    Anomaly a{late ? AnomalyKind::psn_out_of_order : AnomalyKind::psn_duplicate};
    if (late) { ++s.out_of_order; out.out_of_order = true; }
    else { ++s.duplicates; out.duplicate = true; }
    a.frame = frame;
    a.psn = psn;
    a.expected_psn = f.expected;
    add_anomaly(a, &f, &out);
    return;
  }
  out.expected_psn = f.started ? static_cast<std::int64_t>(f.expected) : -1;
  f.expected = (psn + 1) & kPsnMask;
}

// CM REQ/REP pair the two QPs of a connection and give both starting PSNs (IBA 12.6, 12.7.2/12.7.8).
void TransportAnalyzer::cm_message(const DecodedPacket& p, std::uint64_t frame) {
  const CmMessage& cm = *p.cm;
  FlowKey ends;
  if (!endpoint_addresses(p, ends)) return;
  if (cm.type == CmMessageType::req) {
    if (cm_reqs_.size() > 65536) cm_reqs_.clear();
    cm_reqs_[cm.local_comm_id] = CmSide{ends, cm.local_qpn, cm.starting_psn, cm.path_mtu};
    if (track_cm_ids_) note_cm_id(cm_req_ids_, cm.local_comm_id);
    return;
  }
  if (cm.type != CmMessageType::rep) return;
  auto it = cm_reqs_.find(cm.remote_comm_id);
  if (it == cm_reqs_.end()) {
    if (track_cm_ids_) note_cm_id(cm_unmatched_reps_, cm.remote_comm_id);
    return;
  }
  const CmSide req = it->second;
  cm_reqs_.erase(it);
  // REQ sender A (QPN qa) and REP sender B (QPN qb); flow ab is A's packets to qb.
  auto make = [&](bool a_to_b) -> Flow& {
    FlowKey k = req.from;
    k.transport = p.transport;
    if (!a_to_b) std::swap(k.src, k.dst);
    k.dest_qp = a_to_b ? cm.local_qpn : req.qpn;
    k.src_qp = 0;
    const std::uint32_t found = by_key_.find(k);
    return found != FlowIndex::kNone ? *slots_[found] : create_flow(k, TransportService::rc, frame, 0);
  };
  Flow& ab = make(true);
  Flow& ba = make(false);
  auto start = [&](Flow& f, std::uint32_t psn) {
    if (f.spur_open) spurious_verdict(f, false);
    f.started = true;
    f.expected = f.high_next = psn;
    f.resending = false;
    f.gaps.clear();
    f.pending.clear();
    f.msg = Flow::Msg::none;
    f.read_span_unknown = false;
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

void TransportAnalyzer::retire(std::uint32_t slot) {
  Flow& f = *slots_[slot];
  if (f.spur_open) spurious_verdict(f, false);
  if (summaries_.size() < kMaxRetiredFlows) summaries_.push_back(f.s);
  else ++evicted_;
  by_key_.erase(f.s.key);
  if (auto hp = by_host_pair_.find(f.host_pair); hp != by_host_pair_.end()) {
    std::erase(hp->second, slot);
    if (hp->second.empty()) by_host_pair_.erase(hp);
  }
  if (auto ps = paths_.find(f.path); ps != paths_.end() && --ps->second.flows == 0) paths_.erase(ps);
  slots_[slot].reset();
  free_slots_.push_back(slot);
}

void TransportAnalyzer::retire_idle(double now) {
  if (now == std::numeric_limits<double>::infinity()) {
    // Over the live-flow cap: retire the least recently active eighth.
    std::vector<std::pair<double, std::uint32_t>> by_age;
    for (auto& sl : slots_)
      if (sl) by_age.emplace_back(sl->s.last_ts, sl->slot);
    const std::size_t n = std::max<std::size_t>(by_age.size() / 8, 1);
    std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(n - 1), by_age.end());
    for (std::size_t i = 0; i < n; ++i) retire(by_age[i].second);
    return;
  }
  for (auto& sl : slots_)
    if (sl && now - sl->s.last_ts > kIdleRetireSeconds && sl->pending.empty() && sl->gaps.empty()) retire(sl->slot);
}

void TransportAnalyzer::spurious_verdict(Flow& f, bool conclusive) {
  f.spur_open = false;
  if (!conclusive) return;  // the capture ended before the answers could come: no verdict
  if (f.spur_acks >= f.spur_copies) return;  // every copy was answered: nothing was lost
  // An answer went missing before the capture point: the resend recovered a loss.
  FlowSummary& s = f.s;
  const std::uint64_t resent = f.spur_copies - 1;
  s.spurious_retransmissions -= std::min<std::uint64_t>(s.spurious_retransmissions, resent);
  s.retransmissions += resent;
  ++s.retransmission_episodes;
  ++s.timeout_retransmissions;
  Anomaly a{AnomalyKind::retransmission};
  a.frame = f.spur_frame;
  a.psn = f.spur_psn;
  a.count = static_cast<std::uint32_t>(resent);
  a.expected_psn = -2;  // marks "the ACK was lost" for the explanation
  add_anomaly(a, &f, nullptr);
}

void TransportAnalyzer::finish() {
  for (auto& sl : slots_)
    if (sl && sl->spur_open) spurious_verdict(*sl, false);
  for (auto& sl : slots_)
    if (sl) {
      if (summaries_.size() < kMaxRetiredFlows) summaries_.push_back(sl->s);
      else ++evicted_;
    }
  slots_.clear();
  free_slots_.clear();
  by_host_pair_.clear();
  paths_.clear();
  by_key_.clear();
  std::sort(summaries_.begin(), summaries_.end(), [](const FlowSummary& a, const FlowSummary& b) { return a.index < b.index; });
}

}  // namespace rdmadiag::decode
