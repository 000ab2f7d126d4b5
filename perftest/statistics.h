// Latency statistics: exact floating-point figures, and a faithful re-computation of
// the figures linux-rdma perftest prints (so the classic table columns can be compared
// number for number with ib_*_lat, quirks included).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace rdmadiag::perftest {

struct Histogram {
  double low_usec = 0;         // left edge of the first bin
  double bin_width_usec = 0;   // all bins have this width
  std::vector<std::uint64_t> counts;
};

struct Percentile {
  double quantile;   // 0.5, 0.9, 0.99, 0.999, 0.9999
  double usec;
};

// Statistics over all (post-warm-up) samples, nothing dropped, nothing truncated.
struct LatencyStatistics {
  std::size_t sample_count = 0;
  double min_usec = 0;
  double max_usec = 0;
  double median_usec = 0;    // "t_typical"
  double mean_usec = 0;
  double stdev_usec = 0;     // population standard deviation
  std::vector<Percentile> percentiles;
  Histogram histogram;
};

// The seven numbers of perftest's latency table, computed the way perftest 4.5 .. 6.x does.
struct PerftestFigures {
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p99_9 = 0;
};

// Nearest-rank percentile (the smallest sample with at least q of the samples <= it).
// sorted_usec must be sorted ascending and non-empty.
double nearest_rank_percentile(const std::vector<double>& sorted_usec, double quantile);

// samples_usec: one latency per iteration, already converted to microseconds (and halved
// for the ping-pong tests). Throws std::invalid_argument on an empty set.
LatencyStatistics compute_statistics(std::vector<double> samples_usec, std::size_t histogram_bins = 32);

// Re-computes perftest's figures from raw timestamp-counter deltas.
//   deltas_cycles:     tposted[i+1]-tposted[i], i.e. iterations-1 values;
//   cycles_per_usec:   the counter frequency in MHz;
//   round_trip_factor: 2 for WRITE/SEND (perftest halves), 1 for READ/ATOMIC.
// Reproduces on purpose: the two largest deltas are excluded from avg/median/stdev, but the
// printed t_max is the second largest delta; t_typical is a median in integer cycles;
// every deviation goes through an int before squaring (so sub-microsecond deviations vanish);
// the 99% and 99.9% "percentiles" index delta[ceil(n*q)] with n = count-2, which for small
// runs is the second largest delta again. Needs at least 3 deltas (std::invalid_argument).
PerftestFigures perftest_figures(std::vector<std::uint64_t> deltas_cycles, double cycles_per_usec,
                                 int round_trip_factor);

// perftest's bandwidth figures (print_report_bw): MB = 2^20 bytes.
struct BandwidthFigures {
  double bw_peak_mb_per_sec = 0;  // 0 when no peak is wanted (-N), as perftest prints
  double bw_avg_mb_per_sec = 0;
  double msg_rate_mpps = 0;
};

// posted[k]: counter value at the (k+1)-th post over all QPs; completed[k]: counter value when
// the (k+1)-th operation was retired by a signalled completion, 0 for operations retired
// implicitly (unsignalled). Average over first post .. last completion; peak = the best
// (completed[j] - posted[i]) / (j - i + 1) over signalled j >= i. Both vectors the same size.
BandwidthFigures perftest_bandwidth(const std::vector<std::uint64_t>& posted, const std::vector<std::uint64_t>& completed,
                                    std::uint64_t size, double cycles_per_usec, bool want_peak);

// rdmadiag's minimum bandwidth over a sliding window (not a perftest figure): points are
// (counter value, operations retired by then), ascending, the first the start (first post, 0).
// For every point the window reaches back to the latest earlier point at least window_cycles
// before it; the result is the smallest (retired difference * size) / (time difference) in MB/s,
// or 0 when the run is shorter than one window.
double min_window_bandwidth(const std::vector<std::uint64_t>& times, const std::vector<std::uint64_t>& retired,
                            std::uint64_t size, double cycles_per_usec, std::uint64_t window_cycles);

// perftest's CQ moderation (force_dependencies in perftest_parameters.c): every cq_mod-th send
// is signalled; above 8 KiB every one unless -Q was given (not for -a, -e or UD); at most -t.
// With -l N > 1 and no -Q it is N (perftest: "CQ moderation will be the size of the post list").
int perftest_cq_mod(int requested, bool requested_given, std::uint64_t size, bool all_sizes, bool use_events, bool ud,
                    int tx_depth, int post_list = 1);

}  // namespace rdmadiag::perftest
