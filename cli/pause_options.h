// The pause analysis' options, shared by `analyze` and `capture`: --link-speed,
// --pause-storm-ms, --dscp-priority (docs/pfc.md). `capture` on one network
// interface learns the link speed from it when --link-speed is not given.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "decode/pfc_analysis.h"

namespace rdmadiag::cli {

struct PauseCliOptions {
  double link_gbps = 0;                    // 0: unknown
  double pause_storm_ms = 100;
  std::vector<std::string> dscp_priority;  // "DSCP=PRIORITY" overrides
};

void add_pause_options(CLI::App* sub, PauseCliOptions* o);
// False (with a message naming `command`) when an option is wrong.
bool to_pfc_options(const PauseCliOptions& o, const char* command, decode::PfcOptions& pfc);
// The speed of network interface `name` in bits per second, as the kernel
// reports it (/sys/class/net/NAME/speed, Mb/s); 0 when unknown (down, virtual without one, not Linux).
std::uint64_t interface_speed_bps(const std::string& name);

}  // namespace rdmadiag::cli
