#include "exporters/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "exporters/html_parts.h"
#include "exporters/svg_plot.h"

namespace rdmadiag::exporters {

namespace {

const char* kStyle = R"(
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:20px 28px;color:#1d1d24;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#666;font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid #dde;border-radius:6px;padding:8px 12px;min-width:110px;background:#f8f8fc}
.card .v{font-size:20px;font-weight:600} .card .k{font-size:11px;color:#666}
.card.bad{background:#fff0f0;border-color:#e99} .card.good{background:#f0fff3;border-color:#9d9}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #dde;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#eef;position:sticky;top:0} td.t,th.t{text-align:left}
table.sortable th{cursor:pointer} table.sortable th:hover{background:#dde}
th.asc::after{content:" \25B2"} th.desc::after{content:" \25BC"}
tr.bad td{background:#fff3f3} tr:hover td{background:#f3f7ff}
.plots{display:flex;flex-wrap:wrap;gap:10px} svg.plot{border:1px solid #eee;background:#fff}
ul.anom{font-family:monospace;font-size:12px;max-height:320px;overflow:auto;border:1px solid #eee;padding:6px 6px 6px 24px}
.note{color:#555;font-size:12px;max-width:1100px}
#js-status{color:#999;font-size:10px}
)";

// Click a header to sort by that column (numbers by data-v, else text); again to reverse.
const char* kScript = R"(
(function(){
  document.querySelectorAll('table.sortable').forEach(function(table){
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function(th, col){
      th.addEventListener('click', function(){
        var asc = !th.classList.contains('asc');
        heads.forEach(function(h){ h.classList.remove('asc','desc'); });
        th.classList.add(asc ? 'asc' : 'desc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function(a, b){
          var x = a.cells[col], y = b.cells[col];
          var xv = x.getAttribute('data-v'), yv = y.getAttribute('data-v');
          var r = (xv !== null && yv !== null) ? (parseFloat(xv) - parseFloat(yv))
                                               : x.textContent.localeCompare(y.textContent);
          return asc ? r : -r;
        });
        rows.forEach(function(r){ body.appendChild(r); });
      });
    });
  });
  var s = document.getElementById('js-status');
  s.textContent = 'interactive: click a column header to sort';
  document.body.setAttribute('data-rendered', 'yes');
})();
)";

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                         "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#ad494a"};

double num(const Json& j, const char* pointer, double fallback = 0) {
  const Json::json_pointer p(pointer);
  if (!j.contains(p)) return fallback;
  const Json& v = j.at(p);
  return v.is_number() ? v.get<double>() : fallback;
}

std::string str(const Json& j, const char* pointer, const std::string& fallback = "") {
  const Json::json_pointer p(pointer);
  if (!j.contains(p)) return fallback;
  const Json& v = j.at(p);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return fallback;
  return json_text(v);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string card(const std::string& key, const std::string& value, const char* cls = "") {
  return std::string("<div class=\"card ") + cls + "\"><div class=\"v\">" + html_escape(value) + "</div><div class=\"k\">" +
         html_escape(key) + "</div></div>";
}

// A table cell: numbers carry data-v so the sort is numeric.
std::string td_num(double v, const std::string& shown) {
  return "<td data-v=\"" + fmt("%.17g", v) + "\">" + html_escape(shown) + "</td>";
}
std::string td_num(double v) { return td_num(v, short_number(v)); }
std::string td_text(const std::string& s) { return "<td class=\"t\">" + html_escape(s) + "</td>"; }

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title>\n<style>" + kStyle + "</style></head>\n<body>\n";
}

std::string page_tail() {
  return std::string("<p id=\"js-status\">scripts did not run</p>\n<script>") + kScript + "</script>\n</body></html>\n";
}

// ---------- analyze / capture ----------

double flow_problems(const Json& f) {
  double n = num(f, "/psn/gaps") + num(f, "/psn/duplicates") + num(f, "/psn/out_of_order") +
             num(f, "/psn/retransmission_episodes") + num(f, "/icrc_bad") + num(f, "/bad_opcode_sequence") +
             num(f, "/length_mismatches");
  if (f.contains("naks"))
    for (const auto& [k, v] : f["naks"].items())
      if (v.is_number()) n += v.get<double>();
  return n;
}

std::string summary_section(const Json& r) {
  const Json& s = r.value("summary", Json::object());
  std::string h = "<div class=\"cards\">";
  h += card("packets", short_number(num(s, "/packets")));
  h += card("bytes", human_bytes(num(s, "/bytes")));
  h += card("duration", fmt("%.3f s", num(s, "/duration_s")));
  h += card("queue pairs", short_number(num(s, "/queue_pairs")));
  h += card("flows", short_number(num(s, "/flows")));
  const double anomalies = num(s, "/anomalies/total");
  h += card("anomalies", short_number(anomalies), anomalies > 0 ? "bad" : "good");
  const double bad = num(s, "/icrc/bad") - num(s, "/icrc/not_wire");  // a sender's ICRCs not the wire's: not corruption
  h += card("ICRC bad / ok", short_number(bad) + " / " + short_number(num(s, "/icrc/ok")), bad > 0 ? "bad" : "good");
  if (num(s, "/icrc/not_wire") > 0) h += card("ICRC not the wire's", short_number(num(s, "/icrc/not_wire")));
  h += "</div>\n";
  h += "<table><thead><tr><th class=\"t\">transport</th><th>packets</th><th>bytes</th></tr></thead><tbody>";
  if (s.contains("by_transport"))
    for (const auto& [k, v] : s["by_transport"].items())
      if (v.is_number() && v.get<double>() > 0)
        h += "<tr>" + td_text(k) + td_num(v.get<double>()) + td_num(num(s, ("/bytes_by_transport/" + k).c_str())) + "</tr>";
  h += "</tbody></table>\n";
  if (s.contains("anomalies") && s["anomalies"].contains("by_kind") && !s["anomalies"]["by_kind"].empty()) {
    h += "<table><thead><tr><th class=\"t\">anomaly</th><th>count</th></tr></thead><tbody>";
    for (const auto& [k, v] : s["anomalies"]["by_kind"].items()) h += "<tr>" + td_text(k) + td_num(v.get<double>()) + "</tr>";
    h += "</tbody></table>\n";
  }
  if (r.contains("inputs")) {
    h += "<p class=\"sub\">Inputs: ";
    bool first = true;
    for (const Json& in : r["inputs"]) {
      h += (first ? "" : "; ") + html_escape(str(in, "/path")) + " (" + html_escape(str(in, "/linktype_name", str(in, "/error"))) +
           ", " + short_number(num(in, "/records")) + " records" + (in.value("complete", true) ? "" : ", cut short") + ")";
      first = false;
    }
    h += "</p>\n";
  }
  return h;
}

std::string flows_table(const Json& flows) {
  std::string h =
      "<p class=\"note\">One row per flow: one direction of traffic to one destination QP. Click a column to sort. "
      "Latency is request to response at the capture point, for the flow's most frequent operation.</p>\n"
      "<table class=\"sortable\" id=\"flows\"><thead><tr><th>flow</th><th class=\"t\">QP</th><th class=\"t\">src &rarr; dst</th>"
      "<th class=\"t\">service</th><th>packets</th><th>bytes</th><th>problems</th><th>PSN gaps</th><th>missing</th>"
      "<th>dup</th><th>ooo</th><th>retx</th><th>NAK</th><th>RNR</th><th>ICRC bad</th><th>lat p50 &micro;s</th>"
      "<th>lat p99 &micro;s</th><th>ECN CE</th><th>CNP</th></tr></thead><tbody>\n";
  for (const Json& f : flows) {
    const double problems = flow_problems(f);
    double naks = 0;
    if (f.contains("naks"))
      for (const auto& [k, v] : f["naks"].items())
        if (k != "rnr" && v.is_number()) naks += v.get<double>();
    const Json* lat = nullptr;
    if (f.contains("latency_us"))
      for (const auto& [k, v] : f["latency_us"].items())
        if (!lat || num(v, "/count") > num(*lat, "/count")) lat = &v;
    char qp[16];
    std::snprintf(qp, sizeof qp, "0x%06x", static_cast<unsigned>(num(f, "/dest_qp")));
    h += std::string("<tr") + (problems > 0 ? " class=\"bad\"" : "") + ">" + td_num(num(f, "/flow")) + td_text(qp) +
         td_text(str(f, "/src") + " -> " + str(f, "/dst")) + td_text(str(f, "/transport_service")) + td_num(num(f, "/packets")) +
         td_num(num(f, "/bytes"), human_bytes(num(f, "/bytes"))) + td_num(problems) + td_num(num(f, "/psn/gaps")) +
         td_num(num(f, "/psn/missing")) + td_num(num(f, "/psn/duplicates")) + td_num(num(f, "/psn/out_of_order")) +
         td_num(num(f, "/psn/retransmissions")) + td_num(naks) + td_num(num(f, "/naks/rnr")) + td_num(num(f, "/icrc_bad"));
    h += lat ? td_num(num(*lat, "/p50"), fmt("%.1f", num(*lat, "/p50"))) + td_num(num(*lat, "/p99"), fmt("%.1f", num(*lat, "/p99")))
             : "<td data-v=\"-1\">-</td><td data-v=\"-1\">-</td>";
    h += td_num(num(f, "/ecn_ce")) + td_num(num(f, "/cnp")) + "</tr>\n";
  }
  return h + "</tbody></table>\n";
}

std::string anomalies_list(const Json& anomalies) {
  if (anomalies.empty()) return "<p>No anomalies: no PSN gaps, duplicates, retransmissions, NAKs or CRC errors.</p>\n";
  std::string h = "<ul class=\"anom\">";
  std::size_t n = 0;
  for (const Json& a : anomalies) {
    if (n++ == 500) {
      h += "<li>... " + std::to_string(anomalies.size() - 500) + " more in the JSON report</li>";
      break;
    }
    h += "<li>" + html_escape(str(a, "/text", str(a, "/kind"))) + "</li>";
  }
  return h + "</ul>\n";
}

struct EventStyle {
  const char* kind;
  const char* label;
  const char* color;
  const char* shape;
};
constexpr EventStyle kEventStyles[] = {
    {"gap", "PSN gap (lost before capture)", "#d62728", "triangle"},
    {"retransmission", "retransmission", "#ff7f0e", "circle"},
    {"duplicate", "duplicate", "#9467bd", "square"},
    {"out_of_order", "out of order", "#17becf", "diamond"},
    {"icrc_bad", "ICRC bad", "#e377c2", "cross"},
    {"ecn_ce", "ECN CE", "#7f7f7f", "diamond"},
};

std::string timelines_section(const Json& r) {
  if (!r.contains("timeline") || !r["timeline"].contains("flows"))
    return "<p>No PSN timeline in this report (written by an older rdmadiag).</p>\n";
  const Json& tl = r["timeline"]["flows"];
  std::map<double, const Json*> flow_by_index, timeline_by_index;
  if (r.contains("flows"))
    for (const Json& f : r["flows"]) flow_by_index[num(f, "/flow")] = &f;
  for (const Json& t : tl) timeline_by_index[num(t, "/flow")] = &t;
  // Requester flows (those sending requests), worst first; at most 16 plots.
  std::vector<const Json*> chosen;
  for (const Json& t : tl) {
    const auto it = flow_by_index.find(num(t, "/flow"));
    const bool requests = it == flow_by_index.end() || num(*it->second, "/requests") > 0;
    if (requests && t["points"].size() >= 2) chosen.push_back(&t);
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](const Json* a, const Json* b) {
    const auto fa = flow_by_index.find(num(*a, "/flow")), fb = flow_by_index.find(num(*b, "/flow"));
    const double pa = fa == flow_by_index.end() ? 0 : flow_problems(*fa->second);
    const double pb = fb == flow_by_index.end() ? 0 : flow_problems(*fb->second);
    return pa > pb;
  });
  std::string h =
      "<p class=\"note\">PSN of each request packet against time (seconds from the first frame), one plot per requester "
      "flow, worst first. Marked: PSN gaps at the packet after the hole, retransmissions, duplicates, reordering, bad ICRC, "
      "and the NAKs (x) the responder sent back on the reverse flow, at the PSN they name. Long flows are sampled "
      "(every n-th packet; all events are kept up to 500 per flow).</p>\n<div class=\"plots\">\n";
  std::size_t shown = 0;
  for (const Json* t : chosen) {
    if (shown++ == 16) break;
    const Json& points = (*t)["points"];
    double tmin = 1e300, tmax = -1e300, pmin = 1e300, pmax = -1e300;
    std::vector<std::pair<double, double>> line;
    for (const Json& p : points) {
      const double x = p[0].get<double>(), y = p[1].get<double>();
      tmin = std::min(tmin, x);
      tmax = std::max(tmax, x);
      pmin = std::min(pmin, y);
      pmax = std::max(pmax, y);
      line.push_back({x, y});
    }
    // NAKs travel on the reverse flow.
    std::vector<std::pair<double, double>> naks;
    const auto fit = flow_by_index.find(num(*t, "/flow"));
    if (fit != flow_by_index.end() && fit->second->contains("peer_flow")) {
      const auto pit = timeline_by_index.find(num(*fit->second, "/peer_flow"));
      if (pit != timeline_by_index.end())
        for (const Json& e : (*pit->second)["events"])
          if (str(e, "/kind") == "nak" || str(e, "/kind") == "rnr_nak") naks.push_back({num(e, "/t"), num(e, "/psn")});
    }
    for (const auto& [x, y] : naks) {
      tmin = std::min(tmin, x);
      tmax = std::max(tmax, x);
      pmin = std::min(pmin, y);
      pmax = std::max(pmax, y);
    }
    const double tpad = std::max((tmax - tmin) * 0.03, 1e-6), ppad = std::max((pmax - pmin) * 0.05, 1.0);
    char title[160];
    std::snprintf(title, sizeof title, "flow %d  QP 0x%06x  %s -> %s", static_cast<int>(num(*t, "/flow")),
                  static_cast<unsigned>(num(*t, "/dest_qp")), str(*t, "/src").c_str(), str(*t, "/dst").c_str());
    SvgPlot plot(900, 320, {tmin - tpad, tmax + tpad, AxisScale::linear, "time (s)"},
                 {pmin - ppad, pmax + ppad, AxisScale::linear, "PSN"}, title);
    plot.line(line, "#1f77b4", num(*t, "/stride") > 1 ? "request PSN (1 in " + short_number(num(*t, "/stride")) + ")" : "request PSN", 1);
    for (const EventStyle& st : kEventStyles) {
      std::vector<std::pair<double, double>> pts;
      for (const Json& e : (*t)["events"])
        if (str(e, "/kind") == st.kind) pts.push_back({num(e, "/t"), num(e, "/psn")});
      plot.markers(pts, st.color, st.shape, st.label, 3.5);
    }
    plot.markers(naks, "#000", "cross", "NAK from responder", 5);
    h += plot.svg();
  }
  if (chosen.empty()) h += "<p>No request flows with at least two packets.</p>";
  if (chosen.size() > 16) h += "<p>" + std::to_string(chosen.size() - 16) + " more flows not plotted.</p>";
  return h + "</div>\n";
}

// ---------- lossless Ethernet: pauses per priority, CE and CNPs per QP

// One bar per continuous pause at its priority's height; storms in red.
std::string pause_timeline_section(const Json& r) {
  if (!r.contains("pfc") || !r["pfc"].contains("timeline")) return "";
  const Json& pfc = r["pfc"];
  const Json& pauses = pfc["timeline"]["pauses"];
  std::string h = "<h2>Pause timeline per priority</h2>\n";
  if (pauses.empty())
    return h + "<p>No continuous pause to show" + (pfc["link_speed_bps"].is_null() ? " (pause times need --link-speed)" : "") +
           ".</p>\n";
  const double storm_us = num(pfc, "/storm_threshold_us");
  double tmin = 1e300, tmax = -1e300;
  for (const Json& p : pauses) {
    tmin = std::min(tmin, num(p, "/t_s"));
    tmax = std::max(tmax, num(p, "/t_s") + num(p, "/length_us") * 1e-6);
  }
  const double pad = std::max((tmax - tmin) * 0.03, 1e-6);
  SvgPlot plot(900, 260, {tmin - pad, tmax + pad, AxisScale::linear, "time (s)"}, {-0.5, 7.5, AxisScale::linear, "priority"},
               "continuous pauses (refreshes merged), all senders");
  std::vector<std::pair<double, double>> starts, storm_starts;
  for (const Json& p : pauses) {
    const double t = num(p, "/t_s"), prio = num(p, "/priority"), len = num(p, "/length_us");
    const bool storm = len > storm_us;
    plot.line({{t, prio}, {t + len * 1e-6, prio}}, storm ? "#d62728" : "#1f77b4", "", 6);
    (storm ? storm_starts : starts).push_back({t, prio});
  }
  plot.markers(starts, "#1f77b4", "circle", "pause start", 2.5);
  plot.markers(storm_starts, "#d62728", "triangle", "storm start", 4);
  h += "<p class=\"note\">Each bar is one continuous pause of a priority by one sender, from its first frame to its end "
       "(XON or expiry); red: longer than the storm threshold.";
  if (num(pfc, "/timeline/not_listed") > 0)
    h += " " + short_number(num(pfc, "/timeline/not_listed")) + " later pauses are not listed.";
  return h + "</p>\n<div class=\"plots\">" + plot.svg() + "</div>\n";
}

// The PSN at time t on a timeline's points (the last point at or before t).
double psn_at(const Json& points, double t) {
  double psn = points.empty() ? 0 : points[0][1].get<double>();
  for (const Json& p : points) {
    if (p[0].get<double>() > t) break;
    psn = p[1].get<double>();
  }
  return psn;
}

std::string congestion_plot(const Json& f, const Json& data, const Json* cnp_timeline) {
  const Json& points = data["points"];
  std::vector<std::pair<double, double>> line, ce, cnps;
  for (const Json& p : points) line.push_back({p[0].get<double>(), p[1].get<double>()});
  for (const Json& e : data["events"])
    if (str(e, "/kind") == "ecn_ce") ce.push_back({num(e, "/t"), num(e, "/psn")});
  if (cnp_timeline)
    for (const Json& e : (*cnp_timeline)["events"])
      if (str(e, "/kind") == "cnp") cnps.push_back({num(e, "/t"), psn_at(points, num(e, "/t"))});
  double tmin = 1e300, tmax = -1e300, pmin = 1e300, pmax = -1e300;
  for (const auto* v : {&line, &ce, &cnps})
    for (const auto& [x, y] : *v) {
      tmin = std::min(tmin, x), tmax = std::max(tmax, x), pmin = std::min(pmin, y), pmax = std::max(pmax, y);
    }
  const double tpad = std::max((tmax - tmin) * 0.03, 1e-6), ppad = std::max((pmax - pmin) * 0.05, 1.0);
  char title[200];
  std::snprintf(title, sizeof title, "QP 0x%06x  %s -> %s: %d CE, %d CNPs, slowed %d, kept rate %d",
                static_cast<unsigned>(num(f, "/dest_qp")), str(f, "/src").c_str(), str(f, "/dst").c_str(),
                static_cast<int>(num(f, "/ce_marked")), static_cast<int>(num(f, "/cnps")), static_cast<int>(num(f, "/slowed")),
                static_cast<int>(num(f, "/kept_rate")));
  SvgPlot plot(900, 300, {tmin - tpad, tmax + tpad, AxisScale::linear, "time (s)"},
               {pmin - ppad, pmax + ppad, AxisScale::linear, "PSN"}, title);
  plot.line(line, "#1f77b4", "PSN (slope: the sender's rate)", 1);
  plot.markers(ce, "#7f7f7f", "diamond", "ECN CE", 3.5);
  plot.markers(cnps, "#d62728", "cross", "CNP back to the sender", 5);
  return plot.svg();
}

// Per data flow with CE marks or CNPs (kept-rate first, at most 16): its PSN
// against time, the CE-marked packets, and the CNPs that came back.
std::string congestion_section(const Json& r) {
  if (!r.contains("congestion")) return "";
  std::string h = "<h2>Congestion: CE marks and CNPs per queue pair</h2>\n";
  std::map<double, const Json*> timeline_by_index;
  if (r.contains("timeline") && r["timeline"].contains("flows"))
    for (const Json& t : r["timeline"]["flows"]) timeline_by_index[num(t, "/flow")] = &t;
  std::vector<const Json*> chosen;
  for (const Json& f : r["congestion"]["flows"])
    if (num(f, "/ce_marked") + num(f, "/cnps") > 0 && f.contains("flow")) chosen.push_back(&f);
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const Json* a, const Json* b) { return num(*a, "/kept_rate") > num(*b, "/kept_rate"); });
  h += "<p class=\"note\">A switch marks packets CE, the receiver answers with CNPs to the sender's QP, and the sender "
       "should slow down: the PSN line flattens after a CNP. Kept-rate flows first.</p>\n<div class=\"plots\">\n";
  std::size_t shown = 0;
  for (const Json* f : chosen) {
    const auto data = timeline_by_index.find(num(*f, "/flow"));
    if (data == timeline_by_index.end() || shown == 16) continue;
    const Json* cnp_timeline = nullptr;  // the CNPs' own flow: back from dst to src, to the sender's QP
    for (const Json& g : r.value("flows", Json::array()))
      if (str(g, "/src") == str(*f, "/dst") && str(g, "/dst") == str(*f, "/src") && !(*f)["sender_qp"].is_null() &&
          num(g, "/dest_qp") == num(*f, "/sender_qp")) {
        const auto it = timeline_by_index.find(num(g, "/flow"));
        if (it != timeline_by_index.end()) cnp_timeline = it->second;
      }
    h += congestion_plot(*f, *data->second, cnp_timeline);
    ++shown;
  }
  if (!shown) h += "<p>No queue pair with CE marks or CNPs.</p>";
  return h + "</div>\n";
}

std::string histogram_plot(const Json& hist, const std::string& title) {
  const Json& le = hist["le_us"];
  const Json& counts = hist["counts"];
  std::vector<std::pair<std::pair<double, double>, double>> bars;
  double lo = 0.5, prev = 0.5, ymax = 1;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double upper = i < le.size() ? le[i].get<double>() : prev * 2;
    const double c = counts[i].get<double>();
    bars.push_back({{prev, upper}, c});
    ymax = std::max(ymax, c);
    prev = upper;
  }
  SvgPlot plot(430, 260, {lo, prev, AxisScale::log10, "latency (\xC2\xB5s), bucket upper bounds"},
               {0, ymax * 1.1, AxisScale::linear, "responses"}, title);
  plot.bars(bars, "#1f77b4");
  return plot.svg();
}

