// What an analyze run produced, in the shape every exporter reads (JSON, text).
// The decode/analysis library fills the summary; exporters only format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "decode/analyzer.h"
#include "decode/capture_summary.h"

namespace rdmadiag::exporters {

inline constexpr const char* kAnalyzeSchemaVersion = "1.9";  // 1.1: timeline, latency_histograms; 1.2: pfc; 1.3: congestion; 1.4: flows_retired_at_cap; 1.5: udp_dst_port; 1.6: congestion.flows_retired_at_cap; 1.7: icrc_not_wire; 1.8: capture_points, capture_point on flows and anomalies; 1.9: merged_points

struct InputInfo {
  std::string path;
  std::uint32_t linktype = 0;
  std::uint32_t snaplen = 0;
  std::uint64_t records = 0;
  std::string error;        // could not be opened / not a capture
  std::string stop_reason;  // read up to damage
};

// A capture point of an input that holds several (a pcapng file's interfaces);
// flows and anomalies name it by its interface index (decode::DecodedPacket::capture_point - 1).
struct CapturePoint {
  std::uint32_t interface = 0;
  std::string name;  // if_name, "" when absent
};

struct AnalyzeReport {
  std::vector<InputInfo> inputs;
  std::vector<CapturePoint> capture_points;  // empty: every input has one
  const decode::CaptureSummary* summary = nullptr;
  const decode::Analyzer* analyzer = nullptr;  // flows and anomalies, when the analysis ran
};

// Source and destination addresses as people write them (IPv4, IPv6, GID, LID).
std::string src_address(const decode::DecodedPacket& p);
std::string dst_address(const decode::DecodedPacket& p);
std::string hex(std::uint64_t v, int width = 0);

}  // namespace rdmadiag::exporters
