#include "exporters/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "decode/anomaly.h"
#include "decode/transport_analysis.h"
#include "exporters/pfc_report.h"

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

// Label values escape backslash, double quote and newline (exposition format).
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << number(v) << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

struct Series {
  std::string labels;
  FlowCounters counters;
};

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + "," + b; }

// Per pause sender and priority (at most PfcAnalyzer::kMaxSenders x 8 series).
void pause_metrics(Exposition& x, const PfcAnalyzer& pfc) {
  struct PerPriority {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const PriorityPauses&);
    bool needs_speed;
  };
  static const PerPriority kSeries[] = {
      {"rdmadiag_pause_frames_total", "counter", "PAUSE/PFC frames that speak for the priority, by sender.",
       [](const PriorityPauses& p) { return static_cast<double>(p.frames); }, false},
      {"rdmadiag_paused_seconds_total", "counter", "Time the priority was paused by the sender (ended pauses; needs --link-speed).",
       [](const PriorityPauses& p) { return p.paused_seconds; }, true},
      {"rdmadiag_pause_storms_total", "counter", "Continuous pauses longer than --pause-storm-ms.",
       [](const PriorityPauses& p) { return static_cast<double>(p.storms); }, true},
  };
  for (const PerPriority& m : kSeries) {
    if (m.needs_speed && !pfc.options().link_bps) continue;
    x.family(m.name, m.type, m.help);
    for (const PfcSender& s : pfc.senders())
      for (std::size_t n = 0; n < kPriorities; ++n)
        if (s.priorities[n].frames)
          x.sample(m.name, "sender=\"" + mac_string(s.mac) + "\",priority=\"" + std::to_string(n) + "\"",
                   m.value(s.priorities[n]));
  }
  x.family("rdmadiag_roce_packets_while_paused_total", "counter",
           "RoCE packets captured while another sender had their priority paused (needs --link-speed).");
  for (std::size_t n = 0; n < kPriorities; ++n)
    if (pfc.roce().packets[n])
      x.sample("rdmadiag_roce_packets_while_paused_total", "priority=\"" + std::to_string(n) + "\"",
               static_cast<double>(pfc.roce().while_paused[n]));
}

void congestion_metrics(Exposition& x, const CongestionAnalyzer& cc) {
  const CcTotals& t = cc.totals();
  x.family("rdmadiag_cc_ce_marked_total", "counter", "ECN-capable RoCE packets marked Congestion Experienced.");
  x.sample("rdmadiag_cc_ce_marked_total", "", static_cast<double>(t.ce_marked));
  x.family("rdmadiag_cc_cnps_total", "counter", "CNPs; unmatched: for no ECN-capable flow in the capture.");
  x.sample("rdmadiag_cc_cnps_total", "matched=\"true\"", static_cast<double>(t.cnps - t.cnps_unmatched));
  x.sample("rdmadiag_cc_cnps_total", "matched=\"false\"", static_cast<double>(t.cnps_unmatched));
  x.family("rdmadiag_cc_cnp_response_seconds", "summary", "From the first unanswered CE mark to the CNP, at the capture point.");
  x.sample("rdmadiag_cc_cnp_response_seconds_sum", "", static_cast<double>(t.response_sum_ns) * 1e-9);
  x.sample("rdmadiag_cc_cnp_response_seconds_count", "", static_cast<double>(t.responses));
}

