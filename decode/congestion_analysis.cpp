#include "decode/congestion_analysis.h"

#include <algorithm>
#include <vector>

#include "decode/endpoints.h"
#include "decode/ib_opcodes.h"

namespace rdmadiag::decode {

namespace {

// The median of the first n gaps: of an even count, the mean of the two middle
// ones (the upper one alone made 8 gaps of 10 us and 8 of 12 us a 12 us rate).
std::int64_t median(const std::array<std::int64_t, kCcWindow>& gaps, std::size_t n) {
  if (n == 0) return 0;
  std::array<std::int64_t, kCcWindow> v{};  // the first n copied: the others may be unwritten
  std::copy_n(gaps.begin(), n, v.begin());
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.begin() + static_cast<std::ptrdiff_t>(n));
  if (n % 2) return *mid;
  const std::int64_t lower = *std::max_element(v.begin(), mid);  // the largest of the lower half
  return lower + (*mid - lower) / 2;
}

bool slowed_gap(std::int64_t gap_ns, std::int64_t baseline_ns, const CcOptions& opts) {
  return static_cast<double>(gap_ns) >= opts.rate_cut * static_cast<double>(baseline_ns);
}

void add_response(CcFlowResult& r, std::int64_t ns) {
  r.response_min_ns = r.responses ? std::min(r.response_min_ns, ns) : ns;
  r.response_max_ns = std::max(r.response_max_ns, ns);
  r.response_sum_ns += ns;
  ++r.responses;
}

}  // namespace

int ecn_codepoint(const DecodedPacket& p) {
  if (p.ipv4) return p.ipv4->ecn;
  if (p.ipv6) return p.ipv6->ecn();
  return p.grh ? p.grh->traffic_class & 3 : 0;
}

CcDecision classify(const CcFlowState& s, const CcPacket& p, const CcOptions& opts) {
  CcDecision d;
  if (p.cnp) {
    d.mark_waiting = s.mark_ns >= 0;
    // A CNP stamped before its mark (the capture clock stepped back) still answers it, in no known time.
    d.response_ns = d.mark_waiting && p.ts_ns >= s.mark_ns ? p.ts_ns - s.mark_ns : -1;
    if (s.episode) d.joins_episode = true;
    else if (s.before_count >= kCcMinBaseline) d.opens_episode = true;
    else d.verdict = CcVerdict::unjudged;  // too few gaps before it to compare with
    return d;
  }
  if (s.last_frame == 0) return d;
  d.gap_ns = p.ts_ns - s.last_ns;
  if (!s.episode) return d;
  const CcFlowMarks& m = s.marks();  // built: a CNP opened the episode
  d.slowed_gap = slowed_gap(d.gap_ns, m.baseline_ns, opts);
  if (m.after_count + 1 == kCcWindow) {
    std::array<std::int64_t, kCcWindow> after;
    std::copy_n(m.after.begin(), m.after_count, after.begin());
    after[m.after_count] = d.gap_ns;
    d.verdict = slowed_gap(median(after, kCcWindow), m.baseline_ns, opts) ? CcVerdict::slowed : CcVerdict::kept_rate;
  }
  return d;
}

namespace {

void apply_cnp(CcFlowState& s, const CcDecision& d, const CcPacket& p) {
  CcFlowMarks& m = s.marks();
  CcFlowResult& r = m.r;
  ++r.cnps;
  if (d.response_ns >= 0) add_response(r, d.response_ns);
  if (!d.mark_waiting) ++r.cnps_without_mark;
  r.marks_answered += m.marks_waiting;
  m.marks_waiting = 0;
  s.mark_ns = -1;  // a CNP answers every mark before it
  if (d.opens_episode) {
    ++r.episodes;
    s.episode = true;
    m.episode_frame = p.frame;
    m.episode_ns = p.ts_ns;
    m.baseline_ns = median(s.before, s.before_count);
    m.reaction_ns = -1;
    m.after_count = 0;
  } else if (d.verdict == CcVerdict::unjudged) {
    ++r.episodes;
    ++r.unjudged;
  }
}

void close_episode(CcFlowState& s, CcVerdict v) {
  CcFlowMarks& m = s.marks();
  CcFlowResult& r = m.r;
  s.episode = false;
  if (v == CcVerdict::slowed) {
    ++r.slowed;
    r.reaction_sum_ns += m.reaction_ns;
    r.reaction_max_ns = std::max(r.reaction_max_ns, m.reaction_ns);
  } else if (v == CcVerdict::kept_rate) {
    if (!r.kept_rate++) r.first_kept_rate_frame = m.episode_frame;
  } else {
    ++r.unjudged;
  }
}

}  // namespace

