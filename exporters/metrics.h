// Prometheus text exposition (format 0.0.4) of an analysis run: what
// `capture --metrics-listen` serves on /metrics while it captures, and what
// `--metrics-file` writes for node exporter's textfile collector. Names follow
// Prometheus' conventions (rdmadiag_ prefix, _total counters, base units:
// seconds, bytes). Per-flow series are capped (the first flows seen keep their
// own series, the rest are summed into flow="other"), and the cap is exported.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "decode/analyzer.h"
#include "exporters/flow_tally.h"

namespace rdmadiag::exporters {

struct SourceDrops {
  std::string source;
  bool known = false;
  std::uint64_t received = 0, dropped = 0, if_dropped = 0;
};

struct MetricsInput {
  const FlowTally* tally = nullptr;
  const decode::Analyzer* analyzer = nullptr;  // summary and anomaly counts
  std::vector<SourceDrops> sources;            // capture only
  std::uint64_t not_analysed = 0;              // capture only: written, but the full analysis queue could not take them
  std::size_t max_flow_series = 100;
  bool running = false;                        // capture in progress (rdmadiag_up-style gauge)
};

std::string render_metrics(const MetricsInput& in);

// A label value in the exposition format (backslash, double quote and newline escaped).
std::string escape_label(const std::string& v);

// Writes `text` to PATH atomically (a temporary file renamed over it), so the
// textfile collector never reads half a file. False and `error` on failure.
bool write_metrics_file(const std::string& path, const std::string& text, std::string& error);

// A tiny blocking HTTP/1.0 server on its own thread: GET /metrics answers the
// latest text given to set_body(); anything else is 404. One connection at a
// time, each with a short receive timeout, so a stuck client cannot hold it.
class MetricsServer {
 public:
  MetricsServer() = default;
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // listen: "HOST:PORT" (HOST an IPv4 address; "[::1]:PORT" for IPv6; port 0 picks one).
  bool start(const std::string& listen, std::string& error);
  void set_body(std::string body);
  void stop();
  std::uint16_t port() const { return port_; }
  std::uint64_t scrapes() const { return scrapes_.load(); }

 private:
  void serve();
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> scrapes_{0};
  std::mutex mutex_;
  std::string body_;
};

}  // namespace rdmadiag::exporters

namespace rdmadiag::exporters {
// Gauges of a perftest report (per size: latency statistics in seconds, or
// bandwidth in bytes per second), for the textfile collector.
std::string render_perftest_metrics(const nlohmann::ordered_json& report);
}  // namespace rdmadiag::exporters

namespace rdmadiag::exporters {
// Counters, gauges and per-command latency histograms of an `rdmadiag nvme`
// JSON report (nvme_schema_version 1.2), for the textfile collector.
std::string render_nvme_metrics(const nlohmann::ordered_json& report);
}  // namespace rdmadiag::exporters
