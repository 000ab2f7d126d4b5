// One rank of rdmadiag-mesh (mesh_run.h). Ranks never wait for each other in a collective
// after the start: the two ranks of a pair meet through their own exchange, and rank 0
// collects results; every such wait ends once the awaited rank has been silent for the
// round timeout (mesh_liveness.h), so a hung host costs its peers one timeout each and is
// then named, while a healthy rank that is only late (it waited out the hung one) is waited for.
#include "perftest/mesh_run.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "exporters/json_report.h"
#include "exporters/mesh_report.h"
#include "exporters/metrics.h"
#include "perftest/clock.h"
#include "perftest/engine.h"
#include "perftest/errors.h"
#include "perftest/mesh_liveness.h"
#include "perftest/mesh_mpi.h"
#include "perftest/mesh_outliers.h"
#include "perftest/mesh_schedule.h"

namespace rdmadiag::perftest {

using exporters::MeshHost;
using exporters::MeshPairResult;
using exporters::MeshPairStatus;

namespace {

constexpr int kGoTag = 32000;  // rank 0 -> all: start the next sweep (result_comm; results: tags below kMaxPairTag)

struct Context {
  int rank = 0, size = 0;
  MPI_Comm result_comm = MPI_COMM_NULL;
  MpiSendQueue sends;
  MpiLink link;
  std::unique_ptr<LivenessResponder> responder;
  std::vector<MeshHost> hosts;
};

// Pair steps of sweep s are s x R + round (R rounds per sweep); a rank past its last pair is
// on the step s x R + R, where rank 0 collects the results.
std::uint64_t step_of(std::uint64_t sweep, std::size_t rounds, std::size_t round) { return sweep * rounds + round; }
int result_tag(std::uint64_t sweep) { return static_cast<int>(sweep % kMaxPairTag); }

// Fixed-size so one MPI_Allgather moves every host's description.
struct HostRecord {
  char hostname[64];
  char device[32];
  char gid[48];
};

void copy_text(char* to, std::size_t size, const std::string& from) {
  std::memset(to, 0, size);
  std::memcpy(to, from.data(), std::min(size - 1, from.size()));
}

HostRecord describe_this_host(const MeshOptions& o) {
  HostRecord mine{};
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  copy_text(mine.hostname, sizeof mine.hostname, name);
  if (o.control_only) return mine;
  try {
    const auto names = list_device_names();
    const std::string device = o.device.empty() ? (names.empty() ? "" : names.front()) : o.device;
    copy_text(mine.device, sizeof mine.device, device);
    if (device.empty()) return mine;
    const auto table = read_gid_table(device, o.ib_port);
    const int index = o.gid_index.value_or(choose_gid_index(table));
    for (const auto& g : table)
      if (g.index == index) copy_text(mine.gid, sizeof mine.gid, g.text());
  } catch (const std::exception&) {
    // No device or GID table: the host still takes part; its tests fail with the engine's reason.
  }
  return mine;
}

std::vector<MeshHost> gather_hosts(const MeshOptions& o, int size) {
  const HostRecord mine = describe_this_host(o);
  std::vector<HostRecord> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  std::vector<MeshHost> hosts;
  for (int r = 0; r < size; ++r) {
    const auto& h = all[static_cast<std::size_t>(r)];
    hosts.push_back({r, std::string(h.hostname, strnlen(h.hostname, sizeof h.hostname)),
                     std::string(h.device, strnlen(h.device, sizeof h.device)), std::string(h.gid, strnlen(h.gid, sizeof h.gid))});
  }
  return hosts;
}

std::string peer_label(const Context& c, int peer) {
  return c.hosts[static_cast<std::size_t>(peer)].hostname + "/" + std::to_string(peer);
}

MeshPairStatus classify_error(const std::string& message) {
  const bool timed_out = message.find(kMpiTimeoutText) != std::string::npos || message.find("no progress") != std::string::npos;
  return timed_out ? MeshPairStatus::TimedOut : MeshPairStatus::Failed;
}

MeshPairResult failed_pair(const MeshPair& pair, const std::string& message) {
  MeshPairResult r;
  r.client = pair.client;
  r.server = pair.server;
  r.status = classify_error(message);
  r.error = message;
  return r;
}

// The MPI exchange alone: the client sends a token, the server returns it.
MeshPairResult control_ping(Context& c, const MeshOptions& o, const MeshPair& pair, std::uint64_t step) {
  const bool client = c.rank == pair.client;
  const int peer = client ? pair.server : pair.client;
  MpiPairTransport link(c.link, peer, step, client, peer_label(c, peer));
  std::string token = "rdmadiag-mesh ping " + std::to_string(step);
  token.resize(32, ' ');
  try {
    const auto reply = link.exchange({token.data(), token.size()}, token.size(), "control ping", o.round_timeout_s * 1000);
    if (std::string(reply.begin(), reply.end()) != token) return failed_pair(pair, "control ping: unexpected answer");
  } catch (const std::exception& e) {
    return failed_pair(pair, e.what());
  }
  MeshPairResult r = failed_pair(pair, "");
  r.status = MeshPairStatus::Ok;
  return r;
}

TestOptions engine_options(Context& c, const MeshOptions& o, const MeshPair& pair, std::uint64_t step) {
  TestOptions t;
  t.test_name = o.test;
  t.verb = o.test == "read-lat" ? Verb::Read : o.test == "send-lat" ? Verb::Send : Verb::Write;
  t.measure = o.test == "write-bw" ? Measure::Bandwidth : Measure::Latency;
  t.device = o.device;
  t.ib_port = o.ib_port;
  t.gid_index = o.gid_index;
  t.size = o.size;
  t.size_given = true;
  t.iterations = o.iterations;
  t.timeout_s = o.round_timeout_s;
  t.keep_samples = true;
  t.cpu_freq_warning_ok = true;
  const bool client = c.rank == pair.client;
  const int peer = client ? pair.server : pair.client;
  const std::string label = peer_label(c, peer);
  t.peer = client ? label : "";
  t.exchange_name = "mpi";
  t.make_oob = [&c, peer, step, client, label]() -> std::unique_ptr<OobTransport> {
    return std::make_unique<MpiPairTransport>(c.link, peer, step, client, label);
  };
  return t;
}

MeshPairResult from_engine(const TestResult& t, const MeshPair& pair, bool bandwidth) {
  if (!t.errors.empty()) {
    std::string all;
    for (const auto& e : t.errors) all += (all.empty() ? "" : "; ") + e;
    return failed_pair(pair, all);
  }
  MeshPairResult r = failed_pair(pair, "");
  r.status = MeshPairStatus::Ok;
  if (t.sizes.empty()) return r;
  const SizeResult& s = t.sizes.front();
  if (bandwidth && s.bw_avg_mb_per_sec > 0) r.bw_avg_mb_per_sec = s.bw_avg_mb_per_sec;
  if (s.stats) {
    exporters::MeshLatency l;
    l.samples = s.stats->sample_count;
    l.min_usec = s.stats->min_usec;
    l.median_usec = s.stats->median_usec;
    l.mean_usec = s.stats->mean_usec;
    l.max_usec = s.stats->max_usec;
    l.stdev_usec = s.stats->stdev_usec;
    for (const auto& p : s.stats->percentiles) {
      if (p.quantile == 0.99) l.p99_usec = p.usec;
      if (p.quantile == 0.999) l.p99_9_usec = p.usec;
    }
    r.latency = l;
    r.buckets = exporters::mesh_buckets(s.samples_usec);
  }
  return r;
}

MeshPairResult run_pair(Context& c, const MeshOptions& o, const MeshPair& pair, std::uint64_t step) {
  if (o.control_only) return control_ping(c, o, pair, step);
  try {
    const TestResult t = run_test(engine_options(c, o, pair, step));
    return from_engine(t, pair, o.test == "write-bw");
  } catch (const std::exception& e) {
    return failed_pair(pair, e.what());
  }
}


// Both sides' reports of a pair: the client's measurement, unless either side failed.
MeshPairResult merge_sides(const MeshPair& pair, int round, const std::optional<MeshPairResult>& client,
                           const std::optional<MeshPairResult>& server) {
  MeshPairResult r;
  if (client && client->status == MeshPairStatus::Ok && server && server->status == MeshPairStatus::Ok) {
    r = *client;
  } else {
    r = failed_pair(pair, "");
    r.status = MeshPairStatus::Failed;
    bool timed_out = false;
    for (const auto* side : {&client, &server}) {
      const std::string who = side == &client ? "client " + std::to_string(pair.client) : "server " + std::to_string(pair.server);
      std::string what = !*side ? "sent no result" : (*side)->status == MeshPairStatus::Ok ? "" : (*side)->error;
      timed_out = timed_out || !*side || (*side)->status == MeshPairStatus::TimedOut;
      if (!what.empty()) r.error += (r.error.empty() ? "" : "; ") + who + ": " + what;
    }
    if (timed_out) r.status = MeshPairStatus::TimedOut;
  }
  r.client = pair.client;
  r.server = pair.server;
  r.round = round;
  return r;
}

using SideResults = std::map<std::pair<int, int>, std::pair<std::optional<MeshPairResult>, std::optional<MeshPairResult>>>;

void file_side(SideResults& sides, const MeshPairResult& r, bool from_client) {
  auto& slot = sides[{r.client, r.server}];
  (from_client ? slot.first : slot.second) = r;
}

// One result message of this sweep from any rank, if one has arrived: (source rank, text).
std::optional<std::pair<int, std::string>> poll_result(Context& c, int tag) {
  MpiLock lock(mesh_mpi_mutex());
  int flag = 0;
  MPI_Status status{};
  MPI_Iprobe(MPI_ANY_SOURCE, tag, c.result_comm, &flag, &status);
  if (!flag) return std::nullopt;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::string text(static_cast<std::size_t>(count), '\0');
  MPI_Recv(text.data(), count, MPI_BYTE, status.MPI_SOURCE, tag, c.result_comm, MPI_STATUS_IGNORE);
  return std::pair{status.MPI_SOURCE, std::move(text)};
}

// Rank 0: receives the other ranks' results of this sweep until each rank has sent what it
// owes or has been silent (no result, no liveness answer) for the round timeout.
void collect_results(Context& c, const MeshOptions& o, std::uint64_t sweep, std::uint64_t end_step,
                     std::map<int, std::size_t> owed, SideResults& sides) {
  std::map<int, PeerWatch> waiting;
  for (const auto& [rank, count] : owed)
    if (count > 0) waiting.try_emplace(rank, c.link.alive_comm, rank, end_step, o.round_timeout_s * 1000, c.sends);
  while (!waiting.empty()) {
    if (auto message = poll_result(c, result_tag(sweep))) {
      const auto& [source, text] = *message;
      if (const auto it = waiting.find(source); it != waiting.end()) {
        it->second.heard();
        if (--owed[source] == 0) waiting.erase(it);
      }
      try {
        const auto r = exporters::mesh_pair_from_json(nlohmann::json::parse(text).at("result"));
        file_side(sides, r, source == r.client);
      } catch (const std::exception& e) {
        std::cerr << "rdmadiag-mesh: unreadable result from rank " << source << ": " << e.what() << "\n";
      }
      continue;
    }
    for (auto it = waiting.begin(); it != waiting.end();) it = it->second.alive() ? std::next(it) : waiting.erase(it);
    if (c.link.answer_in_waits) c.link.answer_in_waits->answer_pings();
    c.sends.reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Runs this rank's pairs of one sweep; the other ranks send each result to rank 0 as it is known.
void run_sweep(Context& c, const MeshOptions& o, const std::vector<MeshRound>& rounds, std::uint64_t sweep, SideResults& sides) {
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const auto& pairs = rounds[r].pairs;
    const auto mine = std::find_if(pairs.begin(), pairs.end(), [&](const MeshPair& p) { return p.client == c.rank || p.server == c.rank; });
    if (mine == pairs.end()) continue;
    const std::uint64_t step = step_of(sweep, rounds.size(), r);
    c.responder->enter_step(step);
    MeshPairResult result = run_pair(c, o, *mine, step);
    result.round = static_cast<int>(r);
    if (c.rank == 0) {
      file_side(sides, result, mine->client == 0);
      continue;
    }
    const nlohmann::ordered_json j{{"sweep", sweep}, {"result", exporters::mesh_pair_to_json(result)}};
    const std::string text = exporters::json_text(j);
    c.sends.send(c.result_comm, 0, result_tag(sweep), std::vector<char>(text.begin(), text.end()));
  }
  c.responder->enter_step(step_of(sweep, rounds.size(), rounds.size()));
}

// How many results each other rank sends rank 0 per sweep: one per pair it is in.
std::map<int, std::size_t> results_owed_to_rank0(const std::vector<MeshRound>& rounds) {
  std::map<int, std::size_t> owed;
  for (const auto& round : rounds)
    for (const auto& p : round.pairs)
      for (int rank : {p.client, p.server})
        if (rank != 0) ++owed[rank];
  return owed;
}

bool write_output(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  std::string error;
  if (exporters::write_metrics_file(path, text, error)) return true;
  std::cerr << "rdmadiag-mesh: " << error << "\n";
  return false;
}

void print_summary(const exporters::MeshReport& r) {
  std::size_t ok = 0;
  for (const auto& p : r.pairs) ok += p.status == MeshPairStatus::Ok;
  std::cout << "rdmadiag-mesh: sweep " << r.info.sweep << ": " << r.hosts.size() << " hosts, " << r.pairs.size() << " pairs, "
            << ok << " ok\n";
  for (const auto& h : r.findings.bad_hosts)
    std::cout << "  bad host " << exporters::mesh_host_label(r, h.rank) << ": " << h.bad_pairs << " of " << h.measured_pairs
              << " pairs failed or beyond the threshold"
              << (h.host_median > 0 ? " (median " + std::to_string(h.host_median) + ", others " + std::to_string(h.baseline_median) + ")"
                                    : std::string(" (no working pair)"))
              << "\n";
  for (const auto& l : r.findings.bad_links)
    std::cout << "  bad link " << exporters::mesh_host_label(r, l.client) << " - " << exporters::mesh_host_label(r, l.server)
              << ": " << l.reason << (l.value != 0 ? " (" + std::to_string(l.value) + ")" : "") << "\n";
  if (!r.findings.note.empty()) std::cout << "  note: " << r.findings.note << "\n";
}

}  // namespace

namespace {

exporters::MeshReport build_report(const Context& c, const MeshOptions& o, const std::vector<MeshRound>& rounds,
                                   std::size_t rounds_total, std::uint64_t sweep, const SideResults& sides, bool& incomplete) {
  exporters::MeshReport report;
  auto& i = report.info;
  i.test = o.control_only ? "control-only" : o.test;
  i.size = o.size;
  i.iterations = o.iterations;
  i.round_timeout_s = o.round_timeout_s;
  i.rounds = rounds.size();
  i.rounds_total = rounds_total;
  i.sweep = sweep;
  i.start_time = iso_time_now();
  i.k = o.k;
  i.min_relative_spread = o.min_relative_spread;
  report.hosts = c.hosts;
  for (std::size_t r = 0; r < rounds.size(); ++r)
    for (const auto& pair : rounds[r].pairs) {
      const auto it = sides.find({pair.client, pair.server});
      const std::optional<MeshPairResult> none;
      const auto& client = it == sides.end() ? none : it->second.first;
      const auto& server = it == sides.end() ? none : it->second.second;
      incomplete = incomplete || !client || !server;
      report.pairs.push_back(merge_sides(pair, static_cast<int>(r), client, server));
    }
  std::sort(report.pairs.begin(), report.pairs.end(),
            [](const MeshPairResult& a, const MeshPairResult& b) { return std::pair(a.client, a.server) < std::pair(b.client, b.server); });
  report.findings = find_mesh_outliers(c.size, report.pairs, {o.k, o.min_relative_spread});
  return report;
}

// Rank 0 after its own rounds: gathers, judges, writes. Returns the sweep's exit status.
int finish_sweep(Context& c, const MeshOptions& o, const std::vector<MeshRound>& rounds, std::size_t rounds_total,
                 std::uint64_t sweep, SideResults& sides, exporters::MeshMetrics& metrics, exporters::MetricsServer& server) {
  collect_results(c, o, sweep, step_of(sweep, rounds.size(), rounds.size()), results_owed_to_rank0(rounds), sides);
  bool incomplete = false;
  const auto report = build_report(c, o, rounds, rounds_total, sweep, sides, incomplete);
  metrics.add_sweep(report);
  const std::string prometheus = metrics.render();
  if (!o.metrics_listen.empty()) server.set_body(prometheus);
  bool written = write_output(o.json, exporters::json_text(exporters::render_mesh_json(report), 2) + "\n");
  written = write_output(o.csv, exporters::render_mesh_csv(report)) && written;
  written = write_output(o.html, exporters::render_mesh_html(report)) && written;
  written = write_output(o.metrics_file, prometheus) && written;
  print_summary(report);
  if (incomplete) {
    std::cout << "  incomplete: a rank sent no result within the deadline (it is hung or dead)\n";
    return kMeshIncomplete;
  }
  if (!written) return 2;
  const bool all_ok = std::all_of(report.pairs.begin(), report.pairs.end(), [](const auto& p) { return p.status == MeshPairStatus::Ok; });
  return all_ok && report.findings.bad_hosts.empty() && report.findings.bad_links.empty() ? 0 : 1;
}

// Continuous mode: rank 0 starts each sweep `interval` after the previous one started.
void wait_for_sweep(Context& c, const MeshOptions& o, std::uint64_t previous_start_ns) {
  if (c.rank != 0) {
    // Polled, not a blocking MPI_Recv: that would hold the MPI lock and stop the answers.
    for (;;) {
      {
        MpiLock lock(mesh_mpi_mutex());
        int flag = 0;
        MPI_Iprobe(0, kGoTag, c.result_comm, &flag, MPI_STATUS_IGNORE);
        if (flag) {
          char go = 0;
          MPI_Recv(&go, 1, MPI_BYTE, 0, kGoTag, c.result_comm, MPI_STATUS_IGNORE);
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const std::uint64_t next = previous_start_ns + static_cast<std::uint64_t>(o.interval_s) * 1000000000ull;
  while (monotonic_ns() < next) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int r = 1; r < c.size; ++r) c.sends.send(c.result_comm, r, kGoTag, {1});
}

// --debug-stall-rank: a hung host answers nothing, not even liveness pings.
[[noreturn]] void stall_forever(Context& c) {
  c.responder->stop();
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// A thread answers liveness pings where MPI allows it (MPI_THREAD_SERIALIZED), else the
// waits do. It vouches for one step at most 10 round timeouts (at least a minute).
void start_liveness(Context& c, const MeshOptions& o, bool mpi_threads) {
  c.responder = std::make_unique<LivenessResponder>(c.link.alive_comm, std::max(60, 10 * o.round_timeout_s));
  if (mpi_threads)
    c.responder->start_thread();
  else
    c.link.answer_in_waits = c.responder.get();
}

}  // namespace

int run_mesh(const MeshOptions& o, int rank, int size, bool mpi_threads) {
  Context c;
  c.rank = rank;
  c.size = size;
  MPI_Comm_dup(MPI_COMM_WORLD, &c.link.pair_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &c.link.alive_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &c.result_comm);
  c.link.sends = &c.sends;
  c.hosts = gather_hosts(o, size);
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is up before the first pair waits on a peer
  start_liveness(c, o, mpi_threads);
  const auto all_rounds = round_robin_rounds(size);
  const auto rounds = sample_rounds(all_rounds, o.max_rounds == 0 ? all_rounds.size() : o.max_rounds, o.seed);
  exporters::MeshMetrics metrics;
  exporters::MetricsServer server;
  std::string error;
  if (rank == 0 && !o.metrics_listen.empty() && !server.start(o.metrics_listen, error))
    std::cerr << "rdmadiag-mesh: --metrics-listen: " << error << "\n";
  int status = 0;
  std::uint64_t started = 0;
  for (std::uint64_t sweep = 0; o.sweeps == 0 || sweep < o.sweeps; ++sweep) {
    if (sweep > 0) wait_for_sweep(c, o, started);
    started = monotonic_ns();
    if (rank == o.stall_rank) stall_forever(c);
    if (rank == o.late_rank && sweep == 0) std::this_thread::sleep_for(std::chrono::seconds(o.late_s));
    SideResults sides;
    run_sweep(c, o, rounds, sweep, sides);
    if (rank == 0) status = finish_sweep(c, o, rounds, all_rounds.size(), sweep, sides, metrics, server);
    std::cout.flush();
  }
  if (rank != 0) {
    c.sends.drain(o.round_timeout_s * 1000);
    c.responder->stop();
    return 0;
  }
  c.responder->stop();
  server.stop();
  return status;
}

}  // namespace rdmadiag::perftest
