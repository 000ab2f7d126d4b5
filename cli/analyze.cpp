// `rdmadiag analyze FILE...`: decode every frame of one or more capture files and
// report (text summary, --packets lines, --json). Exit status: 0 every input read
// whole; 1 an input could not be opened or is not a capture file; 3 an input was
// damaged or cut short (read up to the damage, the report says where).
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "capture/file_reader.h"
#include "cli/analysis_session.h"
#include "cli/heap_prefault.h"
#include "cli/output_guard.h"
#include "cli/parallel_analysis.h"
#include "cli/pause_options.h"
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
  unsigned jobs = 1;  // 0: one per online CPU
  exporters::OutputOptions outputs;
  PauseCliOptions pause;                   // --link-speed, --pause-storm-ms, --dscp-priority
};

constexpr int kExitOk = 0;
constexpr int kExitUnreadable = 1;
constexpr int kExitDamaged = 3;

// Every input through the session, one frame after the other (-j 1).
int analyze_serial(const AnalyzeOptions& o, AnalysisSession& session) {
  int status = kExitOk;
  HeapPrefault heap;
  std::uint64_t windows_mapped = 0;
  for (const std::string& path : o.files) {
    capture::FileReader reader;
    // One thread reads every record: mapped, not copied (RDMADIAG_READ_COPY=1
    // copies, for the benchmarks and tests).
    reader.set_map_windows(capture::mapping_wanted());
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
    session.capture_points(reader.point_names());
    struct stat st {};
    const std::uint64_t file_size = path != "-" && ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    exporters::ProgressBar progress(!o.quiet);
    std::array<capture::Record, AnalysisSession::kBatchFrames> batch;
    std::uint64_t polled = 0, shown = 0;
    // Without look-ahead, one frame at a time (as frame() by frame(): the tests' reference).
    const std::size_t batch_len = session.options().look_ahead == SessionOptions::LookAhead::never ? 1 : batch.size();
    while (const std::size_t n = reader.next_batch(std::span(batch.data(), batch_len))) {
      // A pcapng file's interfaces may differ; a batch holds more than one
      // record only when the file is read in place, with one interface.
      session.frames(std::span(batch.data(), n), reader.record_linktype(), reader.record_point());
      if (reader.records_read() - polled >= 256) {  // 256 frames: < 1 MB of new flow state
        polled = reader.records_read();
        heap.poll();
      }
      if (progress.on() && reader.records_read() - shown >= 4096) {
        shown = reader.records_read();
        progress.update(path, static_cast<std::uint64_t>(std::max<std::int64_t>(0, reader.file_offset())), file_size,
                        reader.records_read());
      }
    }
    progress.clear();
    session.end_input(reader.records_read(), reader.stop_reason());
    if (!reader.stop_reason().empty()) {
      std::fprintf(stderr, "rdmadiag analyze: %s: damaged capture, %s\n", path.c_str(), reader.stop_reason().c_str());
      status = std::max(status, kExitDamaged);
    }
    windows_mapped += reader.windows_mapped();
  }
  if (std::getenv("RDMADIAG_LOOK_AHEAD_STATS"))  // for the tests: whether frames were loaded ahead, windows mapped
    std::fprintf(stderr, "rdmadiag analyze: frames loaded ahead: %llu\nrdmadiag analyze: windows mapped: %llu\n",
                 static_cast<unsigned long long>(session.frames_looked_ahead()),
                 static_cast<unsigned long long>(windows_mapped));
  if (std::getenv("RDMADIAG_HUGE_PAGES_STATE"))  // for the tests: what the heap was given (cli/heap_prefault.h)
    std::fprintf(stderr, "rdmadiag analyze: heap: THP mode '%s', %s, %llu MiB marked huge, %llu MiB pre-faulted; "
                 "AnonHugePages: %ld kB\n", thp_mode().c_str(), heap.huge() ? "huge pages" : heap.on() ? "pre-fault" : "off",
                 static_cast<unsigned long long>(heap.huge_bytes() >> 20),
                 static_cast<unsigned long long>(heap.populated_bytes() >> 20), anon_huge_pages_kb());
  return status;
}

