// Prometheus text (exposition format 0.0.4) of `rdmadiag-mesh --interval`: per pair a
// latency histogram and probe/failure counters that accumulate over the sweeps, the
// last sweep's median (or bandwidth) as a gauge, and the outlier verdicts as 0/1 gauges
// an alert rule can fire on (docs/mesh.md has one).
#include <cstdio>
#include <sstream>

#include "exporters/mesh_report.h"
#include "exporters/metrics.h"

namespace rdmadiag::exporters {

namespace {

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

void MeshMetrics::add_sweep(const MeshReport& r) {
  ++sweeps_;
  test_ = r.info.test;
  for (const auto& h : r.hosts) hosts_[h.rank] = {mesh_host_label(r, h.rank), false};
  for (const auto& b : r.findings.bad_hosts) hosts_[b.rank].second = true;
  for (auto& [key, s] : pairs_) s.outlier = false;
  for (const auto& p : r.pairs) {
    if (p.status == MeshPairStatus::NotRun) continue;
    auto& s = pairs_[{p.client, p.server}];
    s.client = mesh_host_label(r, p.client);
    s.server = mesh_host_label(r, p.server);
    ++s.probes;
    if (p.status == MeshPairStatus::Failed) ++s.failed;
    if (p.status == MeshPairStatus::TimedOut) ++s.timeouts;
    add_buckets(s.latency, p.buckets);
    s.last_median_usec = p.latency ? std::optional<double>(p.latency->median_usec) : std::nullopt;
    s.last_bw_mb_per_sec = p.bw_avg_mb_per_sec;
  }
  for (const auto& l : r.findings.bad_links)
    if (auto it = pairs_.find({l.client, l.server}); it != pairs_.end()) it->second.outlier = true;
}

std::string MeshMetrics::render() const {
  std::ostringstream o;
  auto labels = [](const PairSeries& s) {
    return "client=\"" + escape_label(s.client) + "\",server=\"" + escape_label(s.server) + "\"";
  };
  header(o, "rdmadiag_mesh_sweeps_total", "counter", "Sweeps of the mesh completed.");
  o << "rdmadiag_mesh_sweeps_total{test=\"" << escape_label(test_) << "\"} " << sweeps_ << '\n';
  header(o, "rdmadiag_mesh_probes_total", "counter", "Tests run per pair.");
  for (const auto& [k, s] : pairs_) o << "rdmadiag_mesh_probes_total{" << labels(s) << "} " << s.probes << '\n';
  header(o, "rdmadiag_mesh_probe_failures_total", "counter", "Tests of the pair that failed or timed out.");
  for (const auto& [k, s] : pairs_) {
    o << "rdmadiag_mesh_probe_failures_total{" << labels(s) << ",reason=\"failed\"} " << s.failed << '\n';
    o << "rdmadiag_mesh_probe_failures_total{" << labels(s) << ",reason=\"timeout\"} " << s.timeouts << '\n';
  }
  header(o, "rdmadiag_mesh_latency_seconds", "histogram", "One-way latency samples of the pair (all sweeps).");
  for (const auto& [k, s] : pairs_) {
    if (s.latency.counts.empty()) continue;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < std::size(kMeshBucketBoundsUsec); ++i) {
      cumulative += s.latency.counts[i];
      o << "rdmadiag_mesh_latency_seconds_bucket{" << labels(s) << ",le=\"" << num(kMeshBucketBoundsUsec[i] * 1e-6) << "\"} "
        << cumulative << '\n';
    }
    o << "rdmadiag_mesh_latency_seconds_bucket{" << labels(s) << ",le=\"+Inf\"} " << s.latency.count << '\n';
    o << "rdmadiag_mesh_latency_seconds_sum{" << labels(s) << "} " << num(s.latency.sum_usec * 1e-6) << '\n';
    o << "rdmadiag_mesh_latency_seconds_count{" << labels(s) << "} " << s.latency.count << '\n';
  }
  header(o, "rdmadiag_mesh_latency_median_seconds", "gauge", "Median one-way latency of the pair in the last sweep.");
  for (const auto& [k, s] : pairs_)
    if (s.last_median_usec) o << "rdmadiag_mesh_latency_median_seconds{" << labels(s) << "} " << num(*s.last_median_usec * 1e-6) << '\n';
  header(o, "rdmadiag_mesh_bandwidth_bytes_per_second", "gauge", "Average bandwidth of the pair in the last sweep.");
  for (const auto& [k, s] : pairs_)
    if (s.last_bw_mb_per_sec)
      o << "rdmadiag_mesh_bandwidth_bytes_per_second{" << labels(s) << "} " << num(*s.last_bw_mb_per_sec * 1048576.0) << '\n';
  header(o, "rdmadiag_mesh_link_outlier", "gauge", "1 when the last sweep named the pair a bad link.");
  for (const auto& [k, s] : pairs_) o << "rdmadiag_mesh_link_outlier{" << labels(s) << "} " << (s.outlier ? 1 : 0) << '\n';
  header(o, "rdmadiag_mesh_host_outlier", "gauge", "1 when the last sweep named the host bad with most of its peers.");
  for (const auto& [rank, h] : hosts_) o << "rdmadiag_mesh_host_outlier{host=\"" << escape_label(h.first) << "\"} " << (h.second ? 1 : 0) << '\n';
  return o.str();
}

}  // namespace rdmadiag::exporters
