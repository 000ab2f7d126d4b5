// The all-pairs matrix of `rdmadiag-mesh` (issue 19): hosts, one result per tested pair,
// and the statistical findings (perftest/mesh_outliers.h). Plain data, shared by the MPI
// program and the exporters (exporters/mesh_report.h); docs/mesh.md describes the JSON.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmadiag::exporters {

struct MeshHost {
  int rank = 0;
  std::string hostname;
  std::string device;  // RDMA device the host tested with ("" in --control-only runs)
  std::string gid;
};

enum class MeshPairStatus { Ok, Failed, TimedOut, NotRun };
const char* mesh_status_name(MeshPairStatus status);  // "ok", "failed", "timeout", "not_run"

// The client's latency figures of one pair (one-way, perftest's halved ping-pong), microseconds.
struct MeshLatency {
  std::uint64_t samples = 0;
  double min_usec = 0, median_usec = 0, mean_usec = 0, max_usec = 0, stdev_usec = 0, p99_usec = 0, p99_9_usec = 0;
};

// Fixed latency buckets (upper bounds, microseconds) so counts add up across sweeps into a
// Prometheus histogram; counts[i] is the number of samples in (upper[i-1], upper[i]], the
// last count the samples above every bound.
struct MeshBuckets {
  std::vector<std::uint64_t> counts;  // kMeshBucketBoundsUsec.size() + 1 entries, or empty
  double sum_usec = 0;
  std::uint64_t count = 0;
};
inline constexpr double kMeshBucketBoundsUsec[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
MeshBuckets mesh_buckets(const std::vector<double>& samples_usec);
void add_buckets(MeshBuckets& into, const MeshBuckets& more);

struct MeshPairResult {
  int client = 0, server = 0;  // ranks; client < server
  int round = 0;               // index in the sweep's schedule
  MeshPairStatus status = MeshPairStatus::NotRun;
  std::string error;           // why, when not ok (each side's message)
  std::optional<MeshLatency> latency;        // latency tests
  std::optional<double> bw_avg_mb_per_sec;   // bandwidth tests (MB = 2^20 bytes, as perftest)
  MeshBuckets buckets;                       // latency tests: this sweep's samples
};

struct MeshRunInfo {
  std::string test = "write-lat";  // perftest test name, or "control-only"
  std::uint64_t size = 2;
  std::uint64_t iterations = 1000;
  int round_timeout_s = 30;
  std::size_t rounds = 0;          // rounds run per sweep (after sampling)
  std::size_t rounds_total = 0;    // rounds of the full tournament
  std::uint64_t sweep = 0;         // 0-based index of this sweep (continuous mode)
  std::string start_time;          // ISO 8601 UTC
  double k = 5.0;                  // outlier threshold in robust standard deviations
  double min_relative_spread = 0.1;
};

struct MeshBadHost {
  int rank = 0;
  std::size_t bad_pairs = 0, measured_pairs = 0;
  double host_median = 0;     // median of its pairs' values (ok pairs only; 0 if none)
  double baseline_median = 0; // pairs not involving it
};

struct MeshBadLink {
  int client = 0, server = 0;
  std::string reason;         // "failed", "timeout" or "slow"
  double value = 0;
};

struct MeshFindings {
  std::string metric;           // "median_latency_usec" or "bw_avg_mb_per_sec"
  bool higher_is_worse = true;
  bool evaluated = false;       // false: too few hosts or results (note says why)
  std::string note;
  double median = 0, scale = 0, threshold = 0;  // of the pairs not involving a bad host
  std::vector<MeshBadHost> bad_hosts;
  std::vector<MeshBadLink> bad_links;           // pairs not explained by a bad host
};

struct MeshReport {
  MeshRunInfo info;
  std::vector<MeshHost> hosts;        // by rank
  std::vector<MeshPairResult> pairs;  // one per tested pair
  MeshFindings findings;
};

}  // namespace rdmadiag::exporters
