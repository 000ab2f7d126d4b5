#include "perftest/clock.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace rdmadiag::perftest {

namespace {
std::uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

std::uint64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }

std::uint64_t read_cycles() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return clock_ns(CLOCK_MONOTONIC_RAW);
#endif
}

double cpuinfo_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double best = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    try {
      best = std::max(best, std::stod(line.substr(colon + 1)));
    } catch (...) {
    }
  }
  return best;
}

CycleClock calibrate_cycle_clock(int calibration_ms) {
  CycleClock c;
  c.cpuinfo_mhz = cpuinfo_mhz();
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#if defined(__aarch64__)
  c.counter = "cntvct_el0";
#else
  c.counter = "rdtsc";
#endif
  // Measure twice and keep the second: the first absorbs page faults and clock ramp-up.
  double mhz = 0;
  for (int round = 0; round < 2; ++round) {
    const std::uint64_t ns0 = clock_ns(CLOCK_MONOTONIC_RAW);
    const std::uint64_t c0 = read_cycles();
    const std::uint64_t target = ns0 + static_cast<std::uint64_t>(calibration_ms) * 1000000ull / 2;
    std::uint64_t ns1;
    do ns1 = clock_ns(CLOCK_MONOTONIC_RAW);
    while (ns1 < target);
    const std::uint64_t c1 = read_cycles();
    mhz = static_cast<double>(c1 - c0) * 1000.0 / static_cast<double>(ns1 - ns0);
  }
  c.cycles_per_usec = mhz;
  c.frequency_source = "measured against CLOCK_MONOTONIC_RAW over " + std::to_string(calibration_ms / 2) + " ms";
#else
  c.counter = "clock_gettime(CLOCK_MONOTONIC_RAW)";
  c.cycles_per_usec = 1000.0;
  c.frequency_source = "nanosecond clock (no cycle counter on this architecture)";
#endif
  return c;
}

}  // namespace rdmadiag::perftest
