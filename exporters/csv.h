// CSV tables (RFC 4180: comma separated, CRLF-free "\n" lines, fields quoted
// when they hold a comma, quote or newline) with a header row, for
// spreadsheets and pandas: the per-flow table and the per-packet table of
// `analyze`, and the per-size results of `perftest`. Columns: docs/exporters.md.
#pragma once
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "decode/analyzer.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

std::string csv_field(std::string_view v);
void write_csv_row(std::ostream& out, const std::vector<std::string>& fields);

// One row per flow, from the report's `flows` array.
void write_flows_csv(std::ostream& out, const Json& flows);

// Streams one row per packet (written as the packets come, like --json --packets).
class CsvPacketWriter {
 public:
  explicit CsvPacketWriter(std::ostream& out);
  void packet(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame, double ts);

 private:
  std::ostream& out_;
};

// One row per message size, from a perftest JSON report.
void write_perftest_csv(std::ostream& out, const Json& report);

}  // namespace rdmadiag::exporters
