#include "exporters/csv.h"

#include <cstdio>

#include "decode/ib_opcodes.h"

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

std::string csv_field(std::string_view v) {
  if (v.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

void write_csv_row(std::ostream& out, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) out << (i ? "," : "") << csv_field(fields[i]);
  out << '\n';
}

namespace {

// A JSON value as a CSV cell: strings bare, numbers as JSON writes them, absent empty.
std::string cell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  return json_text(v);
}

std::string at(const Json& obj, const char* pointer) {
  const Json::json_pointer p(pointer);
  return obj.contains(p) ? cell(obj.at(p)) : "";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void write_flows_csv(std::ostream& out, const Json& flows) {
  struct Column {
    const char* name;
    const char* pointer;
  };
  static const Column kColumns[] = {
      {"flow", "/flow"}, {"transport", "/transport"}, {"src", "/src"}, {"dst", "/dst"}, {"dest_qp", "/dest_qp"},
      {"src_qp", "/src_qp"}, {"service", "/transport_service"}, {"peer_flow", "/peer_flow"}, {"peer_qp", "/peer_qp"},
      {"packets", "/packets"}, {"bytes", "/bytes"}, {"payload_bytes", "/payload_bytes"}, {"requests", "/requests"},
      {"responses", "/responses"}, {"first_frame", "/first_frame"}, {"last_frame", "/last_frame"},
      {"duration_s", "/duration_s"}, {"pmtu", "/pmtu"}, {"psn_gaps", "/psn/gaps"}, {"psn_missing", "/psn/missing"},
      {"psn_gaps_recovered", "/psn/gaps_recovered"}, {"duplicates", "/psn/duplicates"},
      {"out_of_order", "/psn/out_of_order"}, {"retransmissions", "/psn/retransmissions"},
      {"retransmission_episodes", "/psn/retransmission_episodes"},
      {"timeout_retransmissions", "/psn/timeout_retransmissions"}, {"acks", "/acks"},
      {"nak_psn_seq_error", "/naks/psn_seq_error"}, {"nak_invalid_request", "/naks/invalid_request"},
      {"nak_remote_access", "/naks/remote_access"}, {"nak_remote_op", "/naks/remote_op"}, {"rnr_naks", "/naks/rnr"},
      {"write_latency_p50_us", "/latency_us/write/p50"}, {"write_latency_p99_us", "/latency_us/write/p99"},
      {"read_latency_p50_us", "/latency_us/read/p50"}, {"read_latency_p99_us", "/latency_us/read/p99"},
      {"send_latency_p50_us", "/latency_us/send/p50"}, {"send_latency_p99_us", "/latency_us/send/p99"},
      {"ecn_ce", "/ecn_ce"}, {"cnp", "/cnp"}, {"icrc_bad", "/icrc_bad"}};
  std::vector<std::string> row;
  for (const Column& c : kColumns) row.push_back(c.name);
  write_csv_row(out, row);
  for (const Json& f : flows) {
    row.clear();
    for (const Column& c : kColumns) row.push_back(at(f, c.pointer));
    write_csv_row(out, row);
  }
}

CsvPacketWriter::CsvPacketWriter(std::ostream& out) : out_(out) {
  write_csv_row(out_, {"frame", "ts", "len", "transport", "src", "dst", "opcode", "opcode_name", "dest_qp", "psn",
                       "payload_len", "icrc", "aeth", "flow", "gap", "duplicate", "out_of_order", "retransmission",
                       "request_frame", "response_frame", "latency_us", "ecn_ce", "cnp"});
}

void CsvPacketWriter::packet(const DecodedPacket& p, const PacketAnalysis& a, std::uint64_t frame, double ts) {
  char ts_text[32];
  std::snprintf(ts_text, sizeof ts_text, "%.9f", ts);
  std::vector<std::string> row = {std::to_string(frame), ts_text, std::to_string(p.wirelen), std::string(to_string(p.transport)),
                                  src_address(p), dst_address(p)};
  if (p.has_bth) {
    row.push_back(std::to_string(p.ib.bth.opcode));
    row.push_back(std::string(opcode_info(p.ib.bth.opcode).name));
    row.push_back(std::to_string(p.ib.bth.dest_qp));
    row.push_back(std::to_string(p.ib.bth.psn));
    row.push_back(std::to_string(p.payload_len));
  } else {
    row.insert(row.end(), 5, "");
  }
  row.push_back(p.icrc == CrcStatus::not_present ? "" : std::string(to_string(p.icrc)));
  row.push_back(p.has_bth && p.ib.has(kAeth) ? std::string(p.ib.aeth.kind_name()) : "");
  if (a.analysed) {
    row.push_back(a.flow == UINT32_MAX ? "" : std::to_string(a.flow));
    row.push_back(std::to_string(a.gap));
    row.push_back(a.duplicate ? "1" : "0");
    row.push_back(a.out_of_order ? "1" : "0");
    row.push_back(a.retransmission ? "1" : "0");
    row.push_back(a.request_frame ? std::to_string(a.request_frame) : "");
    row.push_back(a.response_frame ? std::to_string(a.response_frame) : "");
    row.push_back(a.latency_us >= 0 ? num(a.latency_us) : "");
    row.push_back(a.ecn_ce ? "1" : "0");
    row.push_back(a.cnp ? "1" : "0");
  } else {
    row.insert(row.end(), 10, "");
  }
  write_csv_row(out_, row);
}

void write_perftest_csv(std::ostream& out, const Json& report) {
  const std::string test = at(report, "/test_info/test");
  write_csv_row(out, {"test", "size", "iterations", "t_min_us", "t_typical_us", "t_avg_us", "t_max_us", "t_stdev_us",
                      "p99_us", "p99_9_us", "bw_peak_mb_s", "bw_avg_mb_s", "msg_rate_mpps"});
  if (!report.contains("results")) return;
  for (const Json& r : report["results"]) {
    write_csv_row(out, {test, at(r, "/size"), at(r, "/iterations"), at(r, "/statistics/t_min"),
                        at(r, "/statistics/t_typical"), at(r, "/statistics/t_avg"), at(r, "/statistics/t_max"),
                        at(r, "/statistics/t_stdev"), at(r, "/statistics/percentiles/p99"),
                        at(r, "/statistics/percentiles/p99.9"), at(r, "/bandwidth/bw_peak"), at(r, "/bandwidth/bw_avg"),
                        at(r, "/bandwidth/msg_rate_mpps")});
  }
}

}  // namespace rdmadiag::exporters
