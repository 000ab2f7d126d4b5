#include "decode/pfc_analysis.h"

#include <algorithm>

#include "decode/capture_summary.h"

namespace rdmadiag::decode {

PauseDecision classify(const PauseState& s, const PauseFrame& f) {
  PauseDecision d;
  if (f.length_ns < 0) return d;  // counted only
  // A refresh exactly at the expiry keeps the pause continuous.
  d.expired = s.paused && !s.runs_at(f.ts_ns);
  const bool paused_now = s.paused && !d.expired;
  if (f.quanta > 0) d.step = paused_now ? PauseStep::refresh : PauseStep::start;
  else d.step = paused_now ? PauseStep::resume : PauseStep::idle_xon;
  return d;
}

namespace {

void end_pause(PauseState& s, PriorityPauses& stats, double length_ns, std::size_t priority, const PfcOptions& opts,
               PauseSink& sink) {
  const double length = length_ns * 1e-9;
  ++stats.pauses;
  stats.paused_seconds += length;
  if (length > stats.longest_seconds) {
    stats.longest_seconds = length;
    stats.longest_frame = s.start_frame;
  }
  const bool storm = length > opts.storm_seconds;
  if (storm) ++stats.storms;
  sink.pause_ended(PauseEnded{priority, s.start_frame, s.start_ns, length_ns, s.frames}, storm);
  s = PauseState{};
}

}  // namespace

void apply(PauseState& s, PriorityPauses& stats, const PauseDecision& d, const PauseFrame& f, std::size_t priority,
           const PfcOptions& opts, PauseSink& sink) {
  if (stats.frames++ == 0) stats.first_frame = f.frame;
  stats.last_frame = f.frame;
  stats.quanta_sum += f.quanta;
  stats.quanta_max = std::max(stats.quanta_max, f.quanta);
  if (f.quanta == 0) ++stats.xon;
  if (d.expired) end_pause(s, stats, s.expired_length_ns(), priority, opts, sink);
  switch (d.step) {
    case PauseStep::counted:
    case PauseStep::idle_xon:
      break;
    case PauseStep::start:
      s = PauseState{true, f.ts_ns, f.ts_ns, f.length_ns, f.frame, 1};
      break;
    case PauseStep::refresh:  // the new value replaces the old (802.3 Annex 31B), shorter or longer
      s.timer_ns = f.ts_ns;
      s.timer_length_ns = f.length_ns;
      ++s.frames;
      break;
    case PauseStep::resume:
      end_pause(s, stats, static_cast<double>(f.ts_ns - s.start_ns), priority, opts, sink);
      break;
  }
}

void close_open(PauseState& s, PriorityPauses& stats, std::size_t priority, const PfcOptions& opts, PauseSink& sink) {
  if (s.paused) end_pause(s, stats, s.expired_length_ns(), priority, opts, sink);
}

// Storms of one sender to the anomaly log (when this analyzer reports them).
class PfcAnalyzer::StormLog final : public PauseSink {
 public:
  StormLog(PfcAnalyzer& a, const PfcSender& sender) : a_(a), sender_(sender) {}
  void pause_ended(const PauseEnded& p, bool storm) override {
    a_.stalls_.pause_ended(p.priority, {sender_.mac, p.start_ns, p.start_ns + static_cast<std::int64_t>(p.length_ns)});
    if (a_.intervals_.size() < kMaxIntervals)
      a_.intervals_.push_back({sender_.mac, static_cast<std::uint8_t>(p.priority), p.start_frame, p.start_ns, p.length_ns});
    else
      ++a_.intervals_not_listed_;
    if (!storm || !a_.reports_anomalies_) return;
    Anomaly an;
    an.kind = AnomalyKind::pause_storm;
    an.frame = p.start_frame;
    an.flow = UINT32_MAX;
    an.count = p.frames;
    an.duration_us = p.length_ns * 1e-3;
    an.priority = static_cast<std::int8_t>(p.priority);
    for (std::uint8_t b : sender_.mac) an.mac = an.mac << 8 | b;
    a_.log_.add(an);
  }

