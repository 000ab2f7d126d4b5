// One analysis run over a sequence of frames, whatever their source (capture
// files for `analyze`, live interfaces for `capture`): decode, analyse, and
// write the reports the user asked for. Both commands print the same report
// for the same packets because they share this.
#pragma once
#include <array>
#include <fstream>
#include <iosfwd>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/file_reader.h"
#include "decode/analyzer.h"
#include "decode/transport_analysis.h"
#include "decode/packet.h"
#include "exporters/json_report.h"
#include "exporters/report_outputs.h"

namespace rdmadiag::cli {

struct SessionOptions {
  bool packets = false;        // one line per packet (text) / a packets array (JSON)
  std::string json_path;       // "" none, "-" standard output
  bool quiet = false;          // no text report on standard output
  decode::DecodeOptions decode;
  exporters::OutputOptions outputs;  // --jsonl, --csv, --csv-packets, --html, --metrics-file
  // frames(): load flow states ahead when the analyzer says it pays (auto), or
  // always / never (the tests compare the two: env RDMADIAG_LOOK_AHEAD).
  enum class LookAhead : std::uint8_t { automatic, always, never } look_ahead = LookAhead::automatic;
};

class AnalysisSession {
 public:
  explicit AnalysisSession(SessionOptions opts);
  ~AnalysisSession();
  // False (and error() says why) when an output cannot be opened.
  bool open();
  const std::string& error() const { return error_; }

  void begin_input(const std::string& path, std::uint32_t linktype, std::uint32_t snaplen);
  void input_failed(const std::string& path, const std::string& error);
  void frame(const capture::Record& rec);
  // `point`: the capture point that saw it (decode::DecodedPacket::capture_point).
  void frame(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point = 0);
  static constexpr std::size_t kBatchFrames = 16;
  // Up to kBatchFrames frames of one link type and point, their bytes valid
  // together (capture::FileReader::next_batch), as frame() on each in turn and
  // with the same results. With many flows they are all decoded first and the
  // flow states they need loaded together (decode::Analyzer::look_ahead), so
  // that their cache misses overlap instead of each stalling its own frame.
  void frames(std::span<const capture::Record> batch, std::uint32_t linktype, std::uint16_t point);
  // The frames frames() loaded ahead, of all it was given.
  std::uint64_t frames_looked_ahead() const { return looked_ahead_; }
  // The input just begun holds several capture points (a pcapng file's
  // interfaces): the report names them (exporters::CapturePoint).
  void capture_points(const std::vector<std::string>& names);
  void end_input(std::uint64_t records, const std::string& stop_reason);
  // A top-level member added to the JSON report (e.g. capture statistics).
  void add_report_member(const std::string& key, exporters::Json value);
  // Writes the final report(s); false (and error() says why) when one could not be written.
  bool finish();
  const exporters::ReportOutputs& outputs() const { return outputs_; }
  // After finish(), when the process exits next: the analysis' memory is left
  // to the kernel, which takes it back at once, instead of freed flow by flow
  // (with 1M connections that was ~10 % of analyze's CPU: docs/performance.md,
  // session 23). It stays reachable (a static pointer), so leak checkers do not
  // report it.
  void keep_analysis_until_exit();

  const SessionOptions& options() const { return opts_; }
  decode::Analyzer& analyzer() { return *analyzer_; }
  // analyze -j: the merged results of a sharded run (cli/parallel_analysis.h)
  // take the place of this session's analysis, which then saw no frame.
  void adopt(std::unique_ptr<decode::Analyzer> merged, std::unique_ptr<exporters::FlowTally> tally);
  // Links from request frames to their responses, found by an earlier pass over
  // the same input, so that --packets can show a request's response_frame.
  void set_forward_links(std::unordered_map<std::uint64_t, decode::TransportAnalyzer::ForwardLink> links) {
    forward_ = std::move(links);
  }
  // What later packets showed of each gap frame's gap (PSNs that came late,
  // negative), from the same earlier pass: --packets shows the final gap.
  void set_gap_revisions(std::unordered_map<std::uint64_t, std::int64_t> r) {
    gap_revisions_ = std::move(r);
    revisions_applied_ = true;
  }
  // Resends called spurious as they were read that later answers showed were
  // needed, from the same earlier pass: --packets does not call them spurious.
  void set_spurious_revisions(std::vector<decode::SpuriousRevision> r) { spurious_revisions_ = std::move(r); }
  // Packets first taken for corrupt whose direction's ICRCs proved not the
  // wire's, by frame, from the same earlier pass: every output shows their verdicts now.
  void set_replay_revisions(std::unordered_map<std::uint64_t, decode::ReplayRevision> r) { replays_ = std::move(r); }
  std::uint64_t frames() const { return frame_; }

 private:
  void merged_points_hint();  // the report member and warning when the capture looks merged
  SessionOptions opts_;
  std::string error_;
  std::ofstream json_file_;
  std::ostream* json_out_ = nullptr;
  bool text_out_ = true;
  std::unique_ptr<exporters::JsonReportWriter> json_;
  std::unique_ptr<decode::Analyzer> analyzer_;
  exporters::ReportOutputs outputs_;
  exporters::AnalyzeReport report_;
  exporters::Json extra_ = exporters::Json::object();
  std::uint32_t linktype_ = 0;
  std::uint64_t frame_ = 0;
  double first_ts_ = std::numeric_limits<double>::quiet_NaN();  // not set yet: any time sets it, even before 1970
  void decode_record(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point, decode::DecodedPacket& pkt) const;
  void analyse(const capture::Record& rec, const decode::DecodedPacket& pkt, const decode::FlowAhead* ahead = nullptr);

  decode::DecodedPacket pkt_;
  std::vector<decode::DecodedPacket> ahead_pkts_ = std::vector<decode::DecodedPacket>(kBatchFrames);
  std::array<decode::FlowAhead, kBatchFrames> ahead_{};
  std::uint64_t looked_ahead_ = 0;
  decode::PacketAnalysis pa_;  // reused: ~12 KB, not rebuilt per frame
  std::unordered_map<std::uint64_t, decode::TransportAnalyzer::ForwardLink> forward_;
  std::unordered_map<std::uint64_t, std::int64_t> gap_revisions_;
  std::vector<decode::SpuriousRevision> spurious_revisions_;
  bool revisions_applied_ = false;  // per packet, from an earlier pass
  std::unordered_map<std::uint64_t, decode::ReplayRevision> replays_;
};

}  // namespace rdmadiag::cli