void analyzer_metrics(Exposition& x, const decode::Analyzer& a) {
  const CaptureSummary& s = a.summary();
  x.family("rdmadiag_packets_total", "counter", "Frames read, of every kind.");
  x.sample("rdmadiag_packets_total", "", static_cast<double>(s.packets));
  x.family("rdmadiag_bytes_total", "counter", "Wire bytes of every frame read.");
  x.sample("rdmadiag_bytes_total", "", static_cast<double>(s.bytes));
  x.family("rdmadiag_transport_packets_total", "counter", "Frames by transport.");
  for (std::size_t i = 0; i < s.by_transport.size(); ++i)
    x.sample("rdmadiag_transport_packets_total", "transport=\"" + std::string(to_string(static_cast<Transport>(i))) + "\"",
             static_cast<double>(s.by_transport[i].packets));
  x.family("rdmadiag_icrc_checks_total", "counter", "ICRC verdicts (bad: corrupted in flight).");
  x.sample("rdmadiag_icrc_checks_total", "result=\"ok\"", static_cast<double>(s.icrc.ok));
  // A sender's bad ICRCs found not the wire's (icrc_not_wire) are their own result, not corruption.
  const std::uint64_t not_wire = a.transport().icrc_not_wire_packets();
  x.sample("rdmadiag_icrc_checks_total", "result=\"bad\"", static_cast<double>(s.icrc.bad - std::min(not_wire, s.icrc.bad)));
  x.sample("rdmadiag_icrc_checks_total", "result=\"not_wire\"", static_cast<double>(not_wire));
  x.sample("rdmadiag_icrc_checks_total", "result=\"unverifiable\"", static_cast<double>(s.icrc.unverifiable));
  x.family("rdmadiag_queue_pairs", "gauge", "Distinct queue pairs seen.");
  x.sample("rdmadiag_queue_pairs", "", static_cast<double>(s.queue_pairs()));
  x.family("rdmadiag_anomalies_total", "counter", "Anomalies found by the analysis, by kind.");
  const AnomalyLog& log = a.anomalies();
  for (std::size_t k = 0; k < static_cast<std::size_t>(AnomalyKind::count_); ++k)
    x.sample("rdmadiag_anomalies_total", "kind=\"" + std::string(to_string(static_cast<AnomalyKind>(k))) + "\"",
             static_cast<double>(log.count(static_cast<AnomalyKind>(k))));
  if (a.pfc().any()) pause_metrics(x, a.pfc());
  if (a.congestion().any()) congestion_metrics(x, a.congestion());
}

// Per-flow series: the first max_flow_series flows by appearance keep
// their own (stable across scrapes); the others are summed into one,
// counted in aggregated.
std::vector<Series> flow_series(const MetricsInput& in, std::size_t& aggregated) {
  std::vector<Series> series;
  Series other;
  other.labels = "flow=\"other\",qp=\"\",src=\"\",dst=\"\",transport=\"\"";
  for (const FlowDetail& d : in.tally->flows()) {
    if (series.size() < in.max_flow_series) {
      char qp[16];
      std::snprintf(qp, sizeof qp, "0x%06x", d.dest_qp);
      series.push_back({"flow=\"" + std::to_string(d.flow) + "\",qp=\"" + qp + "\",src=\"" + escape_label(d.src) +
                            "\",dst=\"" + escape_label(d.dst) + "\",transport=\"" + escape_label(d.transport) + "\"",
                        d.counters});
    } else {
      other.counters.add(d.counters);
      ++aggregated;
    }
  }
  aggregated += in.tally->flows_not_detailed();
  other.counters.add(in.tally->not_detailed());
  if (aggregated) series.push_back(other);
  return series;
}

