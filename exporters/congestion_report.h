// Reports of the congestion analysis (decode/congestion_analysis.h): the
// top-level `congestion` JSON object (docs/json-schema.md, docs/congestion.md),
// the text section, and the one-line explanation of a cc_no_reaction anomaly.
#pragma once
#include <ostream>
#include <string>

#include "decode/anomaly.h"
#include "decode/congestion_analysis.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

Json congestion_json(const decode::CongestionAnalyzer& a);
void write_congestion_text(std::ostream& out, const decode::CongestionAnalyzer& a);
// "... kept its rate after the CNP at frame 40: median gap 1.000 us after it, 1.000 us before (judged at frame 57)"
std::string explain_no_reaction(const decode::Anomaly& a, const std::string& who);

}  // namespace rdmadiag::exporters
