#include "cli/analysis_session.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "exporters/text_report.h"

namespace rdmadiag::cli {

AnalysisSession::AnalysisSession(SessionOptions opts)
    : opts_(std::move(opts)), analyzer_(std::make_unique<decode::Analyzer>()), outputs_([this] {
        exporters::OutputOptions o = opts_.outputs;
        o.tally = o.tally || !opts_.json_path.empty();  // the JSON report carries the timeline and histograms
        return o;
      }()) {}
AnalysisSession::~AnalysisSession() = default;

void AnalysisSession::keep_analysis_until_exit() {
  static decode::Analyzer* kept = nullptr;
  delete kept;  // (only if called twice in one process: nothing to keep then)
  kept = analyzer_.release();
}

bool AnalysisSession::open() {
  if (!opts_.json_path.empty()) {
    if (opts_.json_path == "-") {
      json_out_ = &std::cout;
    } else {
      json_file_.open(opts_.json_path);
      if (!json_file_) {
        error_ = "cannot write " + opts_.json_path;
        return false;
      }
      json_out_ = &json_file_;
    }
    json_ = std::make_unique<exporters::JsonReportWriter>(*json_out_, opts_.packets);
  }
  text_out_ = json_out_ != &std::cout && opts_.outputs.jsonl_path != "-" && !opts_.quiet;
  if (!outputs_.open()) {
    error_ = outputs_.error();
    return false;
  }
  return true;
}

void AnalysisSession::begin_input(const std::string& path, std::uint32_t linktype, std::uint32_t snaplen) {
  exporters::InputInfo info;
  info.path = path;
  info.linktype = linktype;
  info.snaplen = snaplen;
  report_.inputs.push_back(info);
  linktype_ = linktype;
}

// Interface i of every input is point i + 1: a capture cut into several files
// (ring buffer) keeps its interfaces in each.
void AnalysisSession::capture_points(const std::vector<std::string>& names) {
  auto& points = report_.capture_points;
  for (std::size_t i = points.size(); i < names.size() && i < 0xffff; ++i)
    points.push_back({static_cast<std::uint32_t>(i), names[i]});
}

void AnalysisSession::input_failed(const std::string& path, const std::string& error) {
  exporters::InputInfo info;
  info.path = path;
  info.error = error;
  report_.inputs.push_back(info);
}

void AnalysisSession::frame(const capture::Record& rec) { frame(rec, linktype_); }

// Live capture interleaves interfaces, each with its own link type.
void AnalysisSession::frame(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point) {
  decode_record(rec, linktype, point, pkt_);
  analyse(rec, pkt_);
}

void AnalysisSession::decode_record(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point,
                                    decode::DecodedPacket& pkt) const {
  decode::decode_frame(linktype, rec.data, rec.wirelen, opts_.decode, pkt);
  decode::take_reader_point(pkt, point);
}

void AnalysisSession::frames(std::span<const capture::Record> batch, std::uint32_t linktype, std::uint16_t point) {
  const std::size_t n = std::min(batch.size(), kBatchFrames);
  using LookAhead = SessionOptions::LookAhead;
  if (opts_.look_ahead == LookAhead::never || (opts_.look_ahead == LookAhead::automatic && !analyzer_->looks_ahead())) {
    for (std::size_t i = 0; i < n; ++i) frame(batch[i], linktype, point);
    return;
  }
  looked_ahead_ += n;
  for (std::size_t i = 0; i < n; ++i) {
    decode_record(batch[i], linktype, point, ahead_pkts_[i]);
    analyzer_->look_ahead(ahead_pkts_[i], ahead_[i], 0);
  }
  // Each step's loads need time to arrive (~0.1-0.2 us here) before the next
  // step reads them: the decode pass covers step 0's; the last step runs two
  // frames before each frame's analysis.
  for (std::size_t i = 0; i < n; ++i) analyzer_->look_ahead(ahead_pkts_[i], ahead_[i], 1);
  constexpr std::size_t kLead = 2;
  for (std::size_t i = 0; i < std::min(n, kLead); ++i) analyzer_->look_ahead(ahead_pkts_[i], ahead_[i], 2);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kLead < n) analyzer_->look_ahead(ahead_pkts_[i + kLead], ahead_[i + kLead], 2);
    analyse(batch[i], ahead_pkts_[i], &ahead_[i]);
  }
}