void apply(CcFlowState& s, const CcDecision& d, const CcPacket& p) {
  if (p.cnp) return apply_cnp(s, d, p);
  ++s.packets;
  if (p.ce) {
    CcFlowMarks& m = s.marks();
    ++m.r.ce_marked;
    ++m.marks_waiting;
    if (s.mark_ns < 0) {
      s.mark_ns = p.ts_ns;
      m.mark_frame = p.frame;
    }
  }
  if (d.gap_ns >= 0) {
    s.before[s.before_pos] = d.gap_ns;
    s.before_pos = static_cast<std::uint8_t>((s.before_pos + 1) % kCcWindow);
    s.before_count = static_cast<std::uint8_t>(std::min<std::size_t>(s.before_count + 1u, kCcWindow));
    if (s.episode) {
      CcFlowMarks& m = s.marks();
      m.after[m.after_count++] = d.gap_ns;
      // The first gap of the slower rate (the verdict's threshold, checked in classify for the window).
      if (m.reaction_ns < 0 && d.slowed_gap) m.reaction_ns = p.ts_ns - m.episode_ns;
      if (d.verdict != CcVerdict::none) close_episode(s, d.verdict);
    }
  }
  s.last_ns = p.ts_ns;
  s.last_frame = p.frame;
}

CcFlowResult CcFlowState::result() const {
  CcFlowResult r = has_marks() ? marks().r : CcFlowResult{};
  r.flow = flow;
  r.first_frame = first_frame;
  r.packets = packets;
  return r;
}

void CcTotals::merge(const CcTotals& o) {
  ect_packets += o.ect_packets;
  ce_marked += o.ce_marked;
  cnps += o.cnps;
  cnps_unmatched += o.cnps_unmatched;
  flows_untracked += o.flows_untracked;
  retired_at_cap += o.retired_at_cap;
  kept_rate_flows += o.kept_rate_flows;
  responses += o.responses;
  response_sum_ns += o.response_sum_ns;
}

namespace {

FlowKey data_key(const DecodedPacket& p, bool reversed) {
  const Endpoints e = endpoints_of(p);
  FlowKey k;
  k.transport = p.transport;
  k.addr_len = e.addr_len;
  k.point = p.capture_point;
  k.src = reversed ? e.dst : e.src;
  k.dst = reversed ? e.src : e.dst;
  return k;
}

}  // namespace

// A new data flow (add() found none for `k`, whose hash is `hash`).
std::uint32_t CongestionAnalyzer::create(const FlowKey& k, std::uint64_t hash, std::uint64_t frame, std::uint32_t flow) {
  const std::uint32_t slot = flows_.emplace_hashed(
      k, hash, [](const CcFlowState& s) { return static_cast<double>(s.last_ns); },
      [this](std::uint32_t sl, CcFlowState& s) {  // only at the live-flow cap
        ++totals_.retired_at_cap;
        retire(sl, s);
      });
  CcFlowState& st = *flows_.at(slot);
  st.flow = flow;
  st.first_frame = frame;
  PairFlows& pf = by_pair_[with_qps(k)];
  ++pf.live;
  ++pf.unmatched;
  pf.unmatched_xor ^= slot;
  return slot;
}

bool CongestionAnalyzer::waiting_mark(const FirstMark& m) {
  ++cnp_probes_;
  const CcFlowState* s = flows_.at(m.slot);
  // An unanswered mark (mark_ns >= 0) means marks() is built.
  return s && s->first_frame == m.flow_first_frame && s->mark_ns >= 0 && !s->marks().qp_bound;
}

