#include "exporters/report_outputs.h"

#include <iostream>

#include "exporters/analysis_report.h"
#include "exporters/html_report.h"
#include "exporters/iwarp_json.h"
#include "exporters/metrics.h"

namespace rdmadiag::exporters {

ReportOutputs::ReportOutputs(OutputOptions o) : o_(std::move(o)) {}

bool ReportOutputs::open() {
  if (o_.tally || !o_.html_path.empty() || !o_.metrics_path.empty() || !o_.jsonl_path.empty())
    tally_ = std::make_unique<FlowTally>();
  if (!o_.csv_packets_path.empty()) {
    csv_packets_file_.open(o_.csv_packets_path);
    if (!csv_packets_file_) {
      error_ = "cannot write " + o_.csv_packets_path;
      return false;
    }
    csv_packets_ = std::make_unique<CsvPacketWriter>(csv_packets_file_);
  }
  if (!o_.jsonl_path.empty()) {
    if (o_.jsonl_path == "-") {
      jsonl_ = &std::cout;
    } else {
      jsonl_file_.open(o_.jsonl_path);
      if (!jsonl_file_) {
        error_ = "cannot write " + o_.jsonl_path;
        return false;
      }
      jsonl_ = &jsonl_file_;
    }
  }
  return true;
}

void ReportOutputs::frame(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame, double ts) {
  if (tally_) tally_->add(p, a, frame, ts);
  if (csv_packets_) csv_packets_->packet(p, a, frame, ts);
  if (jsonl_) {
    Json j = packet_json(p, frame, ts);
    if (a.analysed) j["analysis"] = analysis_json(a);
    add_iwarp_packet_json(a.iwarp, frame, j);
    *jsonl_ << json_text(j) << '\n';
  }
}

Json ReportOutputs::report_members() const {
  Json j = Json::object();
  if (tally_) {
    j["timeline"] = tally_->timeline_json();
    j["latency_histograms"] = tally_->latency_histograms_json();
  }
  return j;
}

bool ReportOutputs::finish(const AnalyzeReport& report, const Json& extra) {
  bool ok = true;
  const auto fail = [&](const std::string& what) {
    if (error_.empty()) error_ = what;
    ok = false;
  };
  if (csv_packets_) {
    csv_packets_file_.flush();
    if (!csv_packets_file_) fail("cannot write " + o_.csv_packets_path);
  }
  const bool need_whole = jsonl_ || !o_.html_path.empty() || !o_.csv_flows_path.empty();
  if (need_whole) {
    Json whole = report_json(report, extra);
    if (jsonl_) {
      *jsonl_ << json_text(whole) << '\n';
      jsonl_->flush();
      if (!*jsonl_) fail("cannot write " + o_.jsonl_path);
    }
    if (!o_.csv_flows_path.empty()) {
      std::ofstream f(o_.csv_flows_path);
      write_flows_csv(f, whole.value("flows", Json::array()));
      f.flush();
      if (!f) fail("cannot write " + o_.csv_flows_path);
    }
    if (!o_.html_path.empty()) {
      std::string err;
      const std::string html = render_html(whole, err);
      std::ofstream f(o_.html_path);
      f << html;
      f.flush();
      if (html.empty()) fail("HTML report: " + err);
      else if (!f) fail("cannot write " + o_.html_path);
    }
  }
  if (!o_.metrics_path.empty()) {
    MetricsInput in;
    in.tally = tally_.get();
    in.analyzer = report.analyzer;
    in.max_flow_series = o_.max_flow_series;
    std::string err;
    if (!write_metrics_file(o_.metrics_path, render_metrics(in), err)) fail(err);
  }
  return ok;
}

}  // namespace rdmadiag::exporters
