// Registers `rdmadiag perftest <test>` and `rdmadiag devices` with the CLI.
#pragma once
#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace rdmadiag::perftest {

void add_perftest_commands(CLI::App& app, rdmadiag::cli::Commands& out);

}  // namespace rdmadiag::perftest
