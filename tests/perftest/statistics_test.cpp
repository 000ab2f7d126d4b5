#include "perftest/statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

using namespace rdmadiag::perftest;

TEST(Statistics, KnownSetOneToHundred) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);  // 1..100, shuffled order must not matter
  std::reverse(v.begin(), v.end());
  const auto s = compute_statistics(v, 10);
  EXPECT_EQ(s.sample_count, 100u);
  EXPECT_DOUBLE_EQ(s.min_usec, 1);
  EXPECT_DOUBLE_EQ(s.max_usec, 100);
  EXPECT_DOUBLE_EQ(s.median_usec, 50.5);
  EXPECT_DOUBLE_EQ(s.mean_usec, 50.5);
  EXPECT_NEAR(s.stdev_usec, 28.866070047722118, 1e-12);  // population stdev of 1..100
  ASSERT_EQ(s.percentiles.size(), 5u);
  EXPECT_DOUBLE_EQ(s.percentiles[0].usec, 50);   // nearest rank ceil(0.5*100) = 50
  EXPECT_DOUBLE_EQ(s.percentiles[1].usec, 90);
  EXPECT_DOUBLE_EQ(s.percentiles[2].usec, 99);
  EXPECT_DOUBLE_EQ(s.percentiles[3].usec, 100);
  EXPECT_DOUBLE_EQ(s.percentiles[4].usec, 100);
  ASSERT_EQ(s.histogram.counts.size(), 10u);
  EXPECT_EQ(std::accumulate(s.histogram.counts.begin(), s.histogram.counts.end(), std::uint64_t{0}), 100u);
  EXPECT_NEAR(s.histogram.bin_width_usec, 9.9, 1e-12);
}

TEST(Statistics, OddCountMedianAndSingleValue) {
  EXPECT_DOUBLE_EQ(compute_statistics({3, 1, 2}).median_usec, 2);
  const auto one = compute_statistics({7.25});
  EXPECT_DOUBLE_EQ(one.min_usec, 7.25);
  EXPECT_DOUBLE_EQ(one.max_usec, 7.25);
  EXPECT_DOUBLE_EQ(one.stdev_usec, 0);
  EXPECT_EQ(one.histogram.counts.size(), 1u);
  EXPECT_EQ(one.histogram.counts[0], 1u);
}

TEST(Statistics, EmptyIsAnError) {
  EXPECT_THROW(compute_statistics({}), std::invalid_argument);
}

TEST(Statistics, HighPercentilesNeedManySamples) {
  // 10000 samples: p99.99 is the largest, p99.9 the 9990th.
  std::vector<double> v(10000);
  std::iota(v.begin(), v.end(), 1.0);
  const auto s = compute_statistics(v);
  EXPECT_DOUBLE_EQ(s.percentiles[3].usec, 9990);
  EXPECT_DOUBLE_EQ(s.percentiles[4].usec, 9999);
}

// perftest's figures: deltas 1..100 cycles at 1 MHz, READ (factor 1).
TEST(PerftestFigures, ReproducesPerftestQuirks) {
  std::vector<std::uint64_t> deltas(100);
  std::iota(deltas.begin(), deltas.end(), 1);
  const auto f = perftest_figures(deltas, 1.0, 1);
  // kept = 98 (the two largest, 99 and 100, are dropped)...
  EXPECT_DOUBLE_EQ(f.t_min, 1);
  EXPECT_DOUBLE_EQ(f.t_avg, 49.5);      // mean of 1..98
  EXPECT_DOUBLE_EQ(f.t_typical, 49);    // (49+50)/2 in integer cycles
  // ...but t_max prints delta[98] = 99, the second largest, and so do both percentiles.
  EXPECT_DOUBLE_EQ(f.t_max, 99);
  EXPECT_DOUBLE_EQ(f.p99, 99);
  EXPECT_DOUBLE_EQ(f.p99_9, 99);
}

TEST(PerftestFigures, SubMicrosecondDeviationsVanish) {
  // All deviations are below 1 usec: perftest truncates each to int 0 and prints stdev 0,
  // while the real standard deviation is 0.4 usec.
  std::vector<std::uint64_t> deltas;
  for (int i = 0; i < 50; ++i) {
    deltas.push_back(1000);  // 1.0 usec at 1000 MHz
    deltas.push_back(1800);  // 1.8 usec
  }
  deltas.push_back(500000);  // two outliers that perftest drops
  deltas.push_back(600000);
  const auto f = perftest_figures(deltas, 1000.0, 1);
  EXPECT_DOUBLE_EQ(f.t_stdev, 0.0);
  std::vector<double> usec;
  for (int i = 0; i < 50; ++i) { usec.push_back(1.0); usec.push_back(1.8); }
  EXPECT_NEAR(compute_statistics(usec).stdev_usec, 0.4, 1e-12);
}

TEST(PerftestFigures, HalvesForPingPong) {
  std::vector<std::uint64_t> deltas(10, 2000);
  const auto f = perftest_figures(deltas, 1000.0, 2);
  EXPECT_DOUBLE_EQ(f.t_typical, 1.0);
  EXPECT_DOUBLE_EQ(f.t_avg, 1.0);
}

