#include "perftest/cpu_util.h"

#include <sys/resource.h>

#include <ctime>
#include <fstream>
#include <sstream>

namespace rdmadiag::perftest {

std::optional<CpuTicks> parse_proc_stat_cpu_line(const std::string& line) {
  std::istringstream in(line);
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  CpuTicks t;
  std::size_t n = 0;
  for (; n < t.fields.size() && in >> t.fields[n]; ++n) {
  }
  if (n < 4) return std::nullopt;  // user, nice, system and idle are always there
  return t;
}

CpuSnapshot take_cpu_snapshot() {
  CpuSnapshot s;
  std::ifstream stat("/proc/stat");
  std::string line;
  if (std::getline(stat, line)) s.system = parse_proc_stat_cpu_line(line);
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    s.process_cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.wall_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
  return s;
}

std::optional<CpuUtilisation> cpu_utilisation(const CpuSnapshot& from, const CpuSnapshot& to) {
  if (!from.system || !to.system) return std::nullopt;
  std::array<double, 8> d{};
  double total = 0;
  for (std::size_t k = 0; k < d.size(); ++k) {
    const auto a = from.system->fields[k], b = to.system->fields[k];
    d[k] = b >= a ? static_cast<double>(b - a) : 0;
    total += d[k];
  }
  constexpr std::size_t kUser = 0, kIdle = 3, kIowait = 4;
  CpuUtilisation u;
  if (d[kUser] + d[kIdle] > 0) u.perftest_percent = d[kUser] / (d[kUser] + d[kIdle]) * 100;
  if (total > 0) u.busy_percent = (total - d[kIdle] - d[kIowait]) / total * 100;
  u.seconds = static_cast<double>(to.wall_ns - from.wall_ns) / 1e9;
  if (u.seconds > 0) u.process_percent = (to.process_cpu_s - from.process_cpu_s) / u.seconds * 100;
  return u;
}

}  // namespace rdmadiag::perftest
