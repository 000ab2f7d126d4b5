// The HTML report: one self-contained page (inline CSS, inline SVG plots, a
// few lines of inline script to sort tables; nothing fetched) rendered from a
// JSON report alone, so `rdmadiag report RESULT.json --html` gives the same
// page later and the JSON is proven to carry everything the page shows.
//  - analyze / capture reports (docs/schema/analyze-report.schema.json):
//    summary, per-QP health table, anomalies, PSN timeline per QP with gaps,
//    NAKs and retransmissions marked, wire-latency distributions;
//  - perftest reports (docs/perftest-schema.json): results table, latency
//    histogram and CDF per size, latency (or bandwidth) against size;
//  - nvme reports (nvme_report.h): exporters/nvme_html.cpp.
#pragma once
#include <string>

#include "exporters/json_report.h"

namespace rdmadiag::exporters {

enum class ReportKind { analyze, perftest, nvme, unknown };

ReportKind report_kind(const Json& report);
// Empty string and `error` set when the JSON is not a report rdmadiag wrote.
std::string render_html(const Json& report, std::string& error);

}  // namespace rdmadiag::exporters