std::string latency_section(const Json& r) {
  std::string h =
      "<p class=\"note\">Wire latency: from a request to its response (ACK or read response) at the capture point, "
      "counted on the flow that carries the response. Buckets are logarithmic.</p>\n";
  if (!r.contains("latency_histograms")) return h + "<p>No latency histograms in this report.</p>\n";
  const Json& lh = r["latency_histograms"];
  if (num(lh, "/all/count") == 0) return h + "<p>No request/response pairs were seen.</p>\n";
  h += "<div class=\"plots\">" + histogram_plot(lh["all"], "all flows (" + short_number(num(lh, "/all/count")) + " responses)");
  std::size_t n = 0;
  for (const Json& f : lh["flows"]) {
    if (n++ == 11) break;
    char title[96];
    std::snprintf(title, sizeof title, "responses on flow %d (QP 0x%06x), %s", static_cast<int>(num(f, "/flow")),
                  static_cast<unsigned>(num(f, "/dest_qp")), short_number(num(f, "/histogram/count")).c_str());
    h += histogram_plot(f["histogram"], title);
  }
  h += "</div>\n";
  // Percentiles per flow and operation (exact while the flow has <= 8192 samples).
  if (r.contains("flows")) {
    h += "<table class=\"sortable\"><thead><tr><th>flow</th><th class=\"t\">QP</th><th class=\"t\">operation</th><th>count</th>"
         "<th>min</th><th>p50</th><th>p99</th><th>max</th><th>mean</th></tr></thead><tbody>";
    for (const Json& f : r["flows"]) {
      if (!f.contains("latency_us")) continue;
      for (const auto& [op, l] : f["latency_us"].items()) {
        char qp[16];
        std::snprintf(qp, sizeof qp, "0x%06x", static_cast<unsigned>(num(f, "/dest_qp")));
        h += "<tr>" + td_num(num(f, "/flow")) + td_text(qp) + td_text(op) + td_num(num(l, "/count"));
        for (const char* k : {"/min", "/p50", "/p99", "/max", "/mean"}) h += td_num(num(l, k), fmt("%.2f", num(l, k)));
        h += "</tr>";
      }
    }
    h += "</tbody></table>\n";
  }
  return h;
}

