#include "perftest/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace rdmadiag::perftest {

double nearest_rank_percentile(const std::vector<double>& sorted_usec, double quantile) {
  if (sorted_usec.empty()) throw std::invalid_argument("percentile of an empty sample set");
  const auto n = sorted_usec.size();
  // rank = ceil(q*n), 1-based; clamp so q=0 gives the minimum. The small epsilon keeps
  // q*n that is mathematically an integer (0.99*100) from rounding up to the next rank.
  auto rank = static_cast<std::size_t>(std::ceil(quantile * static_cast<double>(n) - 1e-9));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return sorted_usec[rank - 1];
}

LatencyStatistics compute_statistics(std::vector<double> samples_usec, std::size_t histogram_bins) {
  if (samples_usec.empty()) throw std::invalid_argument("no latency samples");
  std::sort(samples_usec.begin(), samples_usec.end());
  LatencyStatistics s;
  const auto n = samples_usec.size();
  s.sample_count = n;
  s.min_usec = samples_usec.front();
  s.max_usec = samples_usec.back();
  s.median_usec = (n % 2) ? samples_usec[n / 2] : (samples_usec[n / 2 - 1] + samples_usec[n / 2]) / 2;
  // Kahan-free but two-pass: the mean first, then squared deviations about it, which is
  // numerically sound for latency-sized values.
  s.mean_usec = std::accumulate(samples_usec.begin(), samples_usec.end(), 0.0) / static_cast<double>(n);
  double squares = 0;
  for (double v : samples_usec) squares += (v - s.mean_usec) * (v - s.mean_usec);
  s.stdev_usec = std::sqrt(squares / static_cast<double>(n));
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999})
    s.percentiles.push_back({q, nearest_rank_percentile(samples_usec, q)});

  if (histogram_bins == 0) histogram_bins = 1;
  s.histogram.low_usec = s.min_usec;
  const double span = s.max_usec - s.min_usec;
  s.histogram.bin_width_usec = span > 0 ? span / static_cast<double>(histogram_bins) : 1.0;
  s.histogram.counts.assign(span > 0 ? histogram_bins : 1, 0);
  for (double v : samples_usec) {
    auto bin = static_cast<std::size_t>((v - s.min_usec) / s.histogram.bin_width_usec);
    bin = std::min(bin, s.histogram.counts.size() - 1);  // the maximum falls in the last bin
    ++s.histogram.counts[bin];
  }
  return s;
}

namespace {
// C's double->int conversion as x86 performs it (cvttsd2si): truncation toward zero, and
// INT_MIN for anything out of range. Spelled out because out-of-range is undefined in C++.
int to_int_like_x86(double v) {
  if (!(v > -2147483649.0 && v < 2147483648.0)) return std::numeric_limits<int>::min();
  return static_cast<int>(v);
}
}  // namespace

PerftestFigures perftest_figures(std::vector<std::uint64_t> deltas_cycles, double cycles_per_usec,
                                 int round_trip_factor) {
  if (deltas_cycles.size() < 3) throw std::invalid_argument("perftest figures need at least 3 deltas");
  if (!(cycles_per_usec > 0)) throw std::invalid_argument("counter frequency must be positive");
  std::sort(deltas_cycles.begin(), deltas_cycles.end());
  const double quotient = cycles_per_usec * round_trip_factor;
  const int kept = static_cast<int>(deltas_cycles.size()) - 2;  // perftest drops the 2 largest...
  auto usec = [&](std::size_t i) { return static_cast<double>(deltas_cycles[i]) / quotient; };

  // ...takes the median of what is left in integer cycles (two middle values averaged with
  // integer division when the count is even)...
  std::uint64_t median_cycles;
  if ((kept - 1) % 2)
    median_cycles = (deltas_cycles[kept / 2] + deltas_cycles[kept / 2 - 1]) / 2;
  else
    median_cycles = deltas_cycles[kept / 2];

  PerftestFigures f;
  double sum = 0;
  for (int i = 0; i < kept; ++i) sum += usec(i);
  f.t_avg = sum / kept;
  // ...and squares deviations that were first truncated to int microseconds.
  double square_sum = 0;
  for (int i = 0; i < kept; ++i) {
    const int truncated_deviation = to_int_like_x86(f.t_avg - usec(i));
    // The square goes through an int too: above 46340 usec of deviation it overflows to
    // INT_MIN (x86 conversion result), the sum turns negative and perftest prints -nan.
    square_sum += to_int_like_x86(std::pow(truncated_deviation, 2));
  }
  f.t_stdev = std::sqrt(square_sum / kept);
  f.t_min = usec(0);
  f.t_max = usec(kept);  // index kept = the second largest delta, not the largest kept one
  f.t_typical = static_cast<double>(median_cycles) / quotient;
  const auto idx99 = static_cast<std::size_t>(std::ceil(kept * 0.99));
  const auto idx999 = static_cast<std::size_t>(std::ceil(kept * 0.999));
  f.p99 = usec(std::min(idx99, deltas_cycles.size() - 1));
  f.p99_9 = usec(std::min(idx999, deltas_cycles.size() - 1));
  return f;
}

