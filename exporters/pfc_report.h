// Reports of the pause analysis (decode/pfc_analysis.h): the top-level `pfc`
// JSON object (docs/json-schema.md, docs/pfc.md), the text section, and the
// one-line explanation of a pause storm.
#pragma once
#include <ostream>
#include <string>

#include "decode/anomaly.h"
#include "decode/pfc_analysis.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

// `origin_s`: the capture's first frame time (the timeline's times are from it).
Json pfc_json(const decode::PfcAnalyzer& a, double origin_s);
// "PFC from 02:00:00:00:00:0a p3=65535 p4=0" for the one-line-per-packet text output.
std::string mac_control_text(const decode::DecodedPacket& p);
// The per-packet `mac_control` object: sender, opcode and its fields.
Json mac_control_json(const decode::DecodedPacket& p);
void write_pfc_text(std::ostream& out, const decode::PfcAnalyzer& a);
// "pause storm: 02:00:00:00:00:0a paused priority 3 for 250.000 ms from frame 12 (40 frames)"
std::string explain_pause(const decode::Anomaly& a);
std::string mac_string(const std::array<std::uint8_t, 6>& mac);
std::string mac_string(std::uint64_t mac48);  // as Anomaly::mac holds it

}  // namespace rdmadiag::exporters