std::string render_analyze(const Json& r) {
  std::string h = page_head("rdmadiag report");
  h += "<h1>rdmadiag " + html_escape(str(r, "/tool", "analyze").substr(str(r, "/tool").rfind(' ') + 1)) + " report</h1>";
  h += "<div class=\"sub\">schema " + html_escape(str(r, "/schema_version")) + "</div>\n";
  h += "<h2>Summary</h2>\n" + summary_section(r);
  if (r.contains("capture")) {
    const Json& c = r["capture"];
    h += "<p class=\"sub\">Capture: " + short_number(num(c, "/packets_captured")) + " packets, stopped by " +
         html_escape(str(c, "/stopped_by")) + ".";
    if (c.contains("sources"))
      for (const Json& s : c["sources"])
        if (s.contains("dropped"))
          h += " " + html_escape(str(s, "/name")) + ": " + short_number(num(s, "/dropped")) + " dropped by the kernel, " +
               short_number(num(s, "/if_dropped")) + " by the interface.";
    h += "</p>\n";
  }
  h += "<h2>Queue pair health</h2>\n" + flows_table(r.value("flows", Json::array()));
  h += "<h2>Anomalies</h2>\n" + anomalies_list(r.value("anomalies", Json::array()));
  h += "<h2>PSN timeline per queue pair</h2>\n" + timelines_section(r);
  h += pause_timeline_section(r);
  h += congestion_section(r);
  h += "<h2>Wire latency</h2>\n" + latency_section(r);
  return h + page_tail();
}

