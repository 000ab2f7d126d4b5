#include "perftest/cli.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "exporters/csv.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"
#include "exporters/metrics.h"
#include "perftest/devices.h"
#include "perftest/engine.h"
#include "perftest/errors.h"
#include "perftest/report.h"

namespace rdmadiag::perftest {

namespace {

struct LeafSpec {
  const char* name;
  Verb verb;
  Measure measure;
  const char* help;
};

constexpr LeafSpec kLeaves[] = {
    {"write-lat", Verb::Write, Measure::Latency, "RDMA WRITE latency (like ib_write_lat)"},
    {"read-lat", Verb::Read, Measure::Latency, "RDMA READ latency (like ib_read_lat)"},
    {"send-lat", Verb::Send, Measure::Latency, "SEND latency (like ib_send_lat)"},
    {"atomic-lat", Verb::Atomic, Measure::Latency, "ATOMIC FETCH_AND_ADD latency (like ib_atomic_lat)"},
    {"write-bw", Verb::Write, Measure::Bandwidth, "RDMA WRITE bandwidth (like ib_write_bw)"},
    {"read-bw", Verb::Read, Measure::Bandwidth, "RDMA READ bandwidth (like ib_read_bw)"},
    {"send-bw", Verb::Send, Measure::Bandwidth, "SEND bandwidth (like ib_send_bw)"},
};

// Everything one leaf subcommand fills in while parsing.
struct LeafState {
  TestOptions options;
  std::string connection = "RC";
  int gid_index = -1;
  int inline_size = -1;
  int mtu = 0;
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
  bool out_json = false;
  std::string out_json_file;
  std::string json_file;
  std::string jsonl_file;  // --run_infinitely: one JSON object per period
  std::string html_file, csv_file, metrics_file;  // exporters/ renders these from the JSON report
  CLI::Option* size_option = nullptr;
  CLI::Option* iters_option = nullptr;
  CLI::Option* gid_option = nullptr;
  CLI::Option* inline_option = nullptr;
  CLI::Option* mtu_option = nullptr;
};

bool write_json_file(const std::string& path, const nlohmann::json& j) {
  if (path == "-") {
    std::cout << exporters::json_text(j, 2) << "\n";
    return true;
  }
  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "rdmadiag: cannot write %s\n", path.c_str());
    return false;
  }
  f << exporters::json_text(j, 2) << "\n";
  return static_cast<bool>(f);
}

// --html, --csv, --metrics-file: rendered by exporters/ from the same JSON report.
bool write_exported(const LeafState& st, const nlohmann::json& report) {
  const auto j = nlohmann::ordered_json::parse(exporters::json_text(report));
  bool ok = true;
  const auto save = [&](const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    f.flush();
    if (!f) {
      std::fprintf(stderr, "rdmadiag: cannot write %s\n", path.c_str());
      ok = false;
    }
  };
  if (!st.html_file.empty()) {
    std::string error;
    const std::string html = exporters::render_html(j, error);
    if (html.empty()) {
      std::fprintf(stderr, "rdmadiag: HTML report: %s\n", error.c_str());
      ok = false;
    } else {
      save(st.html_file, html);
    }
  }
  if (!st.csv_file.empty()) {
    std::ostringstream csv;
    exporters::write_perftest_csv(csv, j);
    save(st.csv_file, csv.str());
  }
  if (!st.metrics_file.empty()) {
    std::string error;
    if (!exporters::write_metrics_file(st.metrics_file, exporters::render_perftest_metrics(j), error)) {
      std::fprintf(stderr, "rdmadiag: %s\n", error.c_str());
      ok = false;
    }
  }
  return ok;
}