// The frame's analysis and outputs, `pkt` its decode.
void AnalysisSession::analyse(const capture::Record& rec, const decode::DecodedPacket& pkt, const decode::FlowAhead* ahead) {
  ++frame_;
  const double ts = static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9;
  if (std::isnan(first_ts_)) first_ts_ = ts;
  decode::PacketAnalysis& pa = pa_;
  analyzer_->add(pkt, frame_, ts, pa, rec.ts_ns(), ahead);
  analyzer_->copies().add(rec.data, rec.ts_ns());
  if (!replays_.empty())
    if (auto it = replays_.find(frame_); it != replays_.end()) decode::apply_replay(it->second, pa);
  if (!forward_.empty()) {
    auto it = forward_.find(frame_);
    if (it != forward_.end()) {
      pa.response_frame = it->second.response_frame;
      if (pa.latency_us < 0) pa.latency_us = it->second.latency_us;
    }
  }
  // With an earlier pass, every output shows the gap as the whole capture tells
  // it; otherwise the tallies take the revisions at the end (finish).
  if (pa.gap && !gap_revisions_.empty()) {
    auto it = gap_revisions_.find(frame_);
    if (it != gap_revisions_.end()) pa.gap = static_cast<std::uint32_t>(std::max<std::int64_t>(0, pa.gap + it->second));
  }
  if (pa.spurious_retransmission)
    for (const decode::SpuriousRevision& r : spurious_revisions_)
      if (r.covers(pa.flow, frame_)) pa.spurious_retransmission = false;
  if (json_) json_->packet(pkt, pa, frame_, ts);
  if (outputs_.active()) outputs_.frame(pkt, pa, frame_, ts);
  if (opts_.packets && text_out_) std::cout << exporters::packet_line(pkt, pa, frame_, ts - first_ts_) << '\n';
}

void AnalysisSession::adopt(std::unique_ptr<decode::Analyzer> merged, std::unique_ptr<exporters::FlowTally> tally) {
  analyzer_ = std::move(merged);
  if (tally && outputs_.tally()) *outputs_.tally() = std::move(*tally);
}

void AnalysisSession::add_report_member(const std::string& key, exporters::Json value) { extra_[key] = std::move(value); }

void AnalysisSession::end_input(std::uint64_t records, const std::string& stop_reason) {
  if (report_.inputs.empty()) return;
  report_.inputs.back().records = records;
  report_.inputs.back().stop_reason = stop_reason;
}

// Nearly every packet twice, the same bytes: two points on one interface.
void AnalysisSession::merged_points_hint() {
  const decode::CopyDetector& c = analyzer_->copies();
  if (!c.looks_merged()) return;
  const std::string hint = "this capture looks like two capture points merged onto one interface (" +
                           std::to_string(c.copies()) + " of " + std::to_string(c.frames()) +
                           " packets looked at are exact copies of a packet seen within 1 ms); separate them "
                           "(mergecap -I none) or capture at one point";
  std::cerr << "rdmadiag: warning: " << hint << '\n';
  extra_["merged_points"] = exporters::Json{{"exact_copies", c.copies()}, {"frames", c.frames()}, {"hint", hint}};
}

bool AnalysisSession::finish() {
  analyzer_->finish();
  merged_points_hint();
  if (!revisions_applied_ && outputs_.tally()) {
    outputs_.tally()->revise(analyzer_->anomalies().revisions());
    outputs_.tally()->revise(analyzer_->anomalies().replay_revisions());
  }
  report_.summary = &analyzer_->summary();
  report_.analyzer = analyzer_.get();
  if (report_.capture_points.empty())  // `tcpdump -i any`: the interfaces its records name
    for (std::uint32_t ifindex : analyzer_->summary().sll2_interfaces()) report_.capture_points.push_back({ifindex, ""});
  const exporters::Json tallied = outputs_.report_members();
  for (auto it = tallied.begin(); it != tallied.end(); ++it) extra_[it.key()] = it.value();
  if (json_) json_->finish(report_, extra_);
  bool outputs_ok = outputs_.finish(report_, extra_);
  if (!outputs_ok) error_ = outputs_.error();
  if (json_out_ == &json_file_) {  // (standard output is checked as the process exits: cli/main.cpp)
    json_file_.close();
    if (!json_file_ && outputs_ok) {
      error_ = "cannot write " + opts_.json_path;
      outputs_ok = false;
    }
  }
  if (text_out_) {
    if (opts_.packets) std::cout << '\n';
    exporters::write_text_summary(std::cout, report_);
  }
  std::cout.flush();
  return outputs_ok;
}

}  // namespace rdmadiag::cli
