// The mesh heatmap (one self-contained HTML page: inline CSS, no script, no external
// resource, so it can be mailed or opened from a shared disk) and the Prometheus text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "exporters/mesh_report.h"
#include "exporters/svg_plot.h"

namespace rdmadiag::exporters {

namespace {

std::string fixed(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

const MeshPairResult* find_pair(const MeshReport& r, int a, int b) {
  const int lo = std::min(a, b), hi = std::max(a, b);
  for (const auto& p : r.pairs)
    if (p.client == lo && p.server == hi) return &p;
  return nullptr;
}

std::optional<double> cell_value(const MeshPairResult& p) {
  if (p.status != MeshPairStatus::Ok) return std::nullopt;
  if (p.latency) return p.latency->median_usec;
  return p.bw_avg_mb_per_sec;
}

bool is_bad_link(const MeshReport& r, const MeshPairResult& p) {
  return std::any_of(r.findings.bad_links.begin(), r.findings.bad_links.end(),
                     [&](const MeshBadLink& l) { return l.client == p.client && l.server == p.server; });
}

bool is_bad_host(const MeshReport& r, int rank) {
  return std::any_of(r.findings.bad_hosts.begin(), r.findings.bad_hosts.end(), [&](const MeshBadHost& h) { return h.rank == rank; });
}

// Green (best) to red (worst) on a log scale between the extremes of the matrix.
std::string heat_color(double v, double lo, double hi, bool higher_is_worse) {
  double t = hi > lo && lo > 0 ? std::log(v / lo) / std::log(hi / lo) : 0;
  if (!higher_is_worse) t = 1 - t;
  t = std::clamp(t, 0.0, 1.0);
  const int hue = static_cast<int>(std::lround(120 * (1 - t)));
  return "hsl(" + std::to_string(hue) + ",70%,55%)";
}

std::string matrix_cell(const MeshReport& r, int row, int col, double lo, double hi) {
  if (row == col) return "<td class=self></td>";
  const MeshPairResult* p = find_pair(r, row, col);
  if (!p || p->status == MeshPairStatus::NotRun) return "<td class=none title='not tested'>&middot;</td>";
  const std::string cls = is_bad_link(r, *p) ? " class=bad" : "";
  const auto v = cell_value(*p);
  if (!v)
    return "<td" + cls + " style='background:#333;color:#fff' title='" + html_escape(p->error) + "'>" +
           mesh_status_name(p->status) + "</td>";
  const std::string unit = p->latency ? " us" : " MB/s";
  return "<td" + cls + " style='background:" + heat_color(*v, lo, hi, r.findings.higher_is_worse) + "' title='" +
         html_escape(std::to_string(p->client) + "-" + std::to_string(p->server)) + "'>" + fixed(*v, p->latency ? 2 : 0) +
         "</td>";
}

std::string findings_html(const MeshReport& r) {
  const auto& f = r.findings;
  std::ostringstream o;
  o << "<h2>Findings</h2><p>metric " << html_escape(f.metric) << ", median " << fixed(f.median, 2) << ", robust deviation "
    << fixed(f.scale, 2) << ", threshold " << fixed(f.threshold, 2) << " (k = " << r.info.k << ")</p>";
  if (!f.note.empty()) o << "<p>" << html_escape(f.note) << "</p>";
  o << "<ul>";
  for (const auto& h : f.bad_hosts)
    o << "<li><b>bad host</b> rank " << h.rank << ": " << h.bad_pairs << " of " << h.measured_pairs
      << " pairs failed or beyond the threshold ("
      << (h.host_median > 0 ? "host median " + fixed(h.host_median, 2) + ", others " + fixed(h.baseline_median, 2)
                            : std::string("no working pair"))
      << ")</li>";
  for (const auto& l : f.bad_links)
    o << "<li><b>bad link</b> " << l.client << " - " << l.server << ": " << html_escape(l.reason)
      << (l.value != 0 ? " (" + fixed(l.value, 2) + ")" : "") << "</li>";
  if (f.evaluated && f.bad_hosts.empty() && f.bad_links.empty()) o << "<li>no outlier</li>";
  o << "</ul>";
  return o.str();
}

}  // namespace

std::string render_mesh_html(const MeshReport& r) {
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& p : r.pairs)
    if (auto v = cell_value(p)) {
      lo = first ? *v : std::min(lo, *v);
      hi = first ? *v : std::max(hi, *v);
      first = false;
    }
  std::ostringstream o;
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>rdmadiag mesh</title><style>"
       "body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;"
       "text-align:right;font-size:12px}td.self{background:#eee}td.bad{outline:3px solid #000;font-weight:bold}"
       "th.badhost{background:#f88}</style></head><body>";
  o << "<h1>rdmadiag mesh: " << html_escape(r.info.test) << ", " << r.info.size << " B, " << r.hosts.size() << " hosts</h1>";
  o << "<p>Cell: " << (r.findings.higher_is_worse ? "median one-way latency (us)" : "average bandwidth (MB/s)")
    << " of the pair, green best to red worst (colours span this matrix' range " << fixed(lo, 2) << " .. " << fixed(hi, 2)
    << ", not good/bad: the findings say that); outlined: a bad link; red header: a bad host. Started "
    << html_escape(r.info.start_time) << ", sweep " << r.info.sweep << ".</p><table><tr><th></th>";
  for (const auto& h : r.hosts)
    o << "<th" << (is_bad_host(r, h.rank) ? " class=badhost" : "") << ">" << h.rank << "<br>" << html_escape(h.hostname) << "</th>";
  o << "</tr>";
  for (const auto& row : r.hosts) {
    o << "<tr><th" << (is_bad_host(r, row.rank) ? " class=badhost" : "") << ">" << row.rank << " " << html_escape(row.hostname)
      << "</th>";
    for (const auto& col : r.hosts) o << matrix_cell(r, row.rank, col.rank, lo, hi);
    o << "</tr>";
  }
  o << "</table>" << findings_html(r) << "</body></html>\n";
  return o.str();
}

}  // namespace rdmadiag::exporters