// ---------- perftest ----------

// The results table: bandwidth columns, or latency statistics.
std::string perftest_results_table(const Json& results, bool bandwidth) {
  std::string h = "<h2>Results</h2>\n<table class=\"sortable\"><thead><tr><th>size</th><th>iterations</th>";
  h += bandwidth ? "<th>BW peak MB/s</th><th>BW avg MB/s</th><th>Mpps</th>"
                 : "<th>t_min &micro;s</th><th>t_typical</th><th>t_avg</th><th>p99</th><th>p99.9</th><th>t_max</th><th>stdev</th>";
  h += "</tr></thead><tbody>";
  for (const Json& s : results) {
    h += "<tr>" + td_num(num(s, "/size"), size_label(num(s, "/size"))) + td_num(num(s, "/iterations"));
    if (bandwidth)
      for (const char* k : {"/bandwidth/bw_peak", "/bandwidth/bw_avg", "/bandwidth/msg_rate_mpps"}) h += td_num(num(s, k), fmt("%.3f", num(s, k)));
    else
      for (const char* k : {"/statistics/t_min", "/statistics/t_typical", "/statistics/t_avg", "/statistics/percentiles/p99",
                            "/statistics/percentiles/p99.9", "/statistics/t_max", "/statistics/t_stdev"})
        h += td_num(num(s, k, -1), fmt("%.2f", num(s, k, -1)));
    h += "</tr>";
  }
  return h + "</tbody></table>\n";
}