TEST(PerftestFigures, TooFewDeltas) {
  EXPECT_THROW(perftest_figures({1, 2}, 1.0, 1), std::invalid_argument);
  EXPECT_THROW(perftest_figures({1, 2, 3}, 0.0, 1), std::invalid_argument);
}

TEST(PerftestFigures, LargeDeviationsOverflowToNan) {
  // Seen in the lab: ib_write_lat printed "-nan" for t_stdev when one sample deviated by more
  // than 46340 usec from the mean (the int square overflows). Our exact stdev is finite.
  std::vector<std::uint64_t> deltas(20, 10000);  // 10 usec at 1000 MHz
  deltas[3] = 100000000;                          // 100000 usec, kept (two larger ones follow)
  deltas.push_back(200000000);
  deltas.push_back(300000000);
  const auto f = perftest_figures(deltas, 1000.0, 1);
  EXPECT_TRUE(std::isnan(f.t_stdev));
}

// perftest's print_report_bw, computed by hand: 4 posts of 1 MiB at 0, 10, 20, 30 cycles on a
// 1 MHz counter; the 2nd is retired by a signalled completion at 100, the 4th at 1000.
// Average: 4 MiB over 1000 us = 4000 MB/s, 0.004 Mpps. Peak: the best (completed[j] - posted[i]) /
// (j - i + 1) is j=1, i=0: 100/2 = 50 cycles per message = 1 MiB per 50 us = 20000 MB/s.
TEST(PerftestBandwidth, AverageAndPeakAsPerftest) {
  const std::vector<std::uint64_t> posted{0, 10, 20, 30}, completed{0, 100, 0, 1000};
  const auto f = perftest_bandwidth(posted, completed, 1048576, 1.0, true);
  EXPECT_DOUBLE_EQ(f.bw_avg_mb_per_sec, 4000.0);
  EXPECT_DOUBLE_EQ(f.msg_rate_mpps, 0.004);
  EXPECT_DOUBLE_EQ(f.bw_peak_mb_per_sec, 20000.0);
  // -N: perftest prints 0 as the peak (peak_up is multiplied by !noPeak).
  EXPECT_DOUBLE_EQ(perftest_bandwidth(posted, completed, 1048576, 1.0, false).bw_peak_mb_per_sec, 0.0);
  // Nothing retired: no figures rather than a division by zero.
  EXPECT_DOUBLE_EQ(perftest_bandwidth(posted, {0, 0, 0, 0}, 1048576, 1.0, true).bw_avg_mb_per_sec, 0.0);
}

// perftest_parameters.c force_dependencies: DEF_CQ_MOD 100; above MSG_SIZE_CQ_MOD_LIMIT (8192)
// cq_mod becomes DISABLED_CQ_MOD_VALUE (1) unless -Q was given, not for -a (RUN_ALL), -e or UD;
// "if (cq_mod > tx_depth) cq_mod = tx_depth".
TEST(PerftestBandwidth, CqModerationRule) {
  EXPECT_EQ(perftest_cq_mod(100, false, 65536, false, false, false, 128), 1);
  EXPECT_EQ(perftest_cq_mod(100, false, 8192, false, false, false, 128), 100);
  EXPECT_EQ(perftest_cq_mod(100, false, 65536, true, false, false, 128), 100);
  EXPECT_EQ(perftest_cq_mod(100, false, 65536, false, true, false, 128), 100);
  EXPECT_EQ(perftest_cq_mod(100, false, 65536, false, false, true, 128), 100);
  EXPECT_EQ(perftest_cq_mod(10, true, 65536, false, false, false, 128), 10);
  EXPECT_EQ(perftest_cq_mod(100, false, 4096, false, false, false, 64), 64);
  // -l 16 without -Q: "CQ moderation will be the size of the post list" (after the clamp).
  EXPECT_EQ(perftest_cq_mod(100, false, 65536, false, false, false, 128, 16), 16);
  EXPECT_EQ(perftest_cq_mod(8, true, 4096, false, false, false, 128, 16), 8);
}

// Points every 100 cycles on a 1 MHz counter with 10, 10, 5, 10 operations of 1 MiB retired in
// the four 100-cycle windows: the slowest window is 5 MiB in 100 us = 50000 MB/s. A window longer
// than the run gives 0.
TEST(PerftestBandwidth, MinimumOverSlidingWindow) {
  const std::vector<std::uint64_t> times{0, 100, 200, 300, 400}, retired{0, 10, 20, 25, 35};
  EXPECT_DOUBLE_EQ(min_window_bandwidth(times, retired, 1048576, 1.0, 100), 50000.0);
  // 200-cycle windows: 20, 15, 15 operations -> 15 MiB / 200 us = 75000 MB/s.
  EXPECT_DOUBLE_EQ(min_window_bandwidth(times, retired, 1048576, 1.0, 200), 75000.0);
  EXPECT_DOUBLE_EQ(min_window_bandwidth(times, retired, 1048576, 1.0, 1000), 0.0);
}
