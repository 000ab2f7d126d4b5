// A subcommand registered by one part of rdmadiag (analyze, perftest, devices, ...).
// Each part adds its CLI11 subcommands and says what to run when one of them was chosen;
// main() parses once and runs the chosen one. Keeps the parts out of each other's code.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace rdmadiag::cli {

struct Command {
  CLI::App* sub;              // the (leaf) subcommand
  std::function<int()> run;   // returns the process exit status
};

using Commands = std::vector<Command>;

}  // namespace rdmadiag::cli