void flow_metrics(Exposition& x, const std::vector<Series>& series) {
  struct Counter {
    const char* name;
    const char* help;
    std::uint64_t FlowCounters::*field;
  };
  static const Counter kCounters[] = {
      {"rdmadiag_flow_packets_total", "RDMA transport packets of the flow (one direction to one QP).", &FlowCounters::packets},
      {"rdmadiag_flow_bytes_total", "Wire bytes of the flow.", &FlowCounters::bytes},
      {"rdmadiag_psn_gaps_total", "PSN gaps (packets lost before the capture point).", &FlowCounters::psn_gaps},
      {"rdmadiag_psn_missing_total", "PSNs missing in the gaps.", &FlowCounters::psn_missing},
      {"rdmadiag_psn_duplicates_total", "Duplicate PSNs.", &FlowCounters::duplicates},
      {"rdmadiag_psn_out_of_order_total", "Packets that arrived after a later PSN.", &FlowCounters::out_of_order},
      {"rdmadiag_retransmissions_total", "Packets resent (go-back-N).", &FlowCounters::retransmissions},
      {"rdmadiag_icrc_bad_total", "Packets with a bad ICRC.", &FlowCounters::icrc_bad},
      {"rdmadiag_ecn_ce_total", "Packets marked ECN Congestion Experienced.", &FlowCounters::ecn_ce},
      {"rdmadiag_cnp_total", "RoCEv2 Congestion Notification Packets.", &FlowCounters::cnp},
      {"rdmadiag_acks_total", "ACKs.", &FlowCounters::acks},
      {"rdmadiag_rnr_naks_total", "RNR NAKs (receiver not ready).", &FlowCounters::rnr_naks},
  };
  for (const Counter& c : kCounters) {
    x.family(c.name, "counter", c.help);
    for (const Series& s : series) x.sample(c.name, s.labels, static_cast<double>(s.counters.*(c.field)));
  }
  x.family("rdmadiag_naks_total", "counter", "NAKs by NAK code.");
  for (const Series& s : series)
    for (std::size_t k = 0; k < s.counters.naks.size(); ++k)
      x.sample("rdmadiag_naks_total", join(s.labels, "code=\"" + std::string(nak_code_name(k)) + "\""),
               static_cast<double>(s.counters.naks[k]));
  x.family("rdmadiag_wire_latency_seconds", "histogram",
           "Request to response at the capture point, on the flow carrying the response.");
  for (const Series& s : series) {
    const LatencyHistogram& h = s.counters.latency;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const std::string le = i < kLatencyBucketsUs.size() ? number(kLatencyBucketsUs[i] * 1e-6) : "+Inf";
      x.sample("rdmadiag_wire_latency_seconds_bucket", join(s.labels, "le=\"" + le + "\""), static_cast<double>(cumulative));
    }
    x.sample("rdmadiag_wire_latency_seconds_sum", s.labels, h.sum_us * 1e-6);
    x.sample("rdmadiag_wire_latency_seconds_count", s.labels, static_cast<double>(h.count));
  }
}

void source_metrics(Exposition& x, const MetricsInput& in) {
  x.family("rdmadiag_capture_received_total", "counter", "Packets the capture source received (libpcap ps_recv).");
  for (const auto& s : in.sources)
    if (s.known) x.sample("rdmadiag_capture_received_total", "source=\"" + escape_label(s.source) + "\"", static_cast<double>(s.received));
  x.family("rdmadiag_kernel_drops_total", "counter", "Packets the kernel dropped (buffer full: rdmadiag too slow).");
  for (const auto& s : in.sources)
    if (s.known) x.sample("rdmadiag_kernel_drops_total", "source=\"" + escape_label(s.source) + "\"", static_cast<double>(s.dropped));
  x.family("rdmadiag_interface_drops_total", "counter", "Packets the interface or driver dropped.");
  for (const auto& s : in.sources)
    if (s.known) x.sample("rdmadiag_interface_drops_total", "source=\"" + escape_label(s.source) + "\"", static_cast<double>(s.if_dropped));
  x.family("rdmadiag_packets_not_analysed_total", "counter",
           "Packets captured and written but not analysed: the analysis fell behind and its queue was full.");
  x.sample("rdmadiag_packets_not_analysed_total", "", static_cast<double>(in.not_analysed));
  x.family("rdmadiag_capture_running", "gauge", "1 while the capture runs, 0 once it has stopped.");
  x.sample("rdmadiag_capture_running", "", in.running ? 1 : 0);
}

}  // namespace

std::string render_metrics(const MetricsInput& in) {
  Exposition x;
  if (in.analyzer) analyzer_metrics(x, *in.analyzer);
  if (in.tally) {
    std::size_t aggregated = 0;
    const std::vector<Series> series = flow_series(in, aggregated);
    x.family("rdmadiag_metrics_flow_series_limit", "gauge", "Most flows exported with their own labels (--metrics-max-flows).");
    x.sample("rdmadiag_metrics_flow_series_limit", "", static_cast<double>(in.max_flow_series));
    x.family("rdmadiag_metrics_flows_aggregated", "gauge", "Flows over the limit, summed into flow=\"other\".");
    x.sample("rdmadiag_metrics_flows_aggregated", "", static_cast<double>(aggregated));
    flow_metrics(x, series);
  }
  if (!in.sources.empty()) source_metrics(x, in);
  return x.str();
}