// A flow no CNP has matched yet got its first unanswered mark: it joins the
// back of its pair's queue. Stale entries are dropped first when they are most
// of the queue, so it stays within a few times the pair's live flows.
void CongestionAnalyzer::queue_first_mark(std::uint32_t slot, const CcFlowState& s) {
  PairFlows& pf = by_pair_.find(with_qps(flows_.key_of(slot)))->second;
  std::vector<FirstMark>& q = pf.marks;
  if (q.size() - pf.marks_head > 2 * pf.unmatched + 16 || pf.marks_head > q.size() / 2) {
    q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(pf.marks_head));
    pf.marks_head = 0;
    std::erase_if(q, [this](const FirstMark& m) { return !waiting_mark(m); });
  }
  q.push_back({slot, s.first_frame});
}

// The unmatched flow of the pair whose unanswered mark came first, else kNone.
std::uint32_t CongestionAnalyzer::first_marked(PairFlows& pf) {
  for (; pf.marks_head < pf.marks.size(); ++pf.marks_head)
    if (waiting_mark(pf.marks[pf.marks_head])) return pf.marks[pf.marks_head].slot;
  pf.marks.clear();
  pf.marks_head = 0;
  return decltype(flows_)::kNone;
}

// The data flow a CNP is for (see the header); kNone when it cannot be told.
// `by_mark`: found as the flow whose unanswered mark came first.
std::uint32_t CongestionAnalyzer::flow_for_cnp(const DecodedPacket& p, const FlowKey& reversed, bool& by_mark) {
  by_mark = false;
  const auto it = by_pair_.find(reversed);
  if (it == by_pair_.end()) return decltype(flows_)::kNone;
  ++cnp_probes_;
  if (const std::uint32_t slot = by_sender_.find(with_qps(reversed, p.ib.bth.dest_qp)); slot != decltype(flows_)::kNone) return slot;
  if (const std::uint32_t slot = first_marked(it->second); slot != decltype(flows_)::kNone) {
    by_mark = true;
    return slot;
  }
  return it->second.unmatched == 1 ? it->second.unmatched_xor : decltype(flows_)::kNone;
}

// A CNP to `sender_qp` matched the flow in `slot`, not bound yet: it names the
// flow's sender QP, and binds it when it answered a mark (`bind`). A QP named
// by a CNP without mark gives way to the one that binds.
void CongestionAnalyzer::matched(std::uint32_t slot, CcFlowState& s, std::uint32_t sender_qp, bool bind) {
  CcFlowMarks& m = s.marks();
  const FlowKey& key = flows_.key_of(slot);
  if (m.r.sender_qp_known && m.r.sender_qp != sender_qp) {
    const FlowKey named = with_qps(key, m.r.sender_qp);
    if (by_sender_.find(named) == slot) by_sender_.erase(named);
  }
  m.r.sender_qp_known = true;
  m.r.sender_qp = sender_qp;
  const FlowKey sender = with_qps(key, sender_qp);
  if (by_sender_.find(sender) == decltype(flows_)::kNone) by_sender_.insert(sender, slot);
  if (!bind) return;
  m.qp_bound = true;
  PairFlows& pf = by_pair_.find(with_qps(key))->second;
  --pf.unmatched;
  pf.unmatched_xor ^= slot;
}

