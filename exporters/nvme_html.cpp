// The HTML page of an `rdmadiag nvme` report, from its JSON alone (like every
// rdmadiag page: `rdmadiag report NVME.json --html` gives it again): totals,
// a latency histogram per command kind, each queue's outstanding commands over
// time, and the slowest commands with the transport events inside them.
#include <algorithm>
#include <cstdio>

#include "exporters/html_parts.h"
#include "exporters/svg_plot.h"

namespace rdmadiag::exporters {

namespace {

std::string number_text(const Json& v) { return v.is_null() ? std::string("-") : v.dump(); }

std::string totals_section(const Json& r) {
  const Json& t = r["totals"];
  std::string h = "<h1>NVMe over Fabrics (RDMA)</h1>\n<div class=\"cards\">";
  for (const char* k : {"queue_pairs", "commands", "completed", "errors", "unanswered", "unmatched_responses",
                        "data_packets", "remote_invalidates", "invalidate_mismatches"})
    if (t.contains(k)) h += html::card(k, number_text(t[k]));
  return h + "</div>\n";
}

std::string latency_section(const Json& r) {
  std::string h = "<h2>Latency per command (submit &rarr; completion at the capture point)</h2>\n<div class=\"plots\">";
  for (const Json& row : r["by_command"]) {
    if (!row.contains("histogram") || row["histogram"]["counts"].empty()) continue;
    h += html::histogram_plot(row["histogram"], row.value("queue_kind", "") + " " + row.value("command", ""));
  }
  return h + "</div>\n";
}

// Most commands outstanding per time bin, one line per queue.
std::string depth_section(const Json& r) {
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> lines;
  double xmax = 1e-3, ymax = 1, t0 = 0;
  bool first = true;
  for (const Json& q : r["queues"]) {
    const double ns = q.value("first_ns", 0.0);
    t0 = first ? ns : std::min(t0, ns);
    first = false;
  }
  for (const Json& q : r["queues"]) {
    if (!q.contains("timeline")) continue;
    const Json& t = q["timeline"];
    const double bin_s = t.value("bin_us", 1000.0) * 1e-6;
    const double start_s = (q.value("first_ns", 0.0) - t0 + t.value("start_offset_ns", 0.0)) * 1e-9;
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < t["max_outstanding"].size(); ++i) {
      const double y = t["max_outstanding"][i].get<double>();
      pts.push_back({start_s + static_cast<double>(i) * bin_s, y});
      pts.push_back({start_s + static_cast<double>(i + 1) * bin_s, y});
      ymax = std::max(ymax, y);
    }
    if (!pts.empty()) xmax = std::max(xmax, pts.back().first);
    lines.push_back({"queue " + number_text(q["qid"]) + " (frame " + number_text(q["first_frame"]) + ")", pts});
  }
  if (lines.empty()) return "";
  SvgPlot plot(900, 300, {0, xmax, AxisScale::linear, "seconds since the first queue's first command"},
               {0, ymax * 1.1, AxisScale::linear, "most commands outstanding"}, "Queue depth over time");
  for (std::size_t i = 0; i < lines.size(); ++i) plot.line(lines[i].second, html::color(i), lines[i].first);
  return "<h2>Outstanding commands per queue</h2>\n" + plot.svg() + "\n";
}

std::string command_row(const Json& c) {
  const double latency = c["latency_us"].is_null() ? -1 : c["latency_us"].get<double>();
  char lat[32];
  std::snprintf(lat, sizeof lat, "%.1f", latency);
  std::string cause = c.value("transport_events", 0) > 0
                          ? std::to_string(c.value("transport_events", 0)) + " transport events, first at frame " +
                                number_text(c["first_event_frame"])
                          : std::string("none on its queue pairs");
  if (c.contains("causes"))
    for (const auto& [kind, n] : c["causes"].items()) cause += "; " + n.dump() + " " + kind;
  std::string data = "-";
  if (c.contains("data") && !c["data"]["transfer_us"].is_null()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.0f B in %.1f us", c["data"].value("bytes", 0.0), c["data"]["transfer_us"].get<double>());
    data = buf;
  }
  return std::string("<tr") + (c.value("transport_events", 0) > 0 ? " class=\"bad\"" : "") + ">" +
         html::td_num(c.value("command_frame", 0.0), number_text(c["command_frame"])) + html::td_text(number_text(c["qid"])) +
         html::td_text(c.value("command", "")) + html::td_num(latency, latency >= 0                                    ? lat
                                      : c.value("completion_maybe_uncaptured", false) ? "none captured (bytes cut by the snap length)"
                                                                                       : "no completion") +
         html::td_text(c.value("status_name", "-")) + html::td_text(data) + html::td_text(cause) + "</tr>\n";
}

std::string commands_table(const char* title, const Json& list) {
  if (list.empty()) return "";
  std::string h = std::string("<h2>") + title + "</h2>\n<table class=\"sortable\"><thead><tr><th>frame</th><th class=\"t\">queue</th>"
                  "<th class=\"t\">command</th><th>latency &micro;s</th><th class=\"t\">status</th><th class=\"t\">data</th>"
                  "<th class=\"t\">transport events inside</th></tr></thead><tbody>\n";
  for (const Json& c : list) h += command_row(c);
  return h + "</tbody></table>\n";
}

}  // namespace

std::string render_nvme_html(const Json& r) {
  return html::page_head("rdmadiag nvme") + totals_section(r) + latency_section(r) + depth_section(r) +
         commands_table("Slowest commands and their causes", r["slowest"]) +
         commands_table("Commands with no completion in the capture", r["unanswered"]) + html::page_tail();
}

}  // namespace rdmadiag::exporters
