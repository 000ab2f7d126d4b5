// `rdmadiag analyze FILE...`: decode every frame of one or more capture files and
// report (text summary, --packets lines, --json). Exit status: 0 every input read
// whole; 1 an input could not be opened or is not a capture file; 3 an input was
// damaged or cut short (read up to the damage, the report says where).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "capture/file_reader.h"
#include "cli/analysis_session.h"
#include "cli/command.h"
#include "decode/transport_analysis.h"
#include "exporters/progress.h"

#include <sys/stat.h>

namespace rdmadiag::cli {

namespace {

struct AnalyzeOptions {
  std::vector<std::string> files;
  bool packets = false;
  std::string json_path;
  std::vector<std::uint16_t> roce_ports;
  bool no_heuristic = false;
  std::uint32_t pmtu = 0;
  bool quiet = false;
  exporters::OutputOptions outputs;
};

constexpr int kExitOk = 0;
constexpr int kExitUnreadable = 1;
constexpr int kExitDamaged = 3;

int run_analyze(const AnalyzeOptions& o) {
  SessionOptions so;
  so.packets = o.packets;
  so.json_path = o.json_path;
  so.quiet = o.quiet;
  so.outputs = o.outputs;
  so.decode.roce_heuristic = !o.no_heuristic;
  for (auto port : o.roce_ports)
    if (!so.decode.add_roce_port(port)) {
      std::fprintf(stderr, "rdmadiag analyze: at most %zu extra RoCE ports\n", so.decode.extra_roce_ports.size());
      return 2;
    }
  // --packets shows each request's response frame; that is known only after the
  // response, so a first pass over the files finds the links (not possible for
  // standard input, which cannot be read twice).
  std::unordered_map<std::uint64_t, decode::TransportAnalyzer::ForwardLink> links;
  const bool two_pass = o.packets && std::none_of(o.files.begin(), o.files.end(), [](const std::string& f) { return f == "-"; });
  if (two_pass) {
    decode::Analyzer first;
    first.transport().enable_forward_links(true);
    first.transport().set_pmtu_override(o.pmtu);
    decode::DecodedPacket pkt;
    decode::PacketAnalysis pa;
    std::uint64_t frame = 0;
    for (const std::string& path : o.files) {
      capture::FileReader reader;
      if (!reader.open(path)) continue;  // reported by the second pass
      capture::Record rec;
      while (reader.next(rec)) {
        decode::decode_frame(reader.linktype(), rec.data, rec.wirelen, so.decode, pkt);
        first.add(pkt, ++frame, static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9, pa);
      }
    }
    first.finish();
    links = first.transport().forward_links();
  }
  AnalysisSession session(std::move(so));
  session.set_forward_links(std::move(links));
  session.analyzer().transport().set_pmtu_override(o.pmtu);
  if (!session.open()) {
    std::fprintf(stderr, "rdmadiag analyze: %s\n", session.error().c_str());
    return kExitUnreadable;
  }
  int status = kExitOk;
  for (const std::string& path : o.files) {
    capture::FileReader reader;
    if (!reader.open(path)) {
      std::fprintf(stderr, "rdmadiag analyze: %s\n", reader.error().c_str());
      session.input_failed(path, reader.error());
      status = std::max(status, kExitUnreadable);
      continue;
    }
    if (!decode::linktype_supported(reader.linktype()))
      std::fprintf(stderr, "rdmadiag analyze: %s: link type %u is not one rdmadiag decodes; frames are counted only\n",
                   path.c_str(), reader.linktype());
    session.begin_input(path, reader.linktype(), reader.snaplen());
    capture::Record rec;
    struct stat st {};
    const std::uint64_t file_size = path != "-" && ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    exporters::ProgressBar progress(!o.quiet);
    while (reader.next(rec)) {
      session.frame(rec);
      if (progress.on() && (reader.records_read() & 4095) == 0)
        progress.update(path, static_cast<std::uint64_t>(std::max<std::int64_t>(0, reader.file_offset())), file_size,
                        reader.records_read());
    }
    progress.clear();
    session.end_input(reader.records_read(), reader.stop_reason());
    if (!reader.stop_reason().empty()) {
      std::fprintf(stderr, "rdmadiag analyze: %s: damaged capture, %s\n", path.c_str(), reader.stop_reason().c_str());
      status = std::max(status, kExitDamaged);
    }
  }
  if (!session.finish()) {
    std::fprintf(stderr, "rdmadiag analyze: %s\n", session.error().c_str());
    status = std::max(status, kExitUnreadable);
  }
  return status;
}

}  // namespace

void add_analyze_command(CLI::App& app, Commands& out) {
  auto opts = std::make_shared<AnalyzeOptions>();
  CLI::App* sub = app.add_subcommand("analyze", "Decode and check RDMA traffic in capture files (pcap, pcapng)");
  sub->add_option("files", opts->files, "Capture files, read in order ('-' for standard input)")->required();
  sub->add_flag("--packets", opts->packets, "One line per packet (and a packets array in --json)");
  sub->add_option("--json", opts->json_path, "Write the report as JSON to FILE ('-' for standard output)");
  sub->add_option("--jsonl", opts->outputs.jsonl_path,
                  "Write one JSON object per line to FILE: each packet, then the report ('-' standard output)");
  sub->add_option("--csv", opts->outputs.csv_flows_path, "Write the per-flow (queue pair) table as CSV to FILE");
  sub->add_option("--csv-packets", opts->outputs.csv_packets_path, "Write one CSV row per packet to FILE");
  sub->add_option("--html", opts->outputs.html_path, "Write a self-contained HTML report (tables and plots) to FILE");
  sub->add_option("--metrics-file", opts->outputs.metrics_path,
                  "Write Prometheus metrics to FILE (node exporter textfile format, replaced atomically)");
  sub->add_option("--metrics-max-flows", opts->outputs.max_flow_series,
                  "Flows with their own metric labels; the rest are summed into flow=\"other\" (default 100)");
  sub->add_option("--roce-port", opts->roce_ports, "Extra UDP destination port carrying RoCEv2 (repeatable)");
  sub->add_flag("--no-roce-heuristic", opts->no_heuristic, "Do not look for RoCEv2 on other UDP ports");
  sub->add_option("--pmtu", opts->pmtu, "Path MTU of the fabric (default: from CM REQs and segment sizes)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  sub->add_flag("-q,--quiet", opts->quiet, "No text report on standard output");
  sub->footer(
      "Exit status: 0 all input read; 1 an input could not be opened or is not a capture file;\n"
      "2 bad command line; 3 an input was damaged or cut short (read up to the damage).");
  out.push_back(Command{sub, [opts] { return run_analyze(*opts); }});
}

}  // namespace rdmadiag::cli
