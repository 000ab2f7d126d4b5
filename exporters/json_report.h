// JSON for `analyze`: one object per packet (with --packets) and the summary.
// Schema: docs/json-schema.md (schema_version in exporters/report.h). Packets
// are written as they come, so memory does not grow with the capture.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>

#include "exporters/report.h"

namespace rdmadiag::exporters {

using Json = nlohmann::ordered_json;

// The text of `j` (indented by `indent` spaces, -1: on one line). Strings from a
// capture (an NVMe NQN) or from the command line (a file name) may hold bytes
// that are not UTF-8, which JSON cannot carry: each is written as U+FFFD, not
// refused (nlohmann's default throws, which lost the whole report).
template <typename AnyJson>
std::string json_text(const AnyJson& j, int indent = -1) {
  return j.dump(indent, ' ', false, AnyJson::error_handler_t::replace);
}

Json packet_json(const decode::DecodedPacket& p, std::uint64_t frame, double ts);
Json summary_json(const decode::CaptureSummary& s);
Json inputs_json(const std::vector<InputInfo>& inputs);

// {"schema_version", "tool"}: the first members of every analyze report.
Json report_header_json();
// The members after `packets`: inputs, summary, flows, anomalies, iwarp, then `extra`.
Json report_members_json(const AnalyzeReport& report, const Json& extra = Json::object());
// The whole report without packets, in memory (for the HTML report and --jsonl).
Json report_json(const AnalyzeReport& report, const Json& extra = Json::object());

// Streams {"schema_version":..., "tool":..., "packets":[...], "inputs":..., "summary":...}.
class JsonReportWriter {
 public:
  JsonReportWriter(std::ostream& out, bool with_packets);
  void packet(const decode::DecodedPacket& p, std::uint64_t frame, double ts);
  // The packet with what the analysis concluded about it (an `analysis` object).
  void packet(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame, double ts);
  // Writes the closing members; `extra` members (e.g. flows, anomalies) are appended as they are.
  void finish(const AnalyzeReport& report, const Json& extra = Json::object());

 private:
  std::ostream& out_;
  bool with_packets_;
  bool first_packet_ = true;
};

}  // namespace rdmadiag::exporters