// -j N: the same inputs through N shards (cli/parallel_analysis.h), merged into
// the session. False, with nothing given to the session or printed but a note,
// when the shards could not be merged exactly: the caller then runs -j 1.
bool analyze_parallel(const AnalyzeOptions& o, unsigned jobs, const SessionOptions& so, const decode::PfcOptions& pfc,
                      AnalysisSession& session, int& status) {
  const bool tally = so.outputs.tally || !so.json_path.empty() || !so.outputs.html_path.empty() ||
                     !so.outputs.metrics_path.empty();
  ParallelAnalysis par(jobs, so.decode, o.pmtu, tally, pfc);
  ParallelAnalysis::Result r = par.run(o.files, !o.quiet);
  if (!r.exact) {
    std::fprintf(stderr,
                 "rdmadiag analyze: -j %u: a frame's decoded addresses differ from its shard's, a CM exchange spans "
                 "two shards, a corrupt packet's address may be another shard's, the shards' pause states differ, "
                 "or an input changed while it was read; analysing on one thread\n",
                 jobs);
    return false;
  }
  status = kExitOk;
  for (const ParallelAnalysis::Input& in : r.inputs) {  // the notes analyze_serial prints, in the same order
    if (!in.error.empty()) {
      std::fprintf(stderr, "rdmadiag analyze: %s\n", in.error.c_str());
      status = std::max(status, kExitUnreadable);
      continue;
    }
    if (!decode::linktype_supported(in.linktype))
      std::fprintf(stderr, "rdmadiag analyze: %s: link type %u is not one rdmadiag decodes; frames are counted only\n",
                   in.path.c_str(), in.linktype);
    if (!in.stop_reason.empty()) {
      std::fprintf(stderr, "rdmadiag analyze: %s: damaged capture, %s\n", in.path.c_str(), in.stop_reason.c_str());
      status = std::max(status, kExitDamaged);
    }
  }
  if (std::getenv("RDMADIAG_JOBS_STATS")) {  // for the tests: how the frames were spread
    std::string counts;
    for (std::uint64_t c : r.frames_per_shard) counts += " " + std::to_string(c);
    std::fprintf(stderr,
                 "rdmadiag analyze: -j %u: frames per shard:%s; split parts walked again: %llu; ICRCs verified by the "
                 "walk: %llu\n",
                 jobs, counts.c_str(), static_cast<unsigned long long>(r.split_rewalks),
                 static_cast<unsigned long long>(r.split_icrc_verified));
  }
  if (r.bounds_reached)
    std::fprintf(stderr,
                 "rdmadiag analyze: -j %u: a shard reached a flow-table bound; the report may differ from -j 1's "
                 "(docs/analysis.md)\n",
                 jobs);
  for (const ParallelAnalysis::Input& in : r.inputs) {
    if (!in.error.empty()) {
      session.input_failed(in.path, in.error);
      continue;
    }
    session.begin_input(in.path, in.linktype, in.snaplen);
    session.capture_points(in.point_names);
    session.end_input(in.records, in.stop_reason);
  }
  session.adopt(std::move(r.analyzer), std::move(r.tally));
  par.keep_shards_until_exit();
  return true;
}

unsigned resolve_jobs(const AnalyzeOptions& o) {
  unsigned jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  if (jobs <= 1) return 1;
  // Per-packet outputs come in frame order from one analysis; standard input cannot be read again.
  const char* why = o.packets                                 ? "--packets"
                    : !o.outputs.jsonl_path.empty()            ? "--jsonl"
                    : !o.outputs.csv_packets_path.empty()      ? "--csv-packets"
                    : std::any_of(o.files.begin(), o.files.end(), [](const std::string& f) { return f == "-"; })
                        ? "standard input"
                        : nullptr;
  if (why) {
    std::fprintf(stderr, "rdmadiag analyze: -j %u: %s is analysed on one thread\n", jobs, why);
    return 1;
  }
  return jobs;
}

