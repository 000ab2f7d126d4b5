// `rdmadiag report RESULT.json`: turns a saved JSON report (analyze, capture or
// perftest; a --jsonl file too, whose last line is the report) into the HTML
// report, CSV tables or Prometheus metrics later, on any machine. Everything
// is rendered from the JSON alone.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "cli/output_guard.h"
#include "exporters/csv.h"
#include "exporters/html_report.h"
#include "exporters/metrics.h"

namespace rdmadiag::cli {

namespace {

struct ReportOptions {
  std::string input;
  std::string html_path, csv_path, metrics_path;
};

bool read_report(const std::string& path, exporters::Json& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  try {
    out = exporters::Json::parse(text);
    return true;
  } catch (const std::exception&) {
  }
  // --jsonl: the report is the last non-empty line.
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end != std::string::npos) {
    const std::size_t start = text.rfind('\n', end);
    try {
      out = exporters::Json::parse(text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1)));
      if (out.is_object() && out.contains("schema_version")) return true;
    } catch (const std::exception&) {
    }
  }
  error = path + ": not JSON (nor JSON lines ending with a report)";
  return false;
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  if (!f) std::fprintf(stderr, "rdmadiag report: cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

int run_report(const ReportOptions& o) {
  if (o.html_path.empty() && o.csv_path.empty() && o.metrics_path.empty()) {
    std::fprintf(stderr, "rdmadiag report: say what to write: --html FILE, --csv FILE or --metrics-file FILE\n");
    return 2;
  }
  if (!outputs_apart("report", {o.input}, {{"--html", o.html_path}, {"--csv", o.csv_path}, {"--metrics-file", o.metrics_path}}, {}))
    return 2;
  exporters::Json report;
  std::string error;
  if (!read_report(o.input, report, error)) {
    std::fprintf(stderr, "rdmadiag report: %s\n", error.c_str());
    return 1;
  }
  const auto kind = exporters::report_kind(report);
  if (kind == exporters::ReportKind::unknown) {
    std::fprintf(stderr, "rdmadiag report: %s: not an rdmadiag analyze, capture or perftest report\n", o.input.c_str());
    return 1;
  }
  // Refused before anything is written (it was after the HTML and CSV).
  if (!o.metrics_path.empty() && kind != exporters::ReportKind::perftest) {
    std::fprintf(stderr, "rdmadiag report: --metrics-file from a saved analyze report is not supported (use analyze --metrics-file)\n");
    return 2;
  }
  bool ok = true;
  if (!o.html_path.empty()) {
    const std::string html = exporters::render_html(report, error);
    if (html.empty()) {
      std::fprintf(stderr, "rdmadiag report: %s: %s\n", o.input.c_str(), error.c_str());
      return 1;
    }
    ok = write_text(o.html_path, html) && ok;
  }
  if (!o.csv_path.empty()) {
    std::ostringstream csv;
    if (kind == exporters::ReportKind::perftest) exporters::write_perftest_csv(csv, report);
    else exporters::write_flows_csv(csv, report.value("flows", exporters::Json::array()));
    ok = write_text(o.csv_path, csv.str()) && ok;
  }
  if (!o.metrics_path.empty()) {
    if (!exporters::write_metrics_file(o.metrics_path, exporters::render_perftest_metrics(report), error)) {
      std::fprintf(stderr, "rdmadiag report: %s\n", error.c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

void add_report_command(CLI::App& app, Commands& out) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand("report", "Render a saved JSON report (analyze, capture, perftest) as HTML, CSV or metrics");
  sub->add_option("input", o->input, "JSON report written by --json (or a --jsonl file)")->required();
  sub->add_option("--html", o->html_path, "Write the self-contained HTML report to FILE");
  sub->add_option("--csv", o->csv_path, "Write the per-flow table (analyze) or the per-size results (perftest) as CSV");
  sub->add_option("--metrics-file", o->metrics_path, "perftest: write Prometheus gauges (textfile collector format)");
  sub->footer("Exit status: 0 written; 1 the input is not an rdmadiag report or an output could not be written; 2 bad command line (also: an output is the input).");
  out.push_back(Command{sub, [o] { return run_report(*o); }});
}

}  // namespace rdmadiag::cli