std::string bandwidth_against_size(const Json& results, double smin, double smax) {
  std::vector<std::pair<double, double>> avg, peak;
  double ymax = 1;
  for (const Json& s : results) {
    avg.push_back({num(s, "/size"), num(s, "/bandwidth/bw_avg")});
    peak.push_back({num(s, "/size"), num(s, "/bandwidth/bw_peak")});
    ymax = std::max({ymax, num(s, "/bandwidth/bw_avg"), num(s, "/bandwidth/bw_peak")});
  }
  SvgPlot plot(900, 380, {smin, smax, AxisScale::log2, "message size (bytes)"}, {0, ymax * 1.1, AxisScale::linear, "MB/s"},
               "bandwidth against message size");
  plot.line(avg, kColors[0], "average");
  plot.markers(avg, kColors[0], "circle", "", 3);
  plot.line(peak, kColors[1], "peak");
  return "<h2>Bandwidth against size</h2>\n" + plot.svg();
}

std::string latency_against_size(const Json& results, double smin, double smax) {
  double ymin = 1e300, ymax = 0;
  struct Line {
    const char* pointer;
    const char* name;
  };
  const Line lines[] = {{"/statistics/t_min", "t_min"}, {"/statistics/t_typical", "t_typical (median)"},
                        {"/statistics/percentiles/p99", "p99"}, {"/statistics/t_max", "t_max"}};
  for (const Json& s : results)
    for (const Line& l : lines) {
      const double v = num(s, l.pointer, -1);
      if (v > 0) {
        ymin = std::min(ymin, v);
        ymax = std::max(ymax, v);
      }
    }
  if (ymax <= 0) return "";
  SvgPlot plot(900, 400, {smin, smax, AxisScale::log2, "message size (bytes)"},
               {ymin / 1.3, ymax * 1.3, AxisScale::log10, "latency (\xC2\xB5s)"}, "latency against message size");
  for (std::size_t i = 0; i < std::size(lines); ++i) {
    std::vector<std::pair<double, double>> pts;
    for (const Json& s : results)
      if (num(s, lines[i].pointer, -1) > 0) pts.push_back({num(s, "/size"), num(s, lines[i].pointer)});
    plot.line(pts, kColors[i], lines[i].name);
    plot.markers(pts, kColors[i], "circle", "", 2.5);
  }
  return "<h2>Latency against size</h2>\n" + plot.svg();
}