// Writes into `f`, add()'s one returned object: a findings struct returned and
// then copied was read back 16 bytes at a time right after its 8-byte stores
// (a store-forwarding stall on every packet).
void CongestionAnalyzer::step(std::uint32_t slot, CcFlowState& s, const CcPacket& p, FrameFindings& f) {
  const CcDecision d = classify(s, p, opts_);
  if (p.cnp && d.response_ns >= 0) {
    ++totals_.responses;
    totals_.response_sum_ns += d.response_ns;
    f.cnp_response_ns = d.response_ns;
    f.cnp_mark_frame = s.marks().mark_frame;  // a mark waited: built
  }
  // The episode this packet may close (an open one has its marks() built).
  const std::uint64_t episode_frame = s.episode ? s.marks().episode_frame : 0;
  const std::int64_t baseline_ns = s.episode ? s.marks().baseline_ns : 0;
  apply(s, d, p);
  if (s.last_ns < live_ns_floor_) live_ns_floor_ = s.last_ns;
  if (d.verdict == CcVerdict::slowed || d.verdict == CcVerdict::kept_rate) {
    f.verdict = d.verdict;
    f.episode_cnp_frame = episode_frame;
  }
  if (d.verdict == CcVerdict::kept_rate) {
    Anomaly a{AnomalyKind::cc_no_reaction};
    a.frame = episode_frame;
    a.flow = s.flow;
    a.dest_qp = flows_.key_of(slot).dest_qp;
    a.duration_us = static_cast<double>(median(s.marks().after, kCcWindow)) * 1e-3;  // the gap after the CNP
    a.count = static_cast<std::uint32_t>(std::min<std::int64_t>(baseline_ns, UINT32_MAX));  // the gap before, ns
    a.relate(p.frame);
    log_.add(a);
  }
}

CongestionAnalyzer::FrameFindings CongestionAnalyzer::add(const DecodedPacket& p, std::uint64_t frame,
                                                          std::int64_t ts_ns, std::uint32_t flow, const FlowKey* keyed,
                                                          std::uint64_t keyed_hash, std::uint32_t* slot_hint) {
  FrameFindings f;
  if (!p.has_bth) return f;
  const bool cnp = opcode_info(p.ib.bth.opcode).kind == OpKind::cnp;
  const int ecn = ecn_codepoint(p);
  // Not ECN-capable and no congestion-controlled flow yet: nothing to see (per packet: cheap first).
  if (!cnp && ecn == 0 && flows_.size() == 0) return f;
  if ((keyed ? keyed->addr_len : endpoints_of(p).addr_len) == 0) return f;
  if (cnp) {
    ++totals_.cnps;
    bool by_mark = false;
    const std::uint32_t slot = flow_for_cnp(p, data_key(p, true), by_mark);
    if (slot == decltype(flows_)::kNone) {
      ++totals_.cnps_unmatched;
      return f;
    }
    CcFlowState& s = *flows_.at(slot);
    if (by_mark || !s.marks().r.sender_qp_known) matched(slot, s, p.ib.bth.dest_qp, by_mark);
    step(slot, s, CcPacket{frame, ts_ns, true, false}, f);
    return f;
  }
  // The transport analysis' key when it is this one's (not UD), else made here: no copy per packet.
  const bool reuse = keyed && keyed->src_qp == 0 && keyed->dest_qp == p.ib.bth.dest_qp;
  FlowKey made;
  if (!reuse) {
    made = data_key(p, false);
    made.dest_qp = p.ib.bth.dest_qp;
  }
  const FlowKey& k = reuse ? *keyed : made;
  if (!reuse) slot_hint = nullptr;  // the transport flow is not this one (UD)
  std::uint32_t slot = slot_hint && flows_.holds(*slot_hint, k) ? *slot_hint : decltype(flows_)::kNone;
  const std::uint64_t hash = reuse ? keyed_hash : flows_.hash_of(k);
  if (slot == decltype(flows_)::kNone) slot = flows_.find(k, hash);
  if (ecn == 0 && slot == decltype(flows_)::kNone) return f;  // not ECN-capable: no congestion control to see
  if (ecn) ++totals_.ect_packets;
  if (ecn == 3) ++totals_.ce_marked;
  if (slot == decltype(flows_)::kNone) slot = create(k, hash, frame, flow);
  if (slot_hint) *slot_hint = slot;
  CcFlowState& s = *flows_.at(slot);
  const bool first_mark = ecn == 3 && s.mark_ns < 0 && !(s.has_marks() && s.marks().qp_bound);
  step(slot, s, CcPacket{frame, ts_ns, false, ecn == 3}, f);
  if (first_mark) queue_first_mark(slot, s);
  return f;
}