// --run_infinitely with --metrics-file: the file is rewritten with every period's gauges (the
// textfile collector then always sees the latest period); the final report overwrites it.
void write_period_metrics(const SizeResult& period, const TestOptions& o, const std::string& metrics_file) {
  if (metrics_file.empty()) return;
  TestResult r;
  r.info.test = o.test_name;
  r.info.role = o.peer.empty() ? "server" : "client";
  r.sizes.push_back(period);
  std::string error;
  if (!exporters::write_metrics_file(metrics_file, exporters::render_perftest_metrics(to_json(r, o)), error))
    std::fprintf(stderr, "rdmadiag: %s\n", error.c_str());
}

// --run_infinitely: one row per period (perftest's), and one JSON line with --jsonl.
void print_period(const SizeResult& period, const TestOptions& o, const std::string& jsonl_file, std::ofstream* jsonl) {
  const double unit = o.report_gbits ? 1048576.0 * 8 / 1e9 : 1.0;
  if (jsonl_file != "-") {
    std::printf(" %-7lu    %-10llu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n", static_cast<unsigned long>(period.size),
                static_cast<unsigned long long>(period.iterations), period.bw_peak_mb_per_sec * unit,
                period.bw_avg_mb_per_sec * unit, period.msg_rate_mpps);
    std::fflush(stdout);
  }
  if (jsonl_file.empty()) return;
  const nlohmann::json line{{"test", o.test_name},
                            {"size", period.size},
                            {"iterations", period.iterations},
                            {"seconds", period.elapsed_usec / 1e6},
                            {"bw_avg", period.bw_avg_mb_per_sec},
                            {"unit", "MB/s (2^20 bytes per second)"},
                            {"msg_rate_mpps", period.msg_rate_mpps}};
  if (jsonl) {
    *jsonl << exporters::json_text(line) << "\n";
    jsonl->flush();
  } else {
    std::printf("%s\n", exporters::json_text(line).c_str());
    std::fflush(stdout);
  }
}

int run_leaf(LeafState& st) {
  TestOptions& o = st.options;
  if (st.size_option->count()) {
    o.size = st.size;
    o.size_given = true;
  } else {
    o.size = o.measure == Measure::Latency ? 2 : 65536;  // perftest's defaults
  }
  if (o.verb == Verb::Atomic) o.size = 8;
  o.iterations = st.iters_option->count() ? st.iterations : (o.measure == Measure::Latency ? 1000 : 5000);
  if (st.gid_option->count()) o.gid_index = st.gid_index;
  if (st.inline_option->count()) o.inline_size = st.inline_size;
  if (st.mtu_option->count()) o.mtu_bytes = st.mtu;
  o.transport = st.connection == "UC" ? Transport::UC : st.connection == "UD" ? Transport::UD : Transport::RC;
  const bool text_to_stdout = st.json_file != "-";

  auto fail_report = [&](const std::string& message) {
    TestResult r;
    r.info.test = o.test_name;
    r.info.role = o.peer.empty() ? "server" : "client";
    r.info.peer = o.peer;
    r.errors.push_back(message);
    return r;
  };

  TestResult result;
  try {
    if (o.peer.empty() && text_to_stdout) {
      // perftest's banner; scripts wait for it before starting the client.
      o.before_accept = [] {
        std::printf("\n************************************\n* Waiting for client to connect... *\n************************************\n");
        std::fflush(stdout);
      };
    }
    if (o.all_sizes && isatty(STDERR_FILENO)) {
      // A sweep takes long (8 MiB messages): say which size is running, on the terminal only.
      o.on_size = [](std::uint64_t size, std::size_t index, std::size_t count) {
        std::fprintf(stderr, "\rrdmadiag perftest: size %llu B (%zu/%zu)   ", static_cast<unsigned long long>(size), index, count);
        if (index == count) std::fputc('\n', stderr);
      };
    }
    std::unique_ptr<std::ofstream> jsonl;
    if (o.run_infinitely) {
      if (!st.jsonl_file.empty() && st.jsonl_file != "-") jsonl = std::make_unique<std::ofstream>(st.jsonl_file);
      o.on_period = [&st, &jsonl, &o](const SizeResult& period) {
        print_period(period, o, st.jsonl_file, jsonl.get());
        write_period_metrics(period, o, st.metrics_file);
      };
    }
    result = run_test(o);
  } catch (const RunError& e) {
    std::fprintf(stderr, "rdmadiag perftest %s: %s\n", o.test_name.c_str(), e.what());
    result = fail_report(e.what());
    if (!st.json_file.empty()) write_json_file(st.json_file, to_json(result, o));
    return 1;
  }
  if (text_to_stdout) {
    std::fputs(format_text(result, o).c_str(), stdout);
    std::fflush(stdout);
  }
  for (const auto& e : result.errors) std::fprintf(stderr, "rdmadiag perftest %s: %s\n", o.test_name.c_str(), e.c_str());
  bool written = true;
  if (!st.json_file.empty()) written = write_json_file(st.json_file, to_json(result, o)) && written;
  if (!st.html_file.empty() || !st.csv_file.empty() || !st.metrics_file.empty())
    written = write_exported(st, to_json(result, o)) && written;
  if (st.out_json || !st.out_json_file.empty())
    written = write_json_file(st.out_json_file.empty() ? "perftest_out.json" : st.out_json_file,
                              to_perftest_style_json(result, o)) && written;
  return result.errors.empty() && written ? 0 : 1;
}