// Against message size, when the run was a sweep.
std::string size_sweep_plot(const Json& results, bool bandwidth) {
  if (results.size() < 2) return "";
  const double smin = num(results.front(), "/size", 1), smax = num(results.back(), "/size", 2);
  return bandwidth ? bandwidth_against_size(results, smin, smax) : latency_against_size(results, smin, smax);
}

// The CDFs of all sizes in one plot (log latency axis).
std::string latency_cdf_plot(const std::vector<const Json*>& with_hist) {
  double xmin = 1e300, xmax = 0;
  std::vector<std::vector<std::pair<double, double>>> cdfs;
  for (const Json* s : with_hist) {
    std::vector<std::pair<double, double>> cdf;
    if (s->contains("samples_usec") && !(*s)["samples_usec"].empty()) {
      std::vector<double> v = (*s)["samples_usec"].get<std::vector<double>>();
      std::sort(v.begin(), v.end());
      for (std::size_t i = 0; i < v.size(); ++i) cdf.push_back({std::max(v[i], 1e-3), static_cast<double>(i + 1) / static_cast<double>(v.size())});
    } else {
      const Json& hg = (*s)["histogram"];
      const double low = num(hg, "/low_usec"), width = num(hg, "/bin_width_usec", 1);
      double total = 0, acc = 0;
      for (const Json& c : hg["counts"]) total += c.get<double>();
      for (std::size_t i = 0; i < hg["counts"].size(); ++i) {
        acc += hg["counts"][i].get<double>();
        if (total > 0) cdf.push_back({std::max(low + width * static_cast<double>(i + 1), 1e-3), acc / total});
      }
    }
    for (const auto& p : cdf) {
      xmin = std::min(xmin, p.first);
      xmax = std::max(xmax, p.first);
    }
    cdfs.push_back(std::move(cdf));
  }
  if (xmax > 0) {
    SvgPlot cdf_plot(900, 420, {xmin / 1.2, xmax * 1.2, AxisScale::log10, "latency (\xC2\xB5s)"},
                     {0, 1, AxisScale::linear, "fraction of samples"}, "latency CDF per message size");
    for (std::size_t i = 0; i < cdfs.size(); ++i) {
      // A step line: each sample raises the fraction.
      std::vector<std::pair<double, double>> steps;
      double prev = 0;
      for (const auto& [x, y] : cdfs[i]) {
        steps.push_back({x, prev});
        steps.push_back({x, y});
        prev = y;
      }
      cdf_plot.line(steps, kColors[i % std::size(kColors)], size_label(num(*with_hist[i], "/size")) + " B", 1.3);
    }
    return cdf_plot.svg();
  }
  return "";
}

