#include "exporters/congestion_report.h"

#include "exporters/analysis_report.h"
#include "exporters/text_format.h"

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {

Json us_or_null(bool known, double ns) { return known ? Json(ns * 1e-3) : Json(nullptr); }

Json flow_json(const CcFlowResult& r) {
  Json j;
  if (r.flow != UINT32_MAX) j["flow"] = r.flow;
  j["src"] = address_string(r.key, true);
  j["dst"] = address_string(r.key, false);
  j["dest_qp"] = r.key.dest_qp;
  j["sender_qp"] = r.sender_qp_known ? Json(r.sender_qp) : Json(nullptr);
  j["first_frame"] = r.first_frame;
  j["packets"] = r.packets;
  j["ce_marked"] = r.ce_marked;
  j["cnps"] = r.cnps;
  j["cnps_without_mark"] = r.cnps_without_mark;
  j["marks_answered"] = r.marks_answered;
  j["cnps_per_marked_packet"] = r.ce_marked ? Json(static_cast<double>(r.cnps) / static_cast<double>(r.ce_marked)) : Json(nullptr);
  const double n = static_cast<double>(r.responses);
  j["cnp_response_us"] = {{"count", r.responses},
                          {"min", us_or_null(r.responses, static_cast<double>(r.response_min_ns))},
                          {"mean", us_or_null(r.responses, static_cast<double>(r.response_sum_ns) / std::max(n, 1.0))},
                          {"max", us_or_null(r.responses, static_cast<double>(r.response_max_ns))}};
  const double s = static_cast<double>(r.slowed);
  j["episodes"] = r.episodes;
  j["slowed"] = r.slowed;
  j["kept_rate"] = r.kept_rate;
  j["unjudged"] = r.unjudged;
  j["reaction_us"] = {{"mean", us_or_null(r.slowed, static_cast<double>(r.reaction_sum_ns) / std::max(s, 1.0))},
                      {"max", us_or_null(r.slowed, static_cast<double>(r.reaction_max_ns))}};
  if (r.kept_rate) j["first_kept_rate_cnp_frame"] = r.first_kept_rate_frame;
  return j;
}

}  // namespace

Json congestion_json(const CongestionAnalyzer& a) {
  Json j;
  const CcTotals& t = a.totals();
  j["rate_cut"] = a.options().rate_cut;
  j["window_gaps"] = kCcWindow;
  j["ect_packets"] = t.ect_packets;
  j["ce_marked"] = t.ce_marked;
  j["cnps"] = t.cnps;
  j["cnps_unmatched"] = t.cnps_unmatched;
  j["kept_rate_flows"] = t.kept_rate_flows;
  j["flows_untracked"] = t.flows_untracked;
  if (t.retired_at_cap) j["flows_retired_at_cap"] = t.retired_at_cap;
  Json arr = Json::array();
  for (const CcFlowResult& r : a.flows()) arr.push_back(flow_json(r));
  j["flows"] = std::move(arr);
  return j;
}

void write_congestion_text(std::ostream& out, const CongestionAnalyzer& a) {
  if (!a.any()) return;
  const CcTotals& t = a.totals();
  out << fmt("\nCongestion (ECN CE -> CNP -> rate): %llu ECN-capable packets, %llu CE-marked, %llu CNPs (%llu unmatched)\n",
             static_cast<unsigned long long>(t.ect_packets), static_cast<unsigned long long>(t.ce_marked),
             static_cast<unsigned long long>(t.cnps), static_cast<unsigned long long>(t.cnps_unmatched));
  out << fmt("  %-36s %8s %6s %6s %8s %12s %12s %8s %6s %6s\n", "flow", "QP", "CE", "CNP", "CNP/CE", "resp mean",
             "resp max", "slowed", "kept", "unjudg");
  for (const CcFlowResult& r : a.flows()) {
    if (!r.ce_marked && !r.cnps) continue;
    const std::string flow = address_string(r.key, true) + " -> " + address_string(r.key, false);
    const double n = static_cast<double>(r.responses);
    out << fmt("  %-36s %#8x %6llu %6llu %8s %12s %12s %8llu %6llu %6llu\n", flow.c_str(), r.key.dest_qp,
               static_cast<unsigned long long>(r.ce_marked), static_cast<unsigned long long>(r.cnps),
               r.ce_marked ? fmt("%.3f", static_cast<double>(r.cnps) / static_cast<double>(r.ce_marked)).c_str() : "-",
               r.responses ? fmt("%.3f us", static_cast<double>(r.response_sum_ns) * 1e-3 / n).c_str() : "-",
               r.responses ? fmt("%.3f us", static_cast<double>(r.response_max_ns) * 1e-3).c_str() : "-",
               static_cast<unsigned long long>(r.slowed), static_cast<unsigned long long>(r.kept_rate),
               static_cast<unsigned long long>(r.unjudged));
  }
  if (t.kept_rate_flows)
    out << fmt("  %llu flow(s) kept sending at their rate after a CNP (cc_no_reaction)\n",
               static_cast<unsigned long long>(t.kept_rate_flows));
  if (t.retired_at_cap)
    out << fmt("  (%llu flows retired while active: over %zu live flows; a later packet of one starts it anew)\n",
               static_cast<unsigned long long>(t.retired_at_cap), CongestionAnalyzer::kMaxLiveFlows);
}

std::string explain_no_reaction(const Anomaly& a, const std::string& who) {
  return fmt("%s kept its rate after the CNP at frame %llu: median gap %.3f us over the next %zu packets, %.3f us before%s%s",
             who.c_str(), static_cast<unsigned long long>(a.frame), a.duration_us, kCcWindow,
             static_cast<double>(a.count) * 1e-3, a.related_count ? " (judged at frame " : "",
             a.related_count ? (std::to_string(a.related[0]) + ")").c_str() : "");
}

}  // namespace rdmadiag::exporters
