// Reports of the transport analysis: per-flow health (JSON `flows`, the text
// table sorted worst first), the anomaly list with one-line explanations a
// network engineer reads, and the per-packet `analysis` object.
#pragma once
#include <ostream>
#include <string>

#include "decode/analyzer.h"
#include "decode/transport_analysis.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

std::string address_string(const decode::FlowKey& k, bool source);
Json flows_json(const decode::TransportAnalyzer& t);
Json anomalies_json(const decode::AnomalyLog& log, const decode::TransportAnalyzer& t);
Json analysis_json(const decode::PacketAnalysis& a);
// "QP 0x000011 10.77.0.2 -> 10.77.0.1: lost PSN 14205197-14205198 at frame 156; ..."
std::string explain(const decode::Anomaly& a, const decode::TransportAnalyzer& t);
// The same for any anomaly of an analysis run (IB/RoCE or iWARP).
std::string explain(const decode::Anomaly& a, const decode::Analyzer& analyzer);
Json anomalies_json(const decode::Analyzer& analyzer);
void write_problems(std::ostream& out, const decode::Analyzer& analyzer, std::size_t max_lines = 40);
void write_flow_table(std::ostream& out, const decode::TransportAnalyzer& t);
void write_problems(std::ostream& out, const decode::AnomalyLog& log, const decode::TransportAnalyzer& t,
                    std::size_t max_lines = 40);

}  // namespace rdmadiag::exporters
