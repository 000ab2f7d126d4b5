// The test engine: runs one perftest-compatible test and returns result structs.
// Formatting (text table, JSON) lives in report.h.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perftest/cpu_util.h"
#include "perftest/statistics.h"
#include "perftest/verbs_resources.h"

namespace rdmadiag::perftest {

class OobTransport;

enum class Verb { Write, Read, Send, Atomic };
enum class Measure { Latency, Bandwidth };

struct TestOptions {
  // Called as each message size starts (a sweep with -a runs many): the engine
  // prints nothing itself; the front end shows progress.
  std::function<void(std::uint64_t size, std::size_t index, std::size_t count)> on_size;
  Verb verb = Verb::Write;
  Measure measure = Measure::Latency;
  std::string device;                 // -d
  int ib_port = 1;                    // -i
  std::optional<int> gid_index;       // -x
  std::uint64_t size = 2;             // -s
  bool size_given = false;
  bool all_sizes = false;             // -a
  std::uint64_t iterations = 1000;    // -n
  std::optional<int> inline_size;     // -I
  int tcp_port = 18515;               // -p
  bool rdma_cm = false;               // -R
  Transport transport = Transport::RC;  // -c
  std::optional<int> mtu_bytes;       // -m
  int tos = -1;                       // -T
  int qp_timeout = 14;                // -u
  int sl = 0;                         // -S
  bool use_events = false;            // -e
  bool cpu_freq_warning_ok = false;   // -F
  int duration_s = 0;                 // -D (0: iterations mode)
  bool print_every_sample = false;    // -H: every sample, sorted, the two largest left out (perftest)
  bool report_unsorted = false;       // -U: every sample in run order (perftest's --report-unsorted)
  bool report_cycles = false;         // -C: perftest's latency figures and -H/-U lists in counter cycles
  std::vector<std::string> report_counters;  // -W: port counters whose change is printed (perftest's names)
  bool report_both = false;           // --report-both
  int tx_depth = 128;                 // -t (bandwidth)
  int qp_count = 1;                   // -q (bandwidth): traffic spread over this many QPs
  bool bidirectional = false;         // -b (bandwidth): both sides send
  bool report_gbits = false;          // --report_gbits: Gb/s (10^9 bits) instead of MB/s (2^20 bytes)
  bool no_peak = false;               // -N: no peak bandwidth (perftest also forces it, see engine)
  int cq_mod = 100;                   // -Q: signal every cq_mod-th send (perftest's DEF_CQ_MOD)
  bool cq_mod_given = false;
  int post_list = 1;                  // -l: work requests chained into one ibv_post_send (bandwidth)
  int rx_depth = 512;                 // -r: receives posted per QP (SEND tests; perftest's DEF_RX_SEND)
  bool rx_depth_given = false;
  std::string gpu_option;             // --use_cuda etc.: refused (no GPU memory in this build)
  bool perform_warm_up = false;       // --perform_warm_up (write/read-bw): -t signalled operations per QP first
  int latency_gap_usec = 0;           // --latency_gap (latency tests): spin this long before each post
  int tclass = -1;                    // --tclass: GRH traffic class (-1: -T's value)
  std::uint32_t flow_label = 0;       // --flow_label: GRH flow label of every QP
  bool exchange_versions = true;      // --dont_xchg_versions clears it
  bool cpu_util = false;              // --cpu_util: CPU utilisation over the -D window (perftest: -D only)
  bool run_infinitely = false;        // --run_infinitely (bandwidth): a report every -D s (default 5) until SIGINT
  // --run_infinitely: called with each period's figures (the front end prints a row / a JSON line).
  std::function<void(const struct SizeResult&)> on_period;
  std::uint64_t warmup = 0;           // --warmup: iterations excluded from statistics
  bool keep_samples = false;          // --samples: raw samples in the JSON
  int timeout_s = 60;                 // --timeout: connection / no-progress limit
  std::string announce_version = "6.06";  // --perftest-version
  std::string peer;                   // empty: server
  std::string test_name;              // "write-lat", ...
  std::function<void()> before_accept;  // server: called once the device is ready, before waiting
  // When set, the out-of-band exchange runs over this transport instead of TCP or rdma_cm
  // (rdmadiag-mesh: MPI point-to-point); test_info.exchange is then exchange_name.
  std::function<std::unique_ptr<OobTransport>()> make_oob;
  std::string exchange_name = "external";
};

// -D: perftest's duration figures over the measured window (latency: t_avg = window time per
// iteration, halved for WRITE/SEND; tps = iterations per second).
struct DurationFigures {
  double seconds = 0;
  double t_avg_usec = 0;
  double tps = 0;
};

// One QP's share of a bandwidth run (-q): what it moved, over its own first post .. last completion.
struct QpShare {
  std::uint32_t qpn = 0;
  std::uint64_t messages = 0;
  double bw_avg_mb_per_sec = 0;
  double completion_p50_usec = 0, completion_p99_usec = 0;  // its signalled operations' post -> completion
};

// --run_infinitely: the whole run behind the last period's figures, and what ended it.
struct InfiniteRun {
  std::uint64_t periods = 0;   // periods reported
  std::uint64_t messages = 0;  // messages over the whole run (sender: completed; send-bw server: received)
  double seconds = 0;          // the whole run, first post (or receive loop start) to the end
  std::string ended_by;        // "SIGINT" or "peer closed"
};

struct SizeResult {
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
  // Latency tests.
  std::optional<LatencyStatistics> stats;   // exact, over samples after warm-up
  std::optional<PerftestFigures> perftest;  // perftest's own figures for the same samples
  bool perftest_in_cycles = false;          // -C (iteration mode): those figures are in counter cycles
  std::vector<double> samples_usec;         // kept when asked (-H, --samples)
  // Bandwidth tests.
  double bw_peak_mb_per_sec = 0, bw_avg_mb_per_sec = 0, msg_rate_mpps = 0;
  std::optional<oob::BwReport> remote_report;  // what the peer reported (bw tests)
  bool bidirectional = false;                  // -b: the table shows local + remote_report, as perftest
  double bw_min_window_mb_per_sec = 0;         // slowest tenth of the run (sliding), 0 if not known
  double min_window_seconds = 0;
  std::vector<QpShare> per_qp;                 // -q: each QP's share (the sender's side)
  // Bandwidth sender: post -> completion of every signalled operation (all QPs; -D: the window's).
  std::optional<LatencyStatistics> completion_latency;
  double elapsed_usec = 0;
  std::optional<DurationFigures> duration;  // -D
  std::optional<InfiniteRun> infinite;      // --run_infinitely
  std::optional<CpuUtilisation> cpu_util;   // --cpu_util with -D: over the measured window
};

struct TestInfo {
  std::vector<oob::KeyMessage> local_keys, remote_keys;  // -q: every QP's (also for the text header)
  std::string test, role, device, link_layer, transport, peer, exchange = "tcp";
  int port = 1, gid_index = -1, mtu = 0, inline_size = 0, tos = -1, tcp_port = 18515;
  std::string gid, gid_type, netdev;
  std::string transport_type = "IB";      // perftest's header: "IB", or "IW" on an iWARP device
  std::string local_version, peer_version;
  bool peer_is_rdmadiag = false;
  bool negotiated = false;
  std::string start_time;                 // ISO 8601 UTC
  std::string counter, frequency_source;  // timestamp counter and how its rate was found
  double cycles_per_usec = 0, cpuinfo_mhz = 0;
  std::uint64_t warmup = 0;
  oob::KeyMessage local_key, remote_key;
};

struct TestResult {
  TestInfo info;
  std::vector<SizeResult> sizes;
  std::map<std::string, std::uint64_t> counters_before, counters_after;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};

// Runs the test. Errors after the test info is known are recorded in result.errors (and the
// function returns what it has); errors before that throw RunError.
TestResult run_test(const TestOptions& options);

// The sizes a run covers: 2^1..2^23 with -a (perftest's sweep), else just options.size.
std::vector<std::uint64_t> sizes_to_run(const TestOptions& options);

std::string verb_title(Verb verb, Measure measure);
// The CQ moderation a bandwidth run uses: -Q as perftest adjusts it (-l, large messages, -t).
int effective_cq_mod(const TestOptions& o);
// -t and -r as perftest's force_dependecies leaves them: in iterations mode never above -n.
int effective_tx_depth(const TestOptions& o);
int effective_rx_depth(const TestOptions& o);

std::string iso_time_now();  // "2026-01-02T03:04:05Z" (UTC)  // "RDMA_Write Latency Test", ...

}  // namespace rdmadiag::perftest
