#include "cli/pause_options.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace rdmadiag::cli {

namespace {
// CLI::Range lets "nan" through (every comparison with NaN is false), and a
// NaN link speed became 9.2e9 Gb/s by an undefined conversion.
const CLI::Validator kANumber(
    [](std::string& v) -> std::string {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      return std::isnan(d) ? "expected a number, got " + v : "";
    },
    "");
}  // namespace

void add_pause_options(CLI::App* sub, PauseCliOptions* o) {
  sub->add_option("--link-speed", o->link_gbps,
                  "Link speed in Gb/s (e.g. 10, 25, 40, 100, 200, 400): turns PAUSE/PFC quanta (512 bit times) into "
                  "time; without it pause times are reported as unknown")
      ->check(CLI::Range(0.001, 1.0e4))
      ->check(kANumber);
  sub->add_option("--pause-storm-ms", o->pause_storm_ms,
                  "A priority paused continuously for longer than this is a pause storm (default 100)")
      ->check(CLI::Range(0.0, 1.0e9))
      ->check(kANumber);
  sub->add_option("--dscp-priority", o->dscp_priority,
                  "DSCP=PRIORITY: the priority of untagged RoCE packets with that DSCP (repeatable; default DSCP/8)");
}

bool to_pfc_options(const PauseCliOptions& o, const char* command, decode::PfcOptions& pfc) {
  pfc.link_bps = static_cast<std::uint64_t>(o.link_gbps * 1e9 + 0.5);
  pfc.storm_seconds = o.pause_storm_ms / 1000.0;
  for (const std::string& m : o.dscp_priority) {
    unsigned dscp = 64, prio = 8;
    char end = 0;
    if (std::sscanf(m.c_str(), "%u=%u%c", &dscp, &prio, &end) != 2 || dscp > 63 || prio > 7) {
      std::fprintf(stderr, "rdmadiag %s: --dscp-priority %s: expected DSCP=PRIORITY (0-63=0-7)\n", command, m.c_str());
      return false;
    }
    pfc.dscp_priority[dscp] = static_cast<std::uint8_t>(prio);
  }
  return true;
}

std::uint64_t interface_speed_bps(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos) return 0;
  std::ifstream in("/sys/class/net/" + name + "/speed");
  long long mbps = 0;
  if (!(in >> mbps) || mbps <= 0) return 0;  // the kernel says -1 (or fails the read) when it does not know
  return static_cast<std::uint64_t>(mbps) * 1'000'000ULL;
}

}  // namespace rdmadiag::cli
