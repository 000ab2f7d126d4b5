// Reports of the iWARP analysis (decode/iwarp_analysis.h): the per-packet
// `iwarp` array (one object per MPA unit that ended in the frame), the
// top-level `iwarp` report object (connections, CRC verdicts, opcodes, read
// latency, TCP holes) and the text section. Schema: docs/iwarp.md.
#pragma once
#include <ostream>
#include <string>

#include "decode/iwarp_analysis.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

Json iwarp_pdu_json(const decode::IwarpPdu& u, std::uint64_t frame);
// Sets `transport: "iwarp"` and the `iwarp` array on a packet object when MPA units ended in it.
void add_iwarp_packet_json(const decode::IwarpFrame& f, std::uint64_t frame, Json& packet);
Json iwarp_report_json(const decode::IwarpAnalyzer& a);
// "FPDU Send (QN 0 MSN 3 MO 0 L) len=4" and so on, for the one-line-per-packet text output.
std::string iwarp_packet_text(const decode::IwarpFrame& f);
// One line for an iWARP anomaly (flow indexes IwarpAnalyzer::flows()).
std::string explain_iwarp(const decode::Anomaly& a, const decode::IwarpAnalyzer& iw);
// The fields of an iWARP anomaly's JSON object, named in iWARP's terms (qn, msn,
// stag, tcp_seq...) rather than the IB names of decode::Anomaly's members.
void add_iwarp_anomaly_fields(const decode::Anomaly& a, Json& j);
void write_iwarp_text(std::ostream& out, const decode::IwarpAnalyzer& a);

}  // namespace rdmadiag::exporters