// One small histogram per size, from the report's bins.
std::string latency_histograms(const std::vector<const Json*>& with_hist) {
  std::string h = "<div class=\"plots\">\n";
  for (const Json* s : with_hist) {
    const Json& hg = (*s)["histogram"];
    const double low = num(hg, "/low_usec"), width = num(hg, "/bin_width_usec", 1);
    std::vector<std::pair<std::pair<double, double>, double>> bars;
    double ymax = 1, hi = low + width;
    for (std::size_t i = 0; i < hg["counts"].size(); ++i) {
      const double c = hg["counts"][i].get<double>();
      const double x0 = low + width * static_cast<double>(i);
      if (c > 0) hi = x0 + width;
      bars.push_back({{x0, x0 + width}, c});
      ymax = std::max(ymax, c);
    }
    SvgPlot plot(330, 230, {low, hi, AxisScale::linear, "latency (\xC2\xB5s)"}, {0, ymax * 1.15, AxisScale::linear, "samples"},
                 size_label(num(*s, "/size")) + " B: " + short_number(num(*s, "/statistics/sample_count")) + " samples");
    plot.bars(bars, "#2ca02c");
    h += plot.svg();
  }
  return h + "</div>\n";
}

// Latency distributions per size: histogram (from the report's histogram) and CDF.
std::string latency_distributions(const Json& results) {
  std::vector<const Json*> with_hist;
  for (const Json& s : results)
    if (s.contains("histogram") && s["histogram"].contains("counts") && !s["histogram"]["counts"].empty()) with_hist.push_back(&s);
  if (with_hist.empty()) return "";
  return "<h2>Latency distribution per size</h2>\n<p class=\"note\">Histograms use the report's bins; the CDF uses every sample "
         "when the report has them (<code>--samples</code>), else the histogram.</p>\n" +
         latency_cdf_plot(with_hist) + latency_histograms(with_hist);
}