BandwidthFigures perftest_bandwidth(const std::vector<std::uint64_t>& posted, const std::vector<std::uint64_t>& completed,
                                    std::uint64_t size, double cycles_per_usec, bool want_peak) {
  BandwidthFigures f;
  const std::size_t n = posted.size();
  if (n == 0 || completed.size() != n || completed[n - 1] <= posted[0]) return f;
  const double cycles_per_sec = cycles_per_usec * 1e6;
  const double total = static_cast<double>(completed[n - 1] - posted[0]);
  f.bw_avg_mb_per_sec = static_cast<double>(size) * static_cast<double>(n) * cycles_per_sec / (total * 1048576.0);
  f.msg_rate_mpps = static_cast<double>(n) * cycles_per_sec / (total * 1e6);
  if (!want_peak) return f;
  double best_cycles_per_msg = total / static_cast<double>(n);
  for (std::size_t j = 0; j < n; ++j) {
    if (!completed[j]) continue;  // only signalled completions carry a time
    for (std::size_t i = 0; i <= j; ++i) {
      const double per = static_cast<double>(completed[j] - posted[i]) / static_cast<double>(j - i + 1);
      best_cycles_per_msg = std::min(best_cycles_per_msg, per);
    }
  }
  f.bw_peak_mb_per_sec = static_cast<double>(size) * cycles_per_sec / (best_cycles_per_msg * 1048576.0);
  return f;
}

int perftest_cq_mod(int requested, bool requested_given, std::uint64_t size, bool all_sizes, bool use_events, bool ud,
                    int tx_depth, int post_list) {
  int mod = requested;
  if (size > 8192 && !ud && !all_sizes && !use_events && !requested_given) mod = 1;
  mod = std::clamp(mod, 1, std::max(tx_depth, 1));
  if (post_list > 1 && !requested_given) mod = post_list;  // applied after the clamp, as perftest
  return mod;
}

double min_window_bandwidth(const std::vector<std::uint64_t>& times, const std::vector<std::uint64_t>& retired,
                            std::uint64_t size, double cycles_per_usec, std::uint64_t window_cycles) {
  double lowest = 0;
  bool found = false;
  std::size_t from = 0;
  for (std::size_t k = 1; k < times.size() && k < retired.size(); ++k) {
    while (from + 1 < k && times[k] - times[from + 1] >= window_cycles) ++from;
    const std::uint64_t span = times[k] - times[from];
    if (span < window_cycles || span == 0) continue;
    const double mb_per_sec = static_cast<double>(retired[k] - retired[from]) * static_cast<double>(size) * cycles_per_usec *
                              1e6 / (static_cast<double>(span) * 1048576.0);
    if (!found || mb_per_sec < lowest) lowest = mb_per_sec;
    found = true;
  }
  return lowest;
}

}  // namespace rdmadiag::perftest
