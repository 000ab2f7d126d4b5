#include "cli/output_guard.h"

#include <sys/stat.h>

#include <cstdio>

namespace rdmadiag::cli {

NamedOutputs report_outputs(const std::string& json_path, const exporters::OutputOptions& o) {
  return {{"--json", json_path},           {"--jsonl", o.jsonl_path}, {"--csv", o.csv_flows_path},
          {"--csv-packets", o.csv_packets_path}, {"--html", o.html_path},  {"--metrics-file", o.metrics_path}};
}

bool outputs_apart_from_inputs(std::string_view command, const std::vector<std::string>& inputs,
                               const NamedOutputs& outputs) {
  for (const auto& [option, out] : outputs) {
    struct stat o {};
    if (out.empty() || out == "-" || ::stat(out.c_str(), &o) != 0) continue;  // (a new file cannot be an input)
    for (const std::string& in : inputs) {
      struct stat i {};
      if (in == "-" || ::stat(in.c_str(), &i) != 0) continue;
      if (i.st_dev == o.st_dev && i.st_ino == o.st_ino) {
        std::fprintf(stderr, "rdmadiag %.*s: %.*s %s is also an input (%s); refusing to overwrite it\n",
                     static_cast<int>(command.size()), command.data(), static_cast<int>(option.size()), option.data(),
                     out.c_str(), in.c_str());
        return false;
      }
    }
  }
  return true;
}

}  // namespace rdmadiag::cli
