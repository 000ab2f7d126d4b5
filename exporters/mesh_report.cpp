// JSON, CSV, HTML and Prometheus renderings of a mesh matrix (docs/mesh.md).
#include "exporters/mesh_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "exporters/svg_plot.h"

namespace rdmadiag::exporters {

using nlohmann::ordered_json;

const char* mesh_status_name(MeshPairStatus status) {
  switch (status) {
    case MeshPairStatus::Ok: return "ok";
    case MeshPairStatus::Failed: return "failed";
    case MeshPairStatus::TimedOut: return "timeout";
    case MeshPairStatus::NotRun: return "not_run";
  }
  return "not_run";
}

namespace {

MeshPairStatus status_from_name(const std::string& s) {
  for (auto st : {MeshPairStatus::Ok, MeshPairStatus::Failed, MeshPairStatus::TimedOut})
    if (s == mesh_status_name(st)) return st;
  return MeshPairStatus::NotRun;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

std::string mesh_host_label(const MeshReport& r, int rank) {
  for (const auto& h : r.hosts)
    if (h.rank == rank) return h.hostname + "/" + std::to_string(rank);
  return "?/" + std::to_string(rank);
}

MeshBuckets mesh_buckets(const std::vector<double>& samples_usec) {
  MeshBuckets b;
  constexpr std::size_t n = std::size(kMeshBucketBoundsUsec);
  b.counts.assign(n + 1, 0);
  for (double s : samples_usec) {
    const auto it = std::lower_bound(std::begin(kMeshBucketBoundsUsec), std::end(kMeshBucketBoundsUsec), s);
    ++b.counts[static_cast<std::size_t>(it - std::begin(kMeshBucketBoundsUsec))];
    b.sum_usec += s;
    ++b.count;
  }
  return b;
}

void add_buckets(MeshBuckets& into, const MeshBuckets& more) {
  if (more.counts.empty()) return;
  if (into.counts.empty()) into.counts.assign(more.counts.size(), 0);
  for (std::size_t i = 0; i < into.counts.size() && i < more.counts.size(); ++i) into.counts[i] += more.counts[i];
  into.sum_usec += more.sum_usec;
  into.count += more.count;
}

ordered_json mesh_pair_to_json(const MeshPairResult& p) {
  ordered_json j{{"client", p.client}, {"server", p.server}, {"round", p.round}, {"status", mesh_status_name(p.status)}};
  if (!p.error.empty()) j["error"] = p.error;
  if (p.latency) {
    const auto& l = *p.latency;
    j["latency_usec"] = {{"samples", l.samples}, {"min", l.min_usec},       {"median", l.median_usec},
                         {"mean", l.mean_usec},  {"max", l.max_usec},       {"stdev", l.stdev_usec},
                         {"p99", l.p99_usec},    {"p99_9", l.p99_9_usec}};
  }
  if (p.bw_avg_mb_per_sec) j["bw_avg_mb_per_sec"] = *p.bw_avg_mb_per_sec;
  if (!p.buckets.counts.empty())
    j["histogram"] = {{"upper_bounds_usec", kMeshBucketBoundsUsec}, {"counts", p.buckets.counts}, {"sum_usec", p.buckets.sum_usec}};
  return j;
}

MeshPairResult mesh_pair_from_json(const nlohmann::json& j) {
  MeshPairResult p;
  p.client = j.at("client").get<int>();
  p.server = j.at("server").get<int>();
  p.round = j.at("round").get<int>();
  p.status = status_from_name(j.at("status").get<std::string>());
  if (j.contains("error")) p.error = j["error"].get<std::string>();
  if (j.contains("latency_usec")) {
    const auto& l = j["latency_usec"];
    p.latency = MeshLatency{l.at("samples").get<std::uint64_t>(), l.at("min").get<double>(), l.at("median").get<double>(),
                            l.at("mean").get<double>(),           l.at("max").get<double>(), l.at("stdev").get<double>(),
                            l.at("p99").get<double>(),            l.at("p99_9").get<double>()};
  }
  if (j.contains("bw_avg_mb_per_sec")) p.bw_avg_mb_per_sec = j["bw_avg_mb_per_sec"].get<double>();
  if (j.contains("histogram")) {
    p.buckets.counts = j["histogram"].at("counts").get<std::vector<std::uint64_t>>();
    p.buckets.sum_usec = j["histogram"].at("sum_usec").get<double>();
    for (auto c : p.buckets.counts) p.buckets.count += c;
  }
  return p;
}

namespace {

ordered_json findings_json(const MeshFindings& f) {
  ordered_json j{{"metric", f.metric}, {"higher_is_worse", f.higher_is_worse}, {"evaluated", f.evaluated}};
  if (!f.note.empty()) j["note"] = f.note;
  j["median"] = f.median;
  j["scale"] = f.scale;
  j["threshold"] = f.threshold;
  j["bad_hosts"] = ordered_json::array();
  for (const auto& h : f.bad_hosts)
    j["bad_hosts"].push_back({{"rank", h.rank}, {"bad_pairs", h.bad_pairs}, {"measured_pairs", h.measured_pairs},
                              {"host_median", h.host_median}, {"baseline_median", h.baseline_median}});
  j["bad_links"] = ordered_json::array();
  for (const auto& l : f.bad_links)
    j["bad_links"].push_back({{"client", l.client}, {"server", l.server}, {"reason", l.reason}, {"value", l.value}});
  return j;
}

}  // namespace

ordered_json render_mesh_json(const MeshReport& r) {
  const auto& i = r.info;
  ordered_json j{{"schema", "rdmadiag-mesh"}, {"schema_version", kMeshSchemaVersion}};
  j["run"] = {{"test", i.test},         {"size", i.size},     {"iterations", i.iterations},
              {"round_timeout_s", i.round_timeout_s}, {"rounds", i.rounds}, {"rounds_total", i.rounds_total},
              {"sweep", i.sweep},       {"start_time", i.start_time}, {"k", i.k},
              {"min_relative_spread", i.min_relative_spread}};
  j["hosts"] = ordered_json::array();
  for (const auto& h : r.hosts) j["hosts"].push_back({{"rank", h.rank}, {"hostname", h.hostname}, {"device", h.device}, {"gid", h.gid}});
  j["pairs"] = ordered_json::array();
  for (const auto& p : r.pairs) j["pairs"].push_back(mesh_pair_to_json(p));
  j["findings"] = findings_json(r.findings);
  return j;
}

std::string render_mesh_csv(const MeshReport& r) {
  std::ostringstream o;
  o << "client_rank,client_host,server_rank,server_host,round,status,samples,min_usec,median_usec,mean_usec,max_usec,"
       "stdev_usec,p99_usec,p99_9_usec,bw_avg_mb_per_sec,verdict\n";
  auto host = [&](int rank) {
    for (const auto& h : r.hosts)
      if (h.rank == rank) return h.hostname;
    return std::string();
  };
  for (const auto& p : r.pairs) {
    std::string verdict;
    for (const auto& b : r.findings.bad_hosts)
      if (b.rank == p.client || b.rank == p.server) verdict = "bad_host_" + std::to_string(b.rank);
    for (const auto& l : r.findings.bad_links)
      if (l.client == p.client && l.server == p.server) verdict = "bad_link";
    o << p.client << ',' << host(p.client) << ',' << p.server << ',' << host(p.server) << ',' << p.round << ','
      << mesh_status_name(p.status) << ',';
    if (p.latency) {
      const auto& l = *p.latency;
      o << l.samples << ',' << number(l.min_usec) << ',' << number(l.median_usec) << ',' << number(l.mean_usec) << ','
        << number(l.max_usec) << ',' << number(l.stdev_usec) << ',' << number(l.p99_usec) << ',' << number(l.p99_9_usec) << ',';
    } else {
      o << ",,,,,,,,";
    }
    o << (p.bw_avg_mb_per_sec ? number(*p.bw_avg_mb_per_sec) : "") << ',' << verdict << '\n';
  }
  return o.str();
}

}  // namespace rdmadiag::exporters
