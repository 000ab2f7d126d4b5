#include "dissector/plugin_session.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "exporters/analysis_report.h"

namespace rdmadiag::wireshark {

PluginSession::PluginSession(const decode::DecodeOptions& options, unsigned pmtu, unsigned link_mbps)
    : options_(options) {
  decode::PfcOptions pfc;
  pfc.link_bps = static_cast<std::uint64_t>(link_mbps) * 1'000'000ULL;
  analyzer_.pfc().set_options(pfc);
  analyzer_.transport().enable_forward_links(true);
  analyzer_.transport().set_pmtu_override(pmtu >= 256 && pmtu <= 4096 ? pmtu : 0);
  analyzer_.iwarp().keep_long_heads(true);  // NVMe over iWARP: the Connect data's NQNs
  nvme_ = std::make_unique<decode::NvmeAnalyzer>();
  nvme_->set_command_sink([this](const decode::NvmeCommandResult& r) { note_nvme(r); });
}

void PluginSession::note_nvme(const decode::NvmeCommandResult& r) {
  NvmeFrameNote n{true, r.queue.qid, r.cid, r.command_frame, r.response_frame, r.latency_us, r.transport_events,
                  r.first_event_frame, std::string(r.name())};
  keep_nvme_note(r.command_frame, n);
  if (!r.response_frame) return;
  n.command = false;
  keep_nvme_note(r.response_frame, n);
}

// A note for the same capsule (role and command frame) replaces the one kept.
void PluginSession::keep_nvme_note(std::uint64_t frame, const NvmeFrameNote& n) {
  std::vector<NvmeFrameNote>& notes = nvme_frames_[frame];
  for (NvmeFrameNote& o : notes)
    if (o.command == n.command && o.command_frame == n.command_frame && o.cid == n.cid) {
      o = n;
      return;
    }
  notes.push_back(n);
}

std::span<const NvmeFrameNote> PluginSession::nvme_at(std::uint64_t frame) const {
  const auto it = nvme_frames_.find(frame);
  return it == nvme_frames_.end() ? std::span<const NvmeFrameNote>() : std::span<const NvmeFrameNote>(it->second);
}

bool PluginSession::analyse(const decode::DecodedPacket& p, std::uint64_t frame, double ts, std::int64_t ts_ns,
                            FrameRecord& r) {
  if (finished_ || frame <= last_frame_) return false;
  last_frame_ = frame;
  const std::size_t before = analyzer_.anomalies().items().size();
  analyzer_.add(p, frame, ts, analysis_, ts_ns);
  nvme_->add(p, frame, ts_ns, &analysis_);
  r = FrameRecord{};
  fill_record(analysis_, r);
  const std::size_t after = analyzer_.anomalies().items().size();
  r.first_anomaly = static_cast<std::uint32_t>(before);
  r.anomalies_logged = static_cast<std::uint8_t>(std::min<std::size_t>(after - before, 255));
  return r.worth_keeping();
}

void PluginSession::finish() {
  if (finished_) return;
  analyzer_.finish();
  nvme_->finish();
  for (const decode::NvmeCommandResult& r : nvme_->unanswered()) note_nvme(r);
  finished_ = true;
  for (const decode::FlowSummary& f : analyzer_.transport().flows())
    if (f.peer >= 0) peer_qp_[f.index] = f.peer_qp;
  for (const decode::GapRevision& r : analyzer_.anomalies().revisions()) gap_revision_[r.frame] += r.missing;
  spurious_revisions_ = analyzer_.anomalies().spurious_revisions();
  for (const decode::ReplayRevision& r : analyzer_.anomalies().replay_revisions()) replays_[r.frame] = r;
  index_anomalies();
}

// Where each listed anomaly is shown: the frame it names, whenever it was raised
// (a TCP hole, a storm, the resend of a gap: at a later frame).
void PluginSession::index_anomalies() {
  const auto& log = analyzer_.anomalies().items();
  std::vector<std::pair<std::uint64_t, std::uint32_t>> shown;
  for (std::size_t i = 0; i < log.size(); ++i) {
    const decode::Anomaly& a = log[i];
    if (a.retracted || is_crc_anomaly(a.kind)) continue;
    const bool judged_later = a.kind == decode::AnomalyKind::cc_no_reaction && a.related_count;
    shown.emplace_back(judged_later ? a.related[0] : a.frame, static_cast<std::uint32_t>(i));
  }
  std::sort(shown.begin(), shown.end());  // by frame, then in the log's order
  shown_frames_.reserve(shown.size());
  shown_anomalies_.reserve(shown.size());
  for (const auto& [frame, index] : shown) {
    shown_frames_.push_back(frame);
    shown_anomalies_.push_back(index);
  }
}

std::span<const std::uint32_t> PluginSession::anomalies_at(std::uint64_t frame) const {
  const auto first = std::lower_bound(shown_frames_.begin(), shown_frames_.end(), frame);
  const auto last = std::upper_bound(first, shown_frames_.end(), frame);
  return {shown_anomalies_.data() + (first - shown_frames_.begin()), static_cast<std::size_t>(last - first)};
}

std::uint32_t PluginSession::gap_at(std::uint64_t frame, std::uint32_t when_read) const {
  auto it = gap_revision_.find(frame);
  if (!when_read || it == gap_revision_.end()) return when_read;
  return static_cast<std::uint32_t>(std::max<std::int64_t>(0, when_read + it->second));
}

bool PluginSession::spurious_at(std::uint32_t flow, std::uint64_t frame, bool when_read) const {
  if (!when_read) return false;
  return std::none_of(spurious_revisions_.begin(), spurious_revisions_.end(),
                      [&](const decode::SpuriousRevision& r) { return r.covers(flow, frame); });
}

const decode::ReplayRevision* PluginSession::replay_at(std::uint64_t frame) const {
  const auto it = replays_.find(frame);
  return it == replays_.end() ? nullptr : &it->second;
}

std::optional<std::uint32_t> PluginSession::peer_qp(std::uint32_t flow) const {
  if (!finished_) return std::nullopt;
  auto it = peer_qp_.find(flow);
  if (it == peer_qp_.end()) return std::nullopt;
  return it->second;
}

std::span<const decode::Anomaly> PluginSession::anomalies_of(const FrameRecord& r) const {
  const auto& log = analyzer_.anomalies().items();
  const std::size_t first = std::min<std::size_t>(r.first_anomaly, log.size());
  const std::size_t n = std::min<std::size_t>(r.anomalies_logged, log.size() - first);
  return std::span<const decode::Anomaly>(log.data() + first, n);
}

std::string PluginSession::anomaly_text(const decode::Anomaly& a) const {
  return exporters::explain(a, analyzer_);
}

const decode::TransportAnalyzer::ForwardLink* PluginSession::response_of(std::uint64_t frame) const {
  const auto& links = analyzer_.transport().forward_links();
  auto it = links.find(frame);
  return it == links.end() ? nullptr : &it->second;
}

bool is_crc_anomaly(decode::AnomalyKind k) {
  return k == decode::AnomalyKind::icrc_bad || k == decode::AnomalyKind::vcrc_bad ||
         k == decode::AnomalyKind::mpa_crc_bad;
}

}  // namespace rdmadiag::wireshark
