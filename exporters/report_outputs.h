// The outputs of an analysis run beyond the text and the streamed --json:
// --jsonl (one packet object per line, then the report object), --csv (per
// flow), --csv-packets, --html and --metrics-file. The analysis session feeds
// every frame here and calls finish() once with the final report; this class
// also keeps the FlowTally that adds `timeline` and `latency_histograms` to the
// JSON report and the live counters for the metrics endpoint.
#pragma once
#include <fstream>
#include <memory>
#include <string>

#include "exporters/csv.h"
#include "exporters/flow_tally.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

struct OutputOptions {
  std::string jsonl_path;        // one object per line ("-" standard output)
  std::string csv_flows_path;    // per-flow table
  std::string csv_packets_path;  // per-packet table (streamed)
  std::string html_path;
  std::string metrics_path;      // Prometheus textfile
  std::size_t max_flow_series = 100;
  bool tally = false;            // keep the timeline/histograms even without the outputs above (--json, --metrics-listen)
};

class ReportOutputs {
 public:
  explicit ReportOutputs(OutputOptions o);
  // False and error() when an output cannot be opened.
  bool open();
  const std::string& error() const { return error_; }
  bool active() const { return tally_ != nullptr || csv_packets_ || jsonl_; }
  void frame(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame, double ts);
  // Members to add to the JSON report (timeline, latency_histograms); empty when not tallied.
  Json report_members() const;
  // Writes the end-of-run outputs. False and error() when one could not be written.
  bool finish(const AnalyzeReport& report, const Json& extra);
  const FlowTally* tally() const { return tally_.get(); }
  FlowTally* tally() { return tally_.get(); }  // e.g. to install the merged tally of analyze -j
  std::size_t max_flow_series() const { return o_.max_flow_series; }

 private:
  OutputOptions o_;
  std::string error_;
  std::unique_ptr<FlowTally> tally_;
  std::ofstream csv_packets_file_, jsonl_file_;
  std::unique_ptr<CsvPacketWriter> csv_packets_;
  std::ostream* jsonl_ = nullptr;
};

}  // namespace rdmadiag::exporters
