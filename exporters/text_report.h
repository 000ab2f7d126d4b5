// The human-readable forms of an analyze run: one line per packet (like tshark /
// tcpdump) and the summary a person reads at a glance.
#pragma once
#include <ostream>
#include <string>

#include "decode/analyzer.h"
#include "exporters/report.h"

namespace rdmadiag::exporters {

std::string packet_line(const decode::DecodedPacket& p, std::uint64_t frame, double ts_relative);
// The same line followed by what the analysis concluded ([gap 2] [retransmission] ...).
std::string packet_line(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame,
                        double ts_relative);
void write_text_summary(std::ostream& out, const AnalyzeReport& report);

}  // namespace rdmadiag::exporters