bool write_metrics_file(const std::string& path, const std::string& text, std::string& error) {
  // The file is replaced whole by a rename: over a device, a FIFO or a
  // directory that would replace the node itself (as root, /dev/null).
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    error = path + " is not a regular file (a metrics file is replaced whole, by a rename)";
    return false;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      error = "cannot write " + tmp;
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::start(const std::string& listen, std::string& error) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    error = "--metrics-listen " + listen + ": expected HOST:PORT (e.g. 127.0.0.1:9464)";
    return false;
  }
  std::string host = listen.substr(0, colon);
  const std::string port_text = listen.substr(colon + 1);
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(port_text, &used);
    if (used != port_text.size() || port > 65535) throw std::out_of_range("port");
  } catch (...) {
    error = "--metrics-listen " + listen + ": bad port " + port_text;
    return false;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "127.0.0.1";
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int family = AF_INET;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&addr); inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    addr_len = sizeof(sockaddr_in);
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr); inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    addr_len = sizeof(sockaddr_in6);
    family = AF_INET6;
  } else {
    error = "--metrics-listen " + listen + ": " + host + " is not an IP address";
    return false;
  }
  fd_ = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error = std::string("metrics socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 || ::listen(fd_, 16) != 0) {
    error = "--metrics-listen " + listen + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  port_ = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  thread_ = std::thread([this] { serve(); });
  return true;
}

void MetricsServer::set_body(std::string body) {
  std::lock_guard<std::mutex> lock(mutex_);
  body_ = std::move(body);
}

void MetricsServer::stop() {
  if (fd_ < 0) return;
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  fd_ = -1;
}

namespace {
void send_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}
}  // namespace

void MetricsServer::serve() {
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    timeval tv{2, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    // Read the request head (up to the blank line); only its first line matters.
    std::string req;
    char buf[1024];
    while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos && req.size() < 8192) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<std::size_t>(n));
    }
    const std::string line = req.substr(0, req.find_first_of("\r\n"));
    std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
    const bool head = line.rfind("HEAD ", 0) == 0;
    if (line.rfind("GET ", 0) != 0 && !head) {
      status = "405 Method Not Allowed";
      type = "text/plain";
      body = "only GET /metrics\n";
    } else {
      const std::string target = line.substr(line.find(' ') + 1, line.find(' ', line.find(' ') + 1) - line.find(' ') - 1);
      if (target == "/metrics" || target.rfind("/metrics?", 0) == 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        body = body_;
        ++scrapes_;
      } else if (target == "/") {
        type = "text/html";
        body = "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n";
      } else {
        status = "404 Not Found";
        type = "text/plain";
        body = "not found: try /metrics\n";
      }
    }
    send_all(c, "HTTP/1.0 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n" + (head ? std::string() : body));
    ::shutdown(c, SHUT_WR);
    ::close(c);
  }
}

}  // namespace rdmadiag::exporters