// Options perftest accepts on every test and refuses on latency tests with its own message
// (checked in the engine, so the message is perftest's rather than CLI11's), and perftest's GPU
// memory options, refused with a clear error.
void add_perftest_bandwidth_options(CLI::App& sub, TestOptions& o) {
  sub.add_option("-q,--qp", o.qp_count, "bandwidth: number of QPs, each with -n operations (default 1)")
      ->check(CLI::Range(1, 16384));
  sub.add_flag("-b,--bidirectional", o.bidirectional, "bandwidth: both sides send (the table shows the sum)");
  sub.add_flag("-N,--noPeak", o.no_peak, "bandwidth: do not compute the peak bandwidth");
  sub.add_option("-l,--post_list", o.post_list, "bandwidth: work requests chained per post (default 1; -Q then defaults to it)")
      ->check(CLI::Range(1, 8192));
  sub.add_flag("--perform_warm_up", o.perform_warm_up, "write/read-bw: -t signalled operations per QP before the timed run");
  sub.add_option("--latency_gap", o.latency_gap_usec, "latency tests: spin USEC before each post (default 0)")
      ->check(CLI::Range(0, 10000000));
  sub.add_option("--tclass", o.tclass, "GRH traffic class of the QPs (default: -T's value, else 0)")->check(CLI::Range(0, 255));
  sub.add_option("--flow_label", o.flow_label, "GRH flow label of every QP (default 0)")->check(CLI::Range(0u, 0xfffffu));
  sub.add_option("-r,--rx-depth", o.rx_depth, "receives posted per QP in SEND tests (default 512)")
      ->check(CLI::Range(1, 16384))
      ->each([&o](const std::string&) { o.rx_depth_given = true; });
  sub.add_flag_function("--dont_xchg_versions", [&o](std::int64_t) { o.exchange_versions = false; },
               "skip the version, page size and MTU exchange (the peer needs it too; perftest 4.5 then refuses to run)");
  for (const char* name : {"use_cuda", "use_cuda_bus_id", "use_rocm", "use_neuron", "use_hl", "use_mlu", "use_opencl"})
    sub.add_option_function<std::string>(std::string("--") + name, [&o, name](const std::string&) { o.gpu_option = name; },
                                         "GPU memory: not supported in this build (refused)")
        ->group("");
  for (const char* name : {"use_cuda_dmabuf", "use_rocm_dmabuf", "use_neuron_dmabuf", "use_mlu_dmabuf", "use_musa_dmabuf"})
    sub.add_flag_function(std::string("--") + name, [&o, name](std::int64_t) { o.gpu_option = name; },
                          "GPU memory: not supported in this build (refused)")
        ->group("");
}