std::string render_perftest(const Json& r) {
  const Json& info = r.value("test_info", Json::object());
  const Json& results = r.value("results", Json::array());
  const bool bandwidth = !results.empty() && results[0].contains("bandwidth");
  std::string h = page_head("rdmadiag perftest " + str(info, "/test"));
  h += "<h1>rdmadiag perftest " + html_escape(str(info, "/test")) + "</h1>\n";
  h += "<div class=\"sub\">" + html_escape(str(info, "/role")) + " on " + html_escape(str(info, "/device")) + " port " +
       html_escape(str(info, "/port")) + ", peer " + html_escape(str(info, "/peer")) + ", " + html_escape(str(info, "/transport")) +
       ", MTU " + html_escape(str(info, "/mtu")) + ", " + html_escape(str(info, "/iterations")) + " iterations, started " +
       html_escape(str(info, "/start_time")) + "; schema " + html_escape(str(r, "/schema")) + " v" +
       html_escape(str(r, "/schema_version")) + "</div>\n";
  h += "<div class=\"cards\">" + card("sizes", std::to_string(results.size())) +
       card("result", r.value("ok", false) ? "ok" : "errors", r.value("ok", false) ? "good" : "bad") +
       card("link layer", str(info, "/link_layer", "?")) + card("clock", str(info, "/clock/counter", "?")) + "</div>\n";
  for (const char* key : {"warnings", "errors"})
    if (r.contains(key) && !r[key].empty()) {
      h += std::string("<p><b>") + key + ":</b></p><ul>";
      for (const Json& w : r[key]) h += "<li>" + html_escape(w.is_string() ? w.get<std::string>() : json_text(w)) + "</li>";
      h += "</ul>";
    }
  h += perftest_results_table(results, bandwidth);
  h += size_sweep_plot(results, bandwidth);
  h += latency_distributions(results);
  return h + page_tail();
}

}  // namespace

ReportKind report_kind(const Json& report) {
  if (!report.is_object()) return ReportKind::unknown;
  if (report.value("schema", "") == "rdmadiag-perftest") return ReportKind::perftest;
  if (report.contains("nvme_schema_version")) return ReportKind::nvme;
  if (report.contains("schema_version") && report.contains("tool") && report.contains("summary")) return ReportKind::analyze;
  return ReportKind::unknown;
}

std::string render_html(const Json& report, std::string& error) {
  try {
    switch (report_kind(report)) {
      case ReportKind::analyze: return render_analyze(report);
      case ReportKind::perftest: return render_perftest(report);
      case ReportKind::nvme: return render_nvme_html(report);
      case ReportKind::unknown: break;
    }
    error = "not an rdmadiag report (not an analyze/capture, perftest or nvme report)";
  } catch (const std::exception& e) {
    error = std::string("report does not have the expected shape: ") + e.what();
  }
  return {};
}

// The page parts other reports share (html_parts.h).
namespace html {
std::string page_head(const std::string& title) { return exporters::page_head(title); }
std::string page_tail() { return exporters::page_tail(); }
std::string card(const std::string& key, const std::string& value) { return exporters::card(key, value); }
std::string td_num(double v, const std::string& shown) { return exporters::td_num(v, shown); }
std::string td_text(const std::string& s) { return exporters::td_text(s); }
std::string histogram_plot(const Json& hist, const std::string& title) { return exporters::histogram_plot(hist, title); }
const char* color(std::size_t i) { return kColors[i % std::size(kColors)]; }
}  // namespace html

}  // namespace rdmadiag::exporters
