// rdmadiag: one entry point; each part registers its own subcommands (cli/command.h).
#include "cli/command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#ifdef RDMADIAG_HAVE_PERFTEST
#include "perftest/cli.h"
#endif

namespace rdmadiag::cli {
void add_analyze_command(CLI::App& app, Commands& out);
void add_capture_command(CLI::App& app, Commands& out);
void add_convert_command(CLI::App& app, Commands& out);
void add_report_command(CLI::App& app, Commands& out);
void add_nvme_command(CLI::App& app, Commands& out);
}

namespace {
// As coreutils' close_stdout: a report that could not be written to standard
// output (a full disk, a file system error) fails the command; it is not
// dropped silently.
int with_stdout_written(int status) {
  errno = 0;
  std::cout.flush();
  const bool ok = std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (ok) return status;
  std::fprintf(stderr, "rdmadiag: cannot write standard output%s%s\n", errno ? ": " : "", errno ? std::strerror(errno) : "");
  return status == 0 ? 1 : status;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace rdmadiag::cli;
  CLI::App app{"rdmadiag: RDMA packet-level diagnostics (InfiniBand, RoCEv1/v2, iWARP)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "rdmadiag 0.1.0");
  Commands commands;
  add_analyze_command(app, commands);
  add_capture_command(app, commands);
  add_convert_command(app, commands);
  add_report_command(app, commands);
  add_nvme_command(app, commands);
#ifdef RDMADIAG_HAVE_PERFTEST
  rdmadiag::perftest::add_perftest_commands(app, commands);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every parse error is "bad command line" (2), as
    // the commands document, not CLI11's internal error numbers (106, 109...).
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (auto& c : commands)
      if (c.sub->parsed()) return with_stdout_written(c.run());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmadiag: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "rdmadiag: no command chosen (see --help)\n");
  return 2;
}