// The flow's results into results_ (past kMaxResults only counted).
void CongestionAnalyzer::keep_result(std::uint32_t slot, CcFlowState& s) {
  if (s.episode) close_episode(s, CcVerdict::unjudged);  // the capture ended (or the flow idled) before the window
  if (s.has_marks() && s.marks().r.kept_rate) ++totals_.kept_rate_flows;
  if (results_.size() >= kMaxResults) {
    ++totals_.flows_untracked;
    return;
  }
  results_.push_back(s.result());
  results_.back().key = flows_.key_of(slot);
}

void CongestionAnalyzer::retire(std::uint32_t slot, CcFlowState& s) {
  keep_result(slot, s);
  const FlowKey& key = flows_.key_of(slot);
  const bool bound = s.has_marks() && s.marks().qp_bound;
  if (s.has_marks() && s.marks().r.sender_qp_known) {
    const FlowKey sender = with_qps(key, s.marks().r.sender_qp);
    if (by_sender_.find(sender) == slot) by_sender_.erase(sender);
  }
  const auto it = by_pair_.find(with_qps(key));
  if (it == by_pair_.end()) return;
  PairFlows& pf = it->second;
  if (!bound) {
    --pf.unmatched;
    pf.unmatched_xor ^= slot;
  }
  if (--pf.live == 0) by_pair_.erase(it);
}

void CongestionAnalyzer::sweep(std::int64_t now_ns) {
  // (a flow is stepped right after it is made, so every live flow's last_ns lowered the floor)
  if (now_ns <= live_ns_floor_ || now_ns - live_ns_floor_ <= kIdleRetireNs) return;
  std::int64_t floor = INT64_MAX;
  flows_.retire_if(
      [&](const CcFlowState& s) {
        const bool idle = now_ns - s.last_ns > kIdleRetireNs;
        if (!idle) floor = std::min(floor, s.last_ns);
        return idle;
      },
      [this](std::uint32_t slot, CcFlowState& s) { retire(slot, s); });
  live_ns_floor_ = floor;
}

namespace {

// Results kept at the end come in slot order, which is creation order until
// the first retirement: already sorted, then left as they are.
void order_results(std::vector<CcFlowResult>& v) {
  const auto by_first_frame = [](const CcFlowResult& a, const CcFlowResult& b) { return a.first_frame < b.first_frame; };
  if (std::is_sorted(v.begin(), v.end(), by_first_frame)) return;
  std::sort(v.begin(), v.end(), by_first_frame);
}

}  // namespace

void CongestionAnalyzer::finish() {
  if (finished_) return;
  finished_ = true;
  // Only the results: the CNP-matching indexes are dropped whole, not flow by
  // flow, and the live states stay allocated until the analyzer is destroyed
  // (as TransportAnalyzer::finish: freeing each was a walk over every cell).
  results_.reserve(std::min<std::size_t>(results_.size() + flows_.size(), kMaxResults));
  flows_.for_each([this](std::uint32_t slot, CcFlowState& s) { keep_result(slot, s); });
  by_pair_.clear();
  by_sender_.clear();
  order_results(results_);
}

void CongestionAnalyzer::merge(std::span<const CongestionAnalyzer* const> shards,
                               const std::vector<std::vector<std::uint32_t>>& flow_index) {
  finished_ = true;
  const std::vector<std::uint32_t> none;
  std::size_t total = results_.size();
  for (const CongestionAnalyzer* s : shards) total += s->results_.size();
  results_.reserve(total);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const CongestionAnalyzer& s = *shards[i];
    if (i == 0) opts_ = s.opts_;
    totals_.merge(s.totals_);
    const std::vector<std::uint32_t>& map = i < flow_index.size() ? flow_index[i] : none;
    for (CcFlowResult r : s.results_) {
      r.flow = r.flow < map.size() ? map[r.flow] : UINT32_MAX;
      results_.push_back(r);
    }
  }
  order_results(results_);
  if (results_.size() > kMaxResults) {
    totals_.flows_untracked += results_.size() - kMaxResults;
    results_.resize(kMaxResults);
  }
}

}  // namespace rdmadiag::decode