 private:
  PfcAnalyzer& a_;
  const PfcSender& sender_;
};

// One sender per MAC address and capture point: the same PAUSE seen at two points is two.
PfcSender* PfcAnalyzer::sender(const std::array<std::uint8_t, 6>& mac, std::uint16_t point) {
  for (PfcSender& s : senders_)
    if (s.mac == mac && s.point == point) return &s;
  if (senders_.size() >= kMaxSenders) return nullptr;
  senders_.push_back(PfcSender{});
  senders_.back().mac = mac;
  senders_.back().point = point;
  return &senders_.back();
}

namespace {
// A queue pair at its capture point (queue_pair_key is the capture's, over every point).
std::uint64_t point_qp_key(const DecodedPacket& p) {
  return queue_pair_key(p) ^ (static_cast<std::uint64_t>(p.capture_point) << 40);
}
}  // namespace

void PfcAnalyzer::add_mac_control(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns) {
  if (!p.mac_control || !p.eth) return;
  ++mac_control_frames_;
  const MacControl& m = *p.mac_control;
  if (!m.is_pause() && !m.is_pfc()) {
    ++other_opcode_frames_;
    return;
  }
  PfcSender* s = sender(p.eth->src, p.capture_point);
  if (!s) {
    ++untracked_frames_;
    return;
  }
  ++(m.is_pause() ? s->pause_frames : s->pfc_frames);
  StormLog sink(*this, *s);
  for (std::size_t n = 0; n < kPriorities; ++n) {
    if (!m.enables(n)) continue;
    const PauseFrame f{frame, ts_ns, m.quanta_for(n), opts_.quanta_ns(m.quanta_for(n))};
    PauseState& st = s->state[n];
    apply(st, s->priorities[n], classify(st, f), f, n, opts_, sink);
    if (st.paused)
      horizon_ns_[n] = std::max(horizon_ns_[n], st.timer_ns + static_cast<std::int64_t>(st.timer_length_ns) + 1);
  }
}

int PfcAnalyzer::priority_of(const DecodedPacket& p) const {
  if (p.eth && p.eth->vlan_count) return p.eth->vlans[0].pcp;  // the outer tag: the one this link carries
  if (p.ipv4) return opts_.dscp_priority[p.ipv4->dscp & 63];
  if (p.ipv6) return opts_.dscp_priority[p.ipv6->dscp() & 63];
  if (p.grh && p.transport == Transport::roce_v1) return opts_.dscp_priority[(p.grh->traffic_class >> 2) & 63];
  return -1;
}

bool PfcAnalyzer::paused_at(std::size_t n, std::int64_t ts_ns, const std::array<std::uint8_t, 6>* except,
                            std::uint16_t point) const {
  if (ts_ns > horizon_ns_[n]) return false;  // no pause of n lasts this long
  for (const PfcSender& s : senders_) {
    if (s.point != point) continue;  // another capture point's link
    if (except && s.mac == *except) continue;  // a sender's own frames are not paused by its pause
    if (s.state[n].runs_at(ts_ns)) return true;
  }
  return false;
}

// The pauses of priority n still running at ts_ns, and the gap they may explain.
void PfcAnalyzer::check_stall(const DecodedPacket& p, std::size_t n, std::int64_t ts_ns, std::uint64_t frame) {
  // Per queue pair and priority: a pause of n holds back only n's packets.
  const std::int64_t t0 = stalls_.long_gap_start(point_qp_key(p) << 3 | n, ts_ns);
  if (t0 < 0) return;
  std::vector<PausedSpan> open;
  for (const PfcSender& s : senders_) {
    const PauseState& st = s.state[n];
    if (!st.paused || s.point != p.capture_point) continue;
    const auto expiry = st.timer_ns + static_cast<std::int64_t>(st.timer_length_ns);
    open.push_back({s.mac, st.start_ns, std::min(ts_ns, expiry)});
  }
  stalls_.stall(n, t0, ts_ns, frame, p.eth ? &p.eth->src : nullptr, std::move(open));
}

void PfcAnalyzer::add_roce(const DecodedPacket& p, std::int64_t ts_ns, std::uint64_t frame) {
  const int prio = priority_of(p);
  if (prio < 0) {
    ++roce_.unmapped;
    return;
  }
  const auto n = static_cast<std::size_t>(prio);
  ++roce_.packets[n];
  if (!opts_.link_bps) return;
  if (paused_at(n, ts_ns, p.eth ? &p.eth->src : nullptr, p.capture_point)) {
    ++roce_.while_paused[n];
    paused_qps_.add(n, point_qp_key(p));
  }
  check_stall(p, n, ts_ns, frame);
}

void PausedQueuePairs::add(std::size_t n, std::uint64_t key) {
  if (keys[n].size() < kMaxPausedQps) keys[n].insert(key);
  else if (!keys[n].contains(key)) capped[n] = true;
}

// One analyzer holds min(D, kMaxPausedQps) keys of the D distinct ones, and is
// capped when D > kMaxPausedQps; a shard that capped saw more than that alone.
void PausedQueuePairs::merge(const PausedQueuePairs& o) {
  for (std::size_t n = 0; n < kPriorities; ++n) {
    keys[n].insert(o.keys[n].begin(), o.keys[n].end());
    capped[n] = capped[n] || o.capped[n] || keys[n].size() > kMaxPausedQps;
    while (keys[n].size() > kMaxPausedQps) keys[n].erase(keys[n].begin());  // only the count is reported
  }
}

void PfcAnalyzer::finish() {
  if (finished_) return;
  finished_ = true;
  log_.set_order_key(UINT64_MAX);  // after every other analysis' end-of-input entries
  for (PfcSender& s : senders_) {
    StormLog sink(*this, s);
    for (std::size_t n = 0; n < kPriorities; ++n) close_open(s.state[n], s.priorities[n], n, opts_, sink);
  }
}

void PfcAnalyzer::merge(std::span<const PfcAnalyzer* const> shards) {
  finished_ = true;
  if (shards.empty()) return;
  const PfcAnalyzer& first = *shards.front();
  senders_ = first.senders_;
  mac_control_frames_ = first.mac_control_frames_;
  other_opcode_frames_ = first.other_opcode_frames_;
  untracked_frames_ = first.untracked_frames_;
  intervals_ = first.intervals_;
  intervals_not_listed_ = first.intervals_not_listed_;
  opts_ = first.opts_;
  for (const PfcAnalyzer* s : shards) {
    for (std::size_t n = 0; n < kPriorities; ++n) {
      roce_.packets[n] += s->roce_.packets[n];
      roce_.while_paused[n] += s->roce_.while_paused[n];
    }
    roce_.unmapped += s->roce_.unmapped;
    paused_qps_.merge(s->paused_qps_);
    stalls_.merge(s->stalls_);
  }
}

}  // namespace rdmadiag::decode