namespace rdmadiag::exporters {

std::string render_perftest_metrics(const Json& report) {
  Exposition x;
  const std::string test = report.contains("test_info") ? report["test_info"].value("test", "") : "";
  const std::string role = report.contains("test_info") ? report["test_info"].value("role", "") : "";
  const std::string device = report.contains("test_info") && report["test_info"].value("device", Json()).is_string()
                                 ? report["test_info"]["device"].get<std::string>()
                                 : "";
  const std::string base = "test=\"" + escape_label(test) + "\",role=\"" + escape_label(role) + "\",device=\"" + escape_label(device) + "\"";
  const Json results = report.value("results", Json::array());
  x.family("rdmadiag_perftest_ok", "gauge", "1 when the perftest run had no errors.");
  x.sample("rdmadiag_perftest_ok", base, report.value("ok", false) ? 1 : 0);
  x.family("rdmadiag_perftest_iterations", "gauge", "Iterations measured per message size.");
  for (const Json& r : results)
    x.sample("rdmadiag_perftest_iterations", base + ",size=\"" + std::to_string(r.value("size", 0)) + "\"", r.value("iterations", 0.0));
  x.family("rdmadiag_perftest_latency_seconds", "gauge", "Latency statistics per message size (perftest's t_min, t_typical, ...).");
  for (const Json& r : results) {
    if (!r.contains("statistics")) continue;
    const Json& s = r["statistics"];
    const std::string labels = base + ",size=\"" + std::to_string(r.value("size", 0)) + "\"";
    for (const auto& [stat, key] : {std::pair{"min", "t_min"}, {"median", "t_typical"}, {"mean", "t_avg"}, {"max", "t_max"}, {"stdev", "t_stdev"}})
      if (s.contains(key) && s[key].is_number()) x.sample("rdmadiag_perftest_latency_seconds", labels + ",stat=\"" + stat + "\"", s[key].get<double>() * 1e-6);
    if (s.contains("percentiles"))
      for (const auto& [k, v] : s["percentiles"].items())
        if (v.is_number()) x.sample("rdmadiag_perftest_latency_seconds", labels + ",stat=\"" + escape_label(k) + "\"", v.get<double>() * 1e-6);
  }
  x.family("rdmadiag_perftest_bandwidth_bytes_per_second", "gauge", "Bandwidth per message size.");
  for (const Json& r : results) {
    if (!r.contains("bandwidth")) continue;
    const std::string labels = base + ",size=\"" + std::to_string(r.value("size", 0)) + "\"";
    x.sample("rdmadiag_perftest_bandwidth_bytes_per_second", labels + ",stat=\"peak\"", r["bandwidth"].value("bw_peak", 0.0) * 1048576.0);
    x.sample("rdmadiag_perftest_bandwidth_bytes_per_second", labels + ",stat=\"average\"", r["bandwidth"].value("bw_avg", 0.0) * 1048576.0);
  }
  x.family("rdmadiag_perftest_message_rate_per_second", "gauge", "Messages per second per message size.");
  for (const Json& r : results)
    if (r.contains("bandwidth"))
      x.sample("rdmadiag_perftest_message_rate_per_second", base + ",size=\"" + std::to_string(r.value("size", 0)) + "\"",
               r["bandwidth"].value("msg_rate_mpps", 0.0) * 1e6);
  return x.str();
}

}  // namespace rdmadiag::exporters

