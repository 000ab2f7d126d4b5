#include "perftest/cpu_util.h"

#include <gtest/gtest.h>

using namespace rdmadiag::perftest;

// proc(5): "cpu  user nice system idle iowait irq softirq steal guest guest_nice".
TEST(CpuUtil, ParsesTheAggregateLineOnly) {
  const auto t = parse_proc_stat_cpu_line("cpu  4705 356 584 3699176 23060 0 277 0 0 0");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->fields[0], 4705u);
  EXPECT_EQ(t->fields[3], 3699176u);
  EXPECT_EQ(t->fields[6], 277u);
  EXPECT_FALSE(parse_proc_stat_cpu_line("cpu0 4705 356 584 3699176 23060 0 277 0 0 0").has_value());
  EXPECT_FALSE(parse_proc_stat_cpu_line("intr 12345 0 0").has_value());
  EXPECT_FALSE(parse_proc_stat_cpu_line("cpu  1 2 3").has_value());  // idle missing
  EXPECT_FALSE(parse_proc_stat_cpu_line("").has_value());
}

// Window deltas: user 200, nice 0, system 100, idle 200, iowait 40, irq 10, softirq 50 (600 ticks).
// perftest's calc_cpu_util: 200 / (200 + 200) = 50 %; busy: (600 - 200 - 40) / 600 = 60 %;
// the process used 1.5 s of CPU in 2 s: 75 % of one CPU.
TEST(CpuUtil, PerftestFigureIgnoresSystemTimeOursDoesNot) {
  CpuSnapshot a, b;
  a.system = parse_proc_stat_cpu_line("cpu  100 5 50 1000 20 3 2 0 0 0");
  b.system = parse_proc_stat_cpu_line("cpu  300 5 150 1200 60 13 52 0 0 0");
  a.process_cpu_s = 1.0;
  b.process_cpu_s = 2.5;
  a.wall_ns = 1'000'000'000;
  b.wall_ns = 3'000'000'000;
  const auto u = cpu_utilisation(a, b);
  ASSERT_TRUE(u.has_value());
  EXPECT_DOUBLE_EQ(u->perftest_percent, 50.0);
  EXPECT_DOUBLE_EQ(u->busy_percent, 60.0);
  EXPECT_DOUBLE_EQ(u->process_percent, 75.0);
  EXPECT_DOUBLE_EQ(u->seconds, 2.0);
}

TEST(CpuUtil, NoFiguresWithoutProcStatOrTicks) {
  CpuSnapshot a, b;
  EXPECT_FALSE(cpu_utilisation(a, b).has_value());
  a.system = parse_proc_stat_cpu_line("cpu  1 0 0 1 0 0 0 0");
  b.system = a.system;
  const auto u = cpu_utilisation(a, b);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->perftest_percent, 0.0);  // perftest prints 0 when no tick passed
  EXPECT_EQ(u->busy_percent, 0.0);
}

// The live snapshot reads this machine's /proc/stat and its own CPU time.
TEST(CpuUtil, SnapshotReadsThisMachine) {
  const auto a = take_cpu_snapshot();
  volatile double sink = 0;
  for (int i = 0; i < 20'000'000; ++i) sink = sink + i;
  const auto b = take_cpu_snapshot();
  ASSERT_TRUE(a.system.has_value());
  EXPECT_GT(b.wall_ns, a.wall_ns);
  EXPECT_GT(b.process_cpu_s, a.process_cpu_s);
}