int run_analyze(const AnalyzeOptions& o) {
  decode::PfcOptions pfc;
  if (!to_pfc_options(o.pause, "analyze", pfc)) return 2;
  SessionOptions so;
  so.packets = o.packets;
  so.json_path = o.json_path;
  so.quiet = o.quiet;
  so.outputs = o.outputs;
  so.decode.roce_heuristic = !o.no_heuristic;
  if (const char* la = std::getenv("RDMADIAG_LOOK_AHEAD"))  // for the tests: always / never (cli/analysis_session.h)
    so.look_ahead = std::string(la) == "always"  ? SessionOptions::LookAhead::always
                    : std::string(la) == "never" ? SessionOptions::LookAhead::never
                                                 : SessionOptions::LookAhead::automatic;
  for (auto port : o.roce_ports)
    if (!so.decode.add_roce_port(port)) {
      std::fprintf(stderr, "rdmadiag analyze: at most %zu extra RoCE ports\n", so.decode.extra_roce_ports.size());
      return 2;
    }
  if (!outputs_apart("analyze", o.files, report_outputs(o.json_path, o.outputs), {"--json", "--jsonl"})) return 2;
  const unsigned jobs = resolve_jobs(o);
  // Per-packet outputs (--packets, --jsonl, --csv-packets) show each request's
  // response frame, which is known only after the response, and the final
  // verdicts (a gap narrowed by late PSNs, a resend shown needed by its answers):
  // a first pass over the files finds them (not possible for standard input,
  // which cannot be read twice).
  std::unordered_map<std::uint64_t, decode::TransportAnalyzer::ForwardLink> links;
  std::unordered_map<std::uint64_t, std::int64_t> gap_revisions;  // gap frame -> PSNs found late after it
  std::vector<decode::SpuriousRevision> spurious_revisions;
  std::unordered_map<std::uint64_t, decode::ReplayRevision> replays;
  const bool per_packet = o.packets || !o.outputs.jsonl_path.empty() || !o.outputs.csv_packets_path.empty();
  const bool two_pass = per_packet && std::none_of(o.files.begin(), o.files.end(), [](const std::string& f) { return f == "-"; });
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
        decode::decode_frame(reader.record_linktype(), rec.data, rec.wirelen, so.decode, pkt);
        decode::take_reader_point(pkt, reader.record_point());
        first.add(pkt, ++frame, static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9, pa, rec.ts_ns());
      }
    }
    first.finish();
    links = first.transport().forward_links();
    for (const decode::GapRevision& r : first.anomalies().revisions()) gap_revisions[r.frame] += r.missing;
    spurious_revisions = first.anomalies().spurious_revisions();
    for (const decode::ReplayRevision& r : first.anomalies().replay_revisions()) replays[r.frame] = r;
  }
  const SessionOptions parallel_options = so;
  AnalysisSession session(std::move(so));
  session.set_forward_links(std::move(links));
  if (two_pass) {
    session.set_gap_revisions(std::move(gap_revisions));
    session.set_spurious_revisions(std::move(spurious_revisions));
    session.set_replay_revisions(std::move(replays));
  }
  session.analyzer().transport().set_pmtu_override(o.pmtu);
  session.analyzer().pfc().set_options(pfc);
  if (!session.open()) {
    std::fprintf(stderr, "rdmadiag analyze: %s\n", session.error().c_str());
    return kExitUnreadable;
  }
  int status = kExitOk;
  if (jobs <= 1 || !analyze_parallel(o, jobs, parallel_options, pfc, session, status)) status = analyze_serial(o, session);
  if (!session.finish()) {
    std::fprintf(stderr, "rdmadiag analyze: %s\n", session.error().c_str());
    status = std::max(status, kExitUnreadable);
  }
  session.keep_analysis_until_exit();
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
                  "Flows with their own metric labels; the rest are summed into flow=\"other\" (default 100)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--roce-port", opts->roce_ports, "Extra UDP destination port carrying RoCEv2 (repeatable)")
      ->check(CLI::Range(1, 65535));
  sub->add_flag("--no-roce-heuristic", opts->no_heuristic, "Do not look for RoCEv2 on other UDP ports");
  sub->add_option("--pmtu", opts->pmtu, "Path MTU of the fabric (default: from CM REQs and segment sizes)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  add_pause_options(sub, &opts->pause);
  sub->add_flag("-q,--quiet", opts->quiet, "No text report on standard output");
  sub->add_option("-j,--jobs", opts->jobs,
                  "Analyse on N threads, sharded by connection (0: one per CPU); the report is the same for any N. "
                  "--packets, --jsonl, --csv-packets and standard input run on one thread")
      ->check(CLI::Range(0u, 256u));
  sub->footer(
      "Exit status: 0 all input read; 1 an input could not be opened or is not a capture file, or a report\n"
      "could not be written; 2 bad command line (also: an output file is one of the inputs); 3 an input was\n"
      "damaged or cut short (read up to the damage).");
  out.push_back(Command{sub, [opts] { return run_analyze(*opts); }});
}

}  // namespace rdmadiag::cli