namespace rdmadiag::exporters {

namespace {

// Per command kind of an `rdmadiag nvme` report: counters and the latency histogram.
void nvme_command_metrics(Exposition& x, const Json& report) {
  const Json rows = report.value("by_command", Json::array());
  const auto labels = [](const Json& r) {
    return "queue_kind=\"" + escape_label(r.value("queue_kind", "")) + "\",command=\"" + escape_label(r.value("command", "")) + "\"";
  };
  for (const auto& [name, key, help] : {std::tuple{"rdmadiag_nvme_commands_total", "commands", "NVMe commands submitted (RDMA resends once)."},
                                        {"rdmadiag_nvme_completed_total", "completed", "NVMe commands completed."},
                                        {"rdmadiag_nvme_errors_total", "errors", "NVMe commands completed with an error status."}}) {
    x.family(name, "counter", help);
    for (const Json& r : rows) x.sample(name, labels(r), r.value(key, 0.0));
  }
  x.family("rdmadiag_nvme_command_latency_seconds", "histogram",
           "Submit to completion at the capture point; buckets: 4 per octave, upper bounds.");
  for (const Json& r : rows) {
    const Json& h = r["histogram"];
    double cumulative = 0;
    for (std::size_t i = 0; i < h["counts"].size(); ++i) {
      cumulative += h["counts"][i].get<double>();
      x.sample("rdmadiag_nvme_command_latency_seconds_bucket",
               labels(r) + ",le=\"" + number(h["le_us"][i].get<double>() * 1e-6) + "\"", cumulative);
    }
    x.sample("rdmadiag_nvme_command_latency_seconds_bucket", labels(r) + ",le=\"+Inf\"", cumulative);
    x.sample("rdmadiag_nvme_command_latency_seconds_sum", labels(r), (r["latency_us"].is_object() ? r["latency_us"].value("mean", 0.0) : 0.0) * cumulative * 1e-6);
    x.sample("rdmadiag_nvme_command_latency_seconds_count", labels(r), cumulative);
  }
}

// Per NVMe queue (the first kMaxQueueSeries; the rest counted in a gauge).
void nvme_queue_metrics(Exposition& x, const Json& report) {
  constexpr std::size_t kMaxQueueSeries = 100;
  const Json queues = report.value("queues", Json::array());
  const auto labels = [](const Json& q) {
    return "host=\"" + escape_label(q.value("host", "")) + "\",controller=\"" + escape_label(q.value("controller", "")) +
           "\",qid=\"" + (q["qid"].is_null() ? std::string("unknown") : q["qid"].dump()) + "\",first_frame=\"" +
           q["first_frame"].dump() + "\"";
  };
  for (const auto& [name, type, key, help] :
       {std::tuple{"rdmadiag_nvme_queue_completed_total", "counter", "completed", "Commands completed on the queue."},
        {"rdmadiag_nvme_queue_unanswered", "gauge", "unanswered", "Commands with no completion in the capture."},
        {"rdmadiag_nvme_queue_max_outstanding", "gauge", "max_outstanding", "Most commands outstanding at once."},
        {"rdmadiag_nvme_queue_read_bytes_total", "counter", "read_bytes", "Data bytes of completed reads."},
        {"rdmadiag_nvme_queue_write_bytes_total", "counter", "write_bytes", "Data bytes of completed writes."},
        {"rdmadiag_nvme_queue_transport_events_total", "counter", "transport_events",
         "PSN gaps, retransmissions, duplicates, out of order, CNPs, NAKs, RNR NAKs on the queue's queue pairs."}}) {
    x.family(name, type, help);
    for (std::size_t i = 0; i < queues.size() && i < kMaxQueueSeries; ++i) x.sample(name, labels(queues[i]), queues[i].value(key, 0.0));
  }
  x.family("rdmadiag_nvme_queue_series_dropped", "gauge", "NVMe queues past the series cap (not listed).");
  x.sample("rdmadiag_nvme_queue_series_dropped", "", queues.size() > kMaxQueueSeries ? static_cast<double>(queues.size() - kMaxQueueSeries) : 0);
}

}  // namespace

std::string render_nvme_metrics(const Json& report) {
  Exposition x;
  const Json totals = report.value("totals", Json::object());
  for (const auto& [name, type, key, help] :
       {std::tuple{"rdmadiag_nvme_unanswered_commands", "gauge", "unanswered", "Commands with no completion in the capture."},
        {"rdmadiag_nvme_unmatched_responses_total", "counter", "unmatched_responses", "Completions of no outstanding command."},
        {"rdmadiag_nvme_data_packets_total", "counter", "data_packets", "RDMA READ/WRITE packets matched to a command's keyed SGL."},
        {"rdmadiag_nvme_unmatched_data_packets_total", "counter", "unmatched_data_packets",
         "RDMA READ/WRITE packets on NVMe queues matching no outstanding command."},
        {"rdmadiag_nvme_invalidate_mismatches_total", "counter", "invalidate_mismatches",
         "SEND with Invalidate naming another key than the command's keyed SGL."}}) {
    x.family(name, type, help);
    x.sample(name, "", totals.value(key, 0.0));
  }
  nvme_command_metrics(x, report);
  nvme_queue_metrics(x, report);
  return x.str();
}

}  // namespace rdmadiag::exporters
