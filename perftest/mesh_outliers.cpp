// Median + k*MAD outliers of a mesh (see mesh_outliers.h for the method and why).
#include "perftest/mesh_outliers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace rdmadiag::perftest {

using exporters::MeshBadHost;
using exporters::MeshBadLink;
using exporters::MeshFindings;
using exporters::MeshPairResult;
using exporters::MeshPairStatus;

namespace {

constexpr double kMadToSigma = 1.4826;  // MAD of a normal distribution x this = its sigma

struct Baseline {
  double median = 0, scale = 0;
  bool valid = false;
};

Baseline baseline_of(const std::vector<double>& values, const OutlierOptions& o) {
  Baseline b;
  if (values.empty()) return b;
  b.median = median_of(values);
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::fabs(v - b.median));
  b.scale = std::max(kMadToSigma * median_of(deviations), o.min_relative_spread * std::fabs(b.median));
  b.valid = b.scale > 0;
  return b;
}

bool involves(const MeshPairResult& p, int host) { return p.client == host || p.server == host; }
bool tested(const MeshPairResult& p) { return p.status != MeshPairStatus::NotRun; }

// Beyond the baseline in the bad direction.
// A host's slow pairs count against it when each is at least this share of its
// slowest pair's excess over the others' median.
constexpr double kHostEvenShare = 0.25;

bool is_worse(double value, const Baseline& b, double k, bool higher_is_worse) {
  return higher_is_worse ? value > b.median + k * b.scale : value < b.median - k * b.scale;
}

bool involves_any(const MeshPairResult& p, const std::vector<MeshBadHost>& hosts) {
  return std::any_of(hosts.begin(), hosts.end(), [&](const MeshBadHost& h) { return involves(p, h.rank); });
}

// A host's pairs against the pairs not involving it, leaving out the hosts already named bad
// (so a dead host's failures do not count against its peers).
MeshBadHost judge_host(int host, const std::vector<MeshPairResult>& pairs, const std::vector<MeshBadHost>& named,
                       const OutlierOptions& o, bool higher_is_worse) {
  MeshBadHost h;
  h.rank = host;
  std::vector<double> others;
  std::size_t others_ok = 0;
  for (const auto& p : pairs) {
    if (involves(p, host) || involves_any(p, named) || p.status != MeshPairStatus::Ok) continue;
    ++others_ok;
    if (auto v = mesh_pair_value(p)) others.push_back(*v);
  }
  // Without one working pair elsewhere the host cannot be told from its peers (when every
  // pair fails the cause is common: no device, wrong options), so it is not named.
  if (others_ok == 0) return h;
  const Baseline base = baseline_of(others, o);
  if (!base.valid && !others.empty()) return h;
  h.baseline_median = base.median;
  std::vector<double> own, excess;  // excess: of each slow pair over the baseline
  for (const auto& p : pairs) {
    if (!involves(p, host) || !tested(p) || involves_any(p, named)) continue;
    ++h.measured_pairs;
    const auto v = mesh_pair_value(p);
    if (v) own.push_back(*v);
    if (p.status != MeshPairStatus::Ok)
      ++h.bad_pairs;
    else if (v && base.valid && is_worse(*v, base, o.k, higher_is_worse))
      excess.push_back(std::abs(*v - base.median));
  }
  // A slow host slows every pair it is in by about as much: a slow pair far below
  // the host's worst is noise beside one bad link, not the host (with 3 hosts the
  // baseline is a single pair, and one noisy pair made a bad link a bad host).
  const double worst = excess.empty() ? 0 : *std::max_element(excess.begin(), excess.end());
  for (double e : excess)
    if (e >= kHostEvenShare * worst) ++h.bad_pairs;
  if (!own.empty()) h.host_median = median_of(own);
  return h;
}

bool is_bad_host(const MeshBadHost& h) { return h.measured_pairs >= 2 && 2 * h.bad_pairs > h.measured_pairs; }

// Names bad hosts one at a time, the worst (largest bad fraction) first, then judges the rest again
// without it: a dead host makes each of its peers fail once, which must not name them too.
std::vector<MeshBadHost> find_bad_hosts(int hosts, const std::vector<MeshPairResult>& pairs, const OutlierOptions& o,
                                        bool higher_is_worse) {
  std::vector<MeshBadHost> named;
  for (;;) {
    std::optional<MeshBadHost> worst;
    for (int h = 0; h < hosts; ++h) {
      if (std::any_of(named.begin(), named.end(), [&](const MeshBadHost& b) { return b.rank == h; })) continue;
      const MeshBadHost judged = judge_host(h, pairs, named, o, higher_is_worse);
      if (!is_bad_host(judged)) continue;
      const auto fraction = [](const MeshBadHost& b) { return static_cast<double>(b.bad_pairs) / static_cast<double>(b.measured_pairs); };
      if (!worst || fraction(judged) > fraction(*worst)) worst = judged;
    }
    if (!worst) return named;
    named.push_back(*worst);
  }
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of an empty set");
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

std::optional<double> mesh_pair_value(const MeshPairResult& pair) {
  if (pair.status != MeshPairStatus::Ok) return std::nullopt;
  if (pair.latency) return pair.latency->median_usec;
  return pair.bw_avg_mb_per_sec;
}

MeshFindings find_mesh_outliers(int hosts, const std::vector<MeshPairResult>& pairs, const OutlierOptions& o) {
  MeshFindings f;
  const bool bandwidth = std::any_of(pairs.begin(), pairs.end(), [](const auto& p) { return p.bw_avg_mb_per_sec.has_value(); });
  f.metric = bandwidth ? "bw_avg_mb_per_sec" : "median_latency_usec";
  f.higher_is_worse = !bandwidth;
  if (hosts < 3) {
    f.note = "outliers need at least 3 hosts (with 2 there is nothing to compare a pair with)";
    return f;
  }
  if (std::none_of(pairs.begin(), pairs.end(), [](const auto& p) { return p.status == MeshPairStatus::Ok; })) {
    f.evaluated = true;
    f.note = "every tested pair failed: the cause is common to all hosts (see the pairs' errors); no host or link is singled out";
    return f;
  }
  f.bad_hosts = find_bad_hosts(hosts, pairs, o, f.higher_is_worse);
  auto by_bad_host = [&](const MeshPairResult& p) { return involves_any(p, f.bad_hosts); };
  std::vector<double> rest;
  for (const auto& p : pairs)
    if (!by_bad_host(p))
      if (auto v = mesh_pair_value(p)) rest.push_back(*v);
  const Baseline base = baseline_of(rest, o);
  f.evaluated = true;
  if (base.valid) {
    f.median = base.median;
    f.scale = base.scale;
    f.threshold = f.higher_is_worse ? base.median + o.k * base.scale : base.median - o.k * base.scale;
  } else {
    f.note = "no measured value outside the bad hosts (a --control-only run, or every such pair failed): links were judged by failures alone";
  }
  for (const auto& p : pairs) {
    if (!tested(p) || by_bad_host(p)) continue;
    const auto v = mesh_pair_value(p);
    if (p.status != MeshPairStatus::Ok) {
      f.bad_links.push_back({p.client, p.server, exporters::mesh_status_name(p.status), 0});
    } else if (v && base.valid && is_worse(*v, base, o.k, f.higher_is_worse)) {
      f.bad_links.push_back({p.client, p.server, f.higher_is_worse ? "slow" : "low_bandwidth", *v});
    }
  }
  return f;
}

}  // namespace rdmadiag::perftest
