// Timestamps for latency samples: the CPU's cycle counter where there is one (as perftest),
// with its frequency measured against CLOCK_MONOTONIC_RAW instead of trusting /proc/cpuinfo's
// "cpu MHz" (which is the current core clock, not the counter's, on most modern CPUs).
#pragma once
#include <cstdint>
#include <string>

namespace rdmadiag::perftest {

struct CycleClock {
  double cycles_per_usec = 0;    // counter frequency in MHz
  std::string counter;           // "rdtsc", "cntvct_el0" or "clock_gettime(CLOCK_MONOTONIC_RAW)"
  std::string frequency_source;  // how cycles_per_usec was obtained
  double cpuinfo_mhz = 0;        // what perftest would have used (0 when unavailable)
};

std::uint64_t read_cycles();
// Spins for calibration_ms against CLOCK_MONOTONIC_RAW (default 100 ms).
CycleClock calibrate_cycle_clock(int calibration_ms = 100);
// Nanoseconds on CLOCK_MONOTONIC, for timeouts.
std::uint64_t monotonic_ns();
// perftest's frequency: the largest "cpu MHz" in /proc/cpuinfo, 0 if none.
double cpuinfo_mhz();

}  // namespace rdmadiag::perftest
