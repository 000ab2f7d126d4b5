// The human-readable forms of an analyze run: one line per packet (like tshark /
// tcpdump) and the summary a person reads at a glance.
#pragma once
#include <ostream>
#include <string>

#include "exporters/report.h"

namespace rdmadiag::exporters {

std::string packet_line(const decode::DecodedPacket& p, std::uint64_t frame, double ts_relative);
void write_text_summary(std::ostream& out, const AnalyzeReport& report);

}  // namespace rdmadiag::exporters
