#include "cli/output_guard.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace rdmadiag::cli {

NamedOutputs report_outputs(const std::string& json_path, const exporters::OutputOptions& o) {
  return {{"--json", json_path},           {"--jsonl", o.jsonl_path}, {"--csv", o.csv_flows_path},
          {"--csv-packets", o.csv_packets_path}, {"--html", o.html_path},  {"--metrics-file", o.metrics_path}};
}

namespace {

// Whether two paths name the same file: the same device and inode where both
// exist (links, other spellings), else the same absolute path once normalized.
bool same_file(const std::string& a, const std::string& b) {
  if (a == "-" || b == "-") return a == b;  // standard output twice
  struct stat sa {}, sb {};
  const bool a_exists = ::stat(a.c_str(), &sa) == 0, b_exists = ::stat(b.c_str(), &sb) == 0;
  if (a_exists && b_exists) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (a_exists != b_exists) return false;
  std::error_code ea, eb;
  const auto pa = std::filesystem::absolute(a, ea).lexically_normal();
  const auto pb = std::filesystem::absolute(b, eb).lexically_normal();
  return !ea && !eb && pa == pb;
}

void refuse(std::string_view command, std::string_view option, const std::string& path, const std::string& why) {
  std::fprintf(stderr, "rdmadiag %.*s: %.*s %s %s\n", static_cast<int>(command.size()), command.data(),
               static_cast<int>(option.size()), option.data(), path.c_str(), why.c_str());
}

}  // namespace

bool outputs_apart(std::string_view command, const std::vector<std::string>& inputs, const NamedOutputs& outputs,
                   std::initializer_list<std::string_view> to_stdout) {
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto& [option, out] = outputs[k];
    if (out.empty()) continue;
    if (out == "-" && std::find(to_stdout.begin(), to_stdout.end(), option) == to_stdout.end()) {
      refuse(command, option, out, "cannot go to standard output; name a file");
      return false;
    }
    for (std::size_t m = k + 1; m < outputs.size(); ++m)
      if (!outputs[m].second.empty() && same_file(out, outputs[m].second)) {
        refuse(command, option, out,
               std::string(out == "-" ? "and " : "is the same file as ") + std::string(outputs[m].first) + " " +
                   outputs[m].second + (out == "-" ? ": both on standard output" : "") + "; one would overwrite the other");
        return false;
      }
    struct stat o {};
    if (out == "-" || ::stat(out.c_str(), &o) != 0) continue;  // (a new file cannot be an input)
    for (const std::string& in : inputs) {
      struct stat i {};
      if (in == "-" || ::stat(in.c_str(), &i) != 0) continue;
      if (i.st_dev == o.st_dev && i.st_ino == o.st_ino) {
        refuse(command, option, out, "is also an input (" + in + "); refusing to overwrite it");
        return false;
      }
    }
  }
  return true;
}

}  // namespace rdmadiag::cli
