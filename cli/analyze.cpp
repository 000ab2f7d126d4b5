// `rdmadiag analyze FILE...`: decode every frame of one or more capture files and
// report (text summary, --packets lines, --json). Exit status: 0 every input read
// whole; 1 an input could not be opened or is not a capture file; 3 an input was
// damaged or cut short (read up to the damage, the report says where).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "capture/file_reader.h"
#include "cli/command.h"
#include "decode/capture_summary.h"
#include "decode/packet.h"
#include "exporters/json_report.h"
#include "exporters/text_report.h"

namespace rdmadiag::cli {

namespace {

struct AnalyzeOptions {
  std::vector<std::string> files;
  bool packets = false;
  std::string json_path;
  std::vector<std::uint16_t> roce_ports;
  bool no_heuristic = false;
  bool quiet = false;
};

constexpr int kExitOk = 0;
constexpr int kExitUnreadable = 1;
constexpr int kExitDamaged = 3;

int run_analyze(const AnalyzeOptions& o) {
  decode::DecodeOptions dopts;
  dopts.roce_heuristic = !o.no_heuristic;
  for (auto port : o.roce_ports)
    if (!dopts.add_roce_port(port)) {
      std::fprintf(stderr, "rdmadiag analyze: at most %zu extra RoCE ports\n", dopts.extra_roce_ports.size());
      return 2;
    }

  std::ofstream json_file;
  std::ostream* json_out = nullptr;
  if (!o.json_path.empty()) {
    if (o.json_path == "-") {
      json_out = &std::cout;
    } else {
      json_file.open(o.json_path);
      if (!json_file) {
        std::fprintf(stderr, "rdmadiag analyze: cannot write %s\n", o.json_path.c_str());
        return 1;
      }
      json_out = &json_file;
    }
  }
  const bool text_to_stdout = json_out != &std::cout && !o.quiet;
  std::unique_ptr<exporters::JsonReportWriter> json;
  if (json_out) json = std::make_unique<exporters::JsonReportWriter>(*json_out, o.packets);

  decode::CaptureSummary summary;
  exporters::AnalyzeReport report;
  report.summary = &summary;
  decode::DecodedPacket pkt;
  std::uint64_t frame = 0;
  double first_ts = -1;
  int status = kExitOk;

  for (const std::string& path : o.files) {
    exporters::InputInfo info;
    info.path = path;
    capture::FileReader reader;
    if (!reader.open(path)) {
      info.error = reader.error();
      std::fprintf(stderr, "rdmadiag analyze: %s\n", reader.error().c_str());
      report.inputs.push_back(info);
      status = std::max(status, kExitUnreadable);
      continue;
    }
    info.linktype = reader.linktype();
    info.snaplen = reader.snaplen();
    if (!decode::linktype_supported(info.linktype))
      std::fprintf(stderr, "rdmadiag analyze: %s: link type %u is not one rdmadiag decodes; frames are counted only\n",
                   path.c_str(), info.linktype);
    capture::Record rec;
    while (reader.next(rec)) {
      ++frame;
      const double ts = static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9;
      if (first_ts < 0) first_ts = ts;
      decode::decode_frame(info.linktype, rec.data, rec.wirelen, dopts, pkt);
      summary.add(pkt, frame, ts);
      if (json) json->packet(pkt, frame, ts);
      if (o.packets && text_to_stdout) std::cout << exporters::packet_line(pkt, frame, ts - first_ts) << '\n';
    }
    info.records = reader.records_read();
    info.stop_reason = reader.stop_reason();
    if (!info.stop_reason.empty()) {
      std::fprintf(stderr, "rdmadiag analyze: %s: damaged capture, %s\n", path.c_str(), info.stop_reason.c_str());
      status = std::max(status, kExitDamaged);
    }
    report.inputs.push_back(std::move(info));
  }

  if (json) json->finish(report);
  if (text_to_stdout) {
    if (o.packets) std::cout << '\n';
    exporters::write_text_summary(std::cout, report);
  }
  std::cout.flush();
  return status;
}

}  // namespace

void add_analyze_command(CLI::App& app, Commands& out) {
  auto opts = std::make_shared<AnalyzeOptions>();
  CLI::App* sub = app.add_subcommand("analyze", "Decode and check RDMA traffic in capture files (pcap, pcapng)");
  sub->add_option("files", opts->files, "Capture files, read in order ('-' for standard input)")->required();
  sub->add_flag("--packets", opts->packets, "One line per packet (and a packets array in --json)");
  sub->add_option("--json", opts->json_path, "Write the report as JSON to FILE ('-' for standard output)");
  sub->add_option("--roce-port", opts->roce_ports, "Extra UDP destination port carrying RoCEv2 (repeatable)");
  sub->add_flag("--no-roce-heuristic", opts->no_heuristic, "Do not look for RoCEv2 on other UDP ports");
  sub->add_flag("-q,--quiet", opts->quiet, "No text report on standard output");
  sub->footer(
      "Exit status: 0 all input read; 1 an input could not be opened or is not a capture file;\n"
      "2 bad command line; 3 an input was damaged or cut short (read up to the damage).");
  out.push_back(Command{sub, [opts] { return run_analyze(*opts); }});
}

}  // namespace rdmadiag::cli
