// `rdmadiag nvme FILE...`: per-command NVMe over Fabrics (RDMA) analysis of a
// capture (decode/nvme_analysis.h): every frame is decoded and run through the
// transport analysis (its verdicts are the transport events a slow command is
// attributed to), then through the NVMe pass.
#include <fstream>
#include <iostream>
#include <memory>

#include "capture/file_reader.h"
#include "cli/command.h"
#include "cli/output_guard.h"
#include "decode/analyzer.h"
#include "decode/nvme_analysis.h"
#include "exporters/csv.h"
#include "exporters/html_parts.h"
#include "exporters/metrics.h"
#include "exporters/nvme_report.h"

namespace rdmadiag::cli {

namespace {

struct NvmeOptions {
  std::vector<std::string> inputs;
  std::string json_path;      // "" none, "-" standard output
  std::string capsules_path;  // "" none, "-" standard output
  std::string commands_path;  // "" none, "-" standard output
  std::string csv_path;       // per completed command, CSV
  std::string html_path;
  std::string metrics_path;
  bool assume_all = false;
  std::uint16_t port = decode::kNvmeRdmaPort;
};

// Opens `path` ("-": standard output) into `file`; returns the stream or null.
std::ostream* open_output(const std::string& path, std::ofstream& file) {
  if (path.empty()) return nullptr;
  if (path == "-") return &std::cout;
  file.open(path);
  return file ? &file : nullptr;
}

// Feeds one capture file; returns 0, or 1 (cannot read) / 3 (damaged part-way).
int feed(const std::string& path, decode::Analyzer& transport, decode::NvmeAnalyzer& nvme, std::uint64_t& frame) {
  capture::FileReader reader;
  if (!reader.open(path)) {
    std::cerr << "rdmadiag nvme: " << reader.error() << '\n';
    return 1;
  }
  capture::Record rec;
  decode::DecodeOptions opts;
  decode::DecodedPacket pkt;
  auto pa = std::make_unique<decode::PacketAnalysis>();
  while (reader.next(rec)) {
    ++frame;
    decode::decode_frame(reader.record_linktype(), rec.data, rec.wirelen, opts, pkt);
    decode::take_reader_point(pkt, reader.record_point());
    pa->reset();
    const double ts = static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9;
    transport.add(pkt, frame, ts, *pa, rec.ts_ns());
    nvme.add(pkt, frame, rec.ts_ns(), pa.get());
  }
  if (!reader.stop_reason().empty()) {
    std::cerr << "rdmadiag nvme: " << path << ": damaged capture, " << reader.stop_reason() << "; analysed up to there\n";
    return 3;
  }
  return 0;
}

int run_nvme(const NvmeOptions& o) {
  if (!outputs_apart("nvme", o.inputs,
                     {{"--json", o.json_path}, {"--capsules", o.capsules_path}, {"--commands", o.commands_path},
                      {"--csv", o.csv_path}, {"--html", o.html_path}, {"--metrics-file", o.metrics_path}},
                     {"--json", "--capsules", "--commands", "--csv", "--html"}))
    return 2;
  std::ofstream json_file, capsules_file, commands_file, csv_file, html_file;
  std::ostream* json = open_output(o.json_path, json_file);
  std::ostream* capsules = open_output(o.capsules_path, capsules_file);
  std::ostream* commands = open_output(o.commands_path, commands_file);
  std::ostream* csv = open_output(o.csv_path, csv_file);
  std::ostream* html = open_output(o.html_path, html_file);
  for (const auto& [path, stream] : {std::pair{o.json_path, json}, {o.capsules_path, capsules}, {o.commands_path, commands},
                                     {o.csv_path, csv}, {o.html_path, html}})
    if (!path.empty() && !stream) {
      std::cerr << "rdmadiag nvme: cannot write " << path << '\n';
      return 1;
    }
  decode::Analyzer transport;
  transport.iwarp().keep_long_heads(true);  // NVMe over iWARP: the Connect data's NQNs
  decode::NvmeAnalyzer nvme;
  nvme.set_assume_all(o.assume_all);
  nvme.set_port(o.port);
  if (capsules) {
    *capsules << exporters::nvme_capsule_header() << '\n';
    nvme.set_capsule_sink([capsules](const decode::NvmeCapsuleRecord& r) { *capsules << exporters::nvme_capsule_line(r) << '\n'; });
  }
  if (commands) *commands << exporters::nvme_command_header() << '\n';
  if (csv) exporters::write_csv_row(*csv, exporters::nvme_command_columns());
  if (commands || csv)
    nvme.set_command_sink([commands, csv](const decode::NvmeCommandResult& r) {
      if (commands) *commands << exporters::nvme_command_line(r) << '\n';
      if (csv) exporters::write_csv_row(*csv, exporters::nvme_command_fields(r));
    });
  std::uint64_t frame = 0;
  int rc = 0;
  for (const auto& path : o.inputs) {
    const int r = feed(path, transport, nvme, frame);
    if (r == 1) return 1;
    rc = std::max(rc, r);
  }
  transport.finish();
  nvme.finish();
  const exporters::Json report = exporters::nvme_json(nvme);
  if (json) *json << exporters::json_text(report, 2) << '\n';
  if (html) *html << exporters::render_nvme_html(report);
  std::string error;
  if (!o.metrics_path.empty() && !exporters::write_metrics_file(o.metrics_path, exporters::render_nvme_metrics(report), error)) {
    std::cerr << "rdmadiag nvme: " << error << '\n';
    return 1;
  }
  if (json != &std::cout && capsules != &std::cout && commands != &std::cout && csv != &std::cout && html != &std::cout)
    exporters::write_nvme_text(std::cout, nvme);
  // Each file closed and checked: a full disk is an error, not a short file
  // (standard output is checked as the process exits: cli/main.cpp).
  for (const auto& [path, file] : {std::pair<const std::string&, std::ofstream&>{o.json_path, json_file},
                                   {o.capsules_path, capsules_file}, {o.commands_path, commands_file},
                                   {o.csv_path, csv_file}, {o.html_path, html_file}}) {
    if (!file.is_open()) continue;
    file.close();
    if (!file) {
      std::cerr << "rdmadiag nvme: cannot write " << path << '\n';
      return 1;
    }
  }
  return rc;
}

}  // namespace

void add_nvme_command(CLI::App& app, Commands& out) {
  auto o = std::make_shared<NvmeOptions>();
  CLI::App* sub = app.add_subcommand("nvme", "Per-command NVMe over Fabrics (RDMA) analysis: queues, latency, status, slow commands and the transport events inside them");
  sub->add_option("input", o->inputs, "Capture file(s) ('-' standard input), read as one sequence")->required();
  sub->add_option("--json", o->json_path, "Write the JSON report here ('-' standard output)");
  sub->add_option("--capsules", o->capsules_path, "Write one tab-separated line per capsule here ('-' standard output)");
  sub->add_option("--commands", o->commands_path, "Write one tab-separated line per completed command here ('-' standard output)");
  sub->add_option("--csv", o->csv_path, "Write one CSV row per completed command here ('-' standard output)");
  sub->add_option("--html", o->html_path,
                  "Write a self-contained HTML report here: latency histogram per command, queue depth over time, slowest "
                  "commands with their transport events");
  sub->add_option("--metrics-file", o->metrics_path, "Write Prometheus metrics to FILE (textfile collector format, replaced atomically)");
  sub->add_flag("--assume-all", o->assume_all,
                "Take every capsule-shaped RC SEND for NVMe (captures that lack the rdma_cm exchange)");
  sub->add_option("--port", o->port, "rdma_cm port of the NVMe-oF service (default 4420)")->check(CLI::Range(1, 65535));
  sub->footer("Exit status: 0 done; 1 cannot read input / write output; 2 bad command line (also: an output file is one of the inputs); 3 input damaged (analysed up to there).");
  out.push_back(Command{sub, [o] { return run_nvme(*o); }});
}

}  // namespace rdmadiag::cli