void add_leaf(CLI::App& parent, const LeafSpec& spec, rdmadiag::cli::Commands& out) {
  auto st = std::make_shared<LeafState>();
  TestOptions& o = st->options;
  o.verb = spec.verb;
  o.measure = spec.measure;
  o.test_name = spec.name;
  CLI::App* sub = parent.add_subcommand(spec.name, std::string(spec.help) +
                                                        "; server without a peer address, client with one");
  sub->add_option("peer", o.peer, "server address (client mode); omit to be the server");
  sub->add_option("-d,--ib-dev", o.device, "RDMA device (default: the first one)");
  sub->add_option("-i,--ib-port", o.ib_port, "device port (default 1)")->check(CLI::Range(1, 255));
  st->gid_option = sub->add_option("-x,--gid-index", st->gid_index,
                                   "GID index (default: a RoCE v2 IPv4 GID on Ethernet, LID addressing on IB)")
                       ->check(CLI::Range(0, 65535));
  st->size_option = sub->add_option("-s,--size", st->size, "message size in bytes (default 2 for latency, 65536 for bandwidth)")
                        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 31));
  sub->add_flag("-a,--all", o.all_sizes, "run sizes 2 B .. 8 MiB (every size is reported)");
  st->iters_option = sub->add_option("-n,--iters", st->iterations, "iterations (default 1000 for latency, 5000 for bandwidth)")
                         ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  st->inline_option = sub->add_option("-I,--inline_size", st->inline_size, "max inline size (default as perftest: 0 on rxe/siw)")
                          ->check(CLI::Range(0, 4096));
  sub->add_option("-p,--port", o.tcp_port, "port of the out-of-band exchange: TCP, or the rdma_cm port with -R (default 18515)")->check(CLI::Range(1, 65535));
  sub->add_flag("-R,--rdma_cm", o.rdma_cm,
                "connect through rdma_cm, as perftest -R (the exchange too); needed on iWARP (siw); the peer needs -R");
  sub->add_option("-c,--connection", st->connection, "transport: RC (default), UC (write/send, not with -R) or UD (send-lat, send-bw)")
      ->check(CLI::IsMember({"RC", "UC", "UD"}));
  st->mtu_option = sub->add_option("-m,--mtu", st->mtu, "path MTU: 256..4096 (default: the port's active MTU)");
  sub->add_option("-T,--tos", o.tos, "traffic class / DSCP+ECN byte for RoCE")->check(CLI::Range(0, 255));
  sub->add_option("-u,--qp-timeout", o.qp_timeout, "QP timeout exponent (default 14)")->check(CLI::Range(0, 31));
  sub->add_option("-S,--sl", o.sl, "service level (default 0)")->check(CLI::Range(0, 15));
  sub->add_flag("-e,--events", o.use_events, "wait for completions with events instead of polling");
  sub->add_flag("-F,--CPU-freq", o.cpu_freq_warning_ok,
                "accepted for compatibility: rdmadiag measures the counter frequency, so there is no warning to silence");
  sub->add_option("-D,--duration", o.duration_s,
                  "run for SECONDS instead of -n iterations (perftest's phases: a quarter warm-up, the middle measured)")
      ->check(CLI::Range(1, 86400));
  sub->add_flag("-H,--report-histogram", o.print_every_sample,
                "latency tests: print the samples, sorted, without the two largest (as perftest)");
  sub->add_flag("-U,--report-unsorted", o.report_unsorted, "latency tests: print every sample in run order (as perftest)");
  sub->add_flag("-C,--report-cycles", o.report_cycles,
                "latency tests: perftest's figures and the -H/-U lists in timestamp-counter cycles (as perftest)");
  sub->add_option("-W,--report-counters", o.report_counters,
                  "print the change of these port counters, e.g. counters/port_xmit_data,hw_counters/rcvd_pkts")
      ->delimiter(',');
  sub->add_flag("--cpu_util", o.cpu_util,
                "with -D: CPU utilisation over the measured window (perftest's user/(user+idle), all CPUs busy, this process)");
  if (spec.measure == Measure::Bandwidth) {
    sub->add_flag("--report-both", o.report_both, "also print the peer's report (when the peer is rdmadiag)");
    sub->add_option("-t,--tx-depth", o.tx_depth, "operations in flight per QP (default 128)")->check(CLI::Range(1, 8192));
    sub->add_option("-Q,--cq-mod", o.cq_mod,
                    "signal every Nth send (default 100; above 8 KiB every send unless given, as perftest)")
        ->check(CLI::Range(1, 1024))
        ->each([&o](const std::string&) { o.cq_mod_given = true; });
    sub->add_flag("--report_gbits", o.report_gbits, "report Gb/s (10^9 bits) instead of MB/s (2^20 bytes)");
    sub->add_flag("--run_infinitely", o.run_infinitely,
                  "send until Ctrl-C (both sides with -b; send-bw: the server receives), a report every -D seconds (default 5)");
    sub->add_option("--jsonl", st->jsonl_file, "with --run_infinitely: one JSON line per period to FILE ('-': stdout)");
  }
  add_perftest_bandwidth_options(*sub, o);
  sub->add_option("--warmup", o.warmup, "leading iterations excluded from the statistics (default 0)");
  sub->add_flag("--samples", o.keep_samples, "put every sample in the JSON report");
  sub->add_option("--timeout", o.timeout_s, "seconds for connecting and the longest silence during a test (default 60)")
      ->check(CLI::Range(1, 86400));
  sub->add_option("--perftest-version", o.announce_version,
                  "perftest version to announce (default 6.06; >= 6.28 enables upstream's parameter negotiation)");
  sub->add_flag("--out_json", st->out_json, "write a JSON report with perftest's result names (perftest_out.json)");
  sub->add_option("--out_json_file", st->out_json_file, "file for --out_json");
  sub->add_option("--html", st->html_file, "write a self-contained HTML report (histograms, CDF, latency vs size) to FILE");
  sub->add_option("--csv", st->csv_file, "write one CSV row per message size to FILE");
  sub->add_option("--metrics-file", st->metrics_file, "write Prometheus gauges to FILE (node exporter textfile format)");
  sub->add_option("--json", st->json_file, "write the full JSON report to FILE ('-' for stdout instead of the table)");
  out.push_back({sub, [st] { return run_leaf(*st); }});
}

}  // namespace

void add_perftest_commands(CLI::App& app, rdmadiag::cli::Commands& out) {
  CLI::App* perftest = app.add_subcommand("perftest", "verbs latency/bandwidth tests compatible with linux-rdma perftest");
  perftest->require_subcommand(1);
  for (const auto& spec : kLeaves) add_leaf(*perftest, spec, out);

  CLI::App* devices = app.add_subcommand("devices", "RDMA devices, ports, GID tables and counters");
  auto json_file = std::make_shared<std::string>();
  auto counters = std::make_shared<bool>(false);
  devices->add_option("--json", *json_file, "write JSON to FILE ('-' for stdout)");
  devices->add_flag("--counters", *counters, "include the port counters");
  out.push_back({devices, [json_file, counters] {
                   try {
                     const auto j = describe_devices(*counters || !json_file->empty());
                     if (json_file->empty()) {
                       std::fputs(format_devices_text(j, *counters).c_str(), stdout);
                       return 0;
                     }
                     return write_json_file(*json_file, nlohmann::json{{"devices", j}}) ? 0 : 1;
                   } catch (const RunError& e) {
                     std::fprintf(stderr, "rdmadiag devices: %s\n", e.what());
                     return 1;
                   }
                 }});
}

}  // namespace rdmadiag::perftest
