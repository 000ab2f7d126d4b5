// CPU utilisation over a measured window (--cpu_util), from the aggregate "cpu" line of /proc/stat
// (proc(5): user nice system idle iowait irq softirq steal, in USER_HZ ticks) and this process's
// own CPU time (getrusage). perftest's figure is kept next to two plain ones, because perftest
// counts only user and idle ticks (its calc_cpu_util: user / (user + idle)), so system, interrupt
// and I/O-wait time (where much of a software RDMA device's work runs) is invisible to it.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace rdmadiag::perftest {

struct CpuTicks {
  // user, nice, system, idle, iowait, irq, softirq, steal (missing trailing fields stay 0).
  std::array<std::uint64_t, 8> fields{};
};

// The first line of /proc/stat ("cpu  123 4 56 789 ..."); nullopt if it is not the aggregate line.
std::optional<CpuTicks> parse_proc_stat_cpu_line(const std::string& line);

struct CpuSnapshot {
  std::optional<CpuTicks> system;  // nullopt where /proc/stat cannot be read
  double process_cpu_s = 0;        // this process's user + system time
  std::uint64_t wall_ns = 0;       // CLOCK_MONOTONIC
};

CpuSnapshot take_cpu_snapshot();

struct CpuUtilisation {
  double perftest_percent = 0;  // perftest's: user / (user + idle) ticks, 0 when both are 0
  double busy_percent = 0;      // all CPUs: everything but idle and iowait, over all ticks
  double process_percent = 0;   // this process: CPU time / wall time, in % of one CPU
  double seconds = 0;           // wall time between the snapshots
};

// From the snapshots at the start and the end of the window; nullopt without /proc/stat.
std::optional<CpuUtilisation> cpu_utilisation(const CpuSnapshot& from, const CpuSnapshot& to);

}  // namespace rdmadiag::perftest
