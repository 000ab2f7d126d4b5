// `rdmadiag capture`: capture on live interfaces (libpcap, or RDMA sniffer
// devices) or replay capture files, decode and analyse every packet as it
// arrives, optionally write the packets (pcap/pcapng, tcpdump-style rotation),
// and end with the same report as `rdmadiag analyze`. Built for incidents: the
// output file is valid however the capture ends (count, duration, Ctrl-C,
// SIGTERM, disk full) and the kernel's drop counters are always reported.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "capture/live_source.h"
#include "capture/packet_queue.h"
#include "capture/pcap_writer.h"
#include "capture/rdma_sniffer.h"
#include "cli/analysis_session.h"
#include "cli/pause_options.h"
#include "cli/command.h"
#include "cli/output_guard.h"
#include "exporters/metrics.h"
#include "exporters/svg_plot.h"

namespace rdmadiag::cli {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitCannotStart = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDamagedInput = 3;
constexpr int kExitWriteFailed = 4;

struct CaptureOptions {
  std::vector<std::string> interfaces;
  std::vector<std::string> read_files;
  std::string write_path;
  bool pcapng = false;
  std::string rotate_size;
  std::uint32_t rotate_seconds = 0;
  std::uint32_t max_files = 0;
  std::uint64_t count = 0;
  double duration = 0;
  int buffer_kib = 0;
  int snaplen = 0;
  bool immediate = false;
  bool no_promiscuous = false;
  std::string tstamp_type;
  std::string tstamp_precision = "micro";
  bool packet_buffered = false;
  std::string user;
  bool force = false;
  bool packets = false;
  std::string json_path;
  bool quiet = false;
  bool no_status = false;
  bool list = false;
  std::vector<std::uint16_t> roce_ports;
  bool no_heuristic = false;
  std::vector<std::string> filter_words;
  std::string metrics_listen;
  double linger = 0;
  std::uint32_t queue_packets = 65536;
  exporters::OutputOptions outputs;
  PauseCliOptions pause;  // --link-speed (else learned from a single -i interface), --pause-storm-ms, --dscp-priority
};

std::atomic<int> g_signal{0};

void on_stop_signal(int sig) { g_signal.store(sig); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll() returns at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  // A closed output pipe must end the capture with a message, not kill it.
  std::signal(SIGPIPE, SIG_IGN);
}

// tcpdump's -C: a plain number is millions of bytes; k/m/g suffixes are binary units.
bool parse_rotate_size(const std::string& text, std::uint64_t& bytes) {
  if (text.empty()) return false;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return false;
  }
  const std::string suffix = text.substr(used);
  double unit = 1e6;
  if (suffix == "k" || suffix == "K") unit = 1024;
  else if (suffix == "m" || suffix == "M") unit = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "G") unit = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) return false;
  if (!(v > 0)) return false;
  bytes = static_cast<std::uint64_t>(v * unit);
  return bytes > 0;
}

bool drop_privileges(const std::string& user, std::string& error) {
  const passwd* pw = getpwnam(user.c_str());
  if (!pw) {
    error = "-Z " + user + ": no such user";
    return false;
  }
  if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
    error = "-Z " + user + ": cannot switch to that user: " + std::strerror(errno);
    return false;
  }
  if (pw->pw_uid != 0 && setuid(0) == 0) {
    error = "-Z " + user + ": root privileges could be regained; refusing to continue";
    return false;
  }
  return true;
}

using exporters::human_bytes;

struct SourceState {
  std::unique_ptr<capture::PacketSource> source;
  std::size_t index = 0;
  bool finished = false;
  std::uint64_t captured = 0;
  capture::SourceStats last_stats;
};

// What the capture thread counts, read by the analysis thread for the status line.
struct CaptureCounters {
  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> not_analysed{0};  // live packets the full analysis queue could not take
};

// Runs on the capture thread and receives every packet of every source: write
// it first (never lose it), then hand a copy to the analysis thread. A live
// source is never held up by the analysis: when the queue is full the packet is
// counted as not analysed (it is in the file). A file source just waits.
class CaptureSink final : public capture::PacketSink {
 public:
  CaptureSink(capture::PacketQueue& queue, CaptureCounters& counters, capture::CaptureWriter* writer)
      : queue_(queue), counters_(counters), writer_(writer) {}
  void set_source(SourceState* s) { source_ = s; }
  void packet(const capture::Record& rec) override {
    if (writer_ && !write_stopped_ && !writer_->write(rec, source_->index, static_cast<std::time_t>(rec.ts_sec)))
      write_stopped_ = true;
    if (write_stopped_ && (!writer_->error().empty() || writer_->done())) {
      // Not written: not counted as captured either, so the report matches the file.
      return;
    }
    const auto source = static_cast<std::uint32_t>(source_->index);
    if (!queue_.push(rec, source)) {
      if (source_->source->is_live()) {
        counters_.not_analysed.fetch_add(1, std::memory_order_relaxed);
      } else {
        queue_.notify();
        while (!queue_.push(rec, source)) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    ++source_->captured;
    ++packets_;
    bytes_ += rec.wirelen;
    counters_.packets.store(packets_, std::memory_order_relaxed);
    counters_.bytes.store(bytes_, std::memory_order_relaxed);
  }
  bool write_stopped() const { return write_stopped_; }
  std::uint64_t packets() const { return packets_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  capture::PacketQueue& queue_;
  CaptureCounters& counters_;
  capture::CaptureWriter* writer_;
  SourceState* source_ = nullptr;
  bool write_stopped_ = false;
  std::uint64_t packets_ = 0;
  std::uint64_t bytes_ = 0;
};

int list_interfaces() {
  std::string err;
  const auto ifaces = capture::list_pcap_interfaces(err);
  if (!err.empty()) std::fprintf(stderr, "rdmadiag capture: cannot list interfaces: %s\n", err.c_str());
  int n = 0;
  for (const auto& line : ifaces) std::printf("%d.%s\n", ++n, line.c_str());
  std::string rdma_err;
  const auto devs = capture::list_rdma_devices(rdma_err);
  for (const auto& d : devs)
    for (const auto& p : d.ports)
      std::printf("%d.rdma:%s:%u\tRDMA sniffer, %s port, %s%s%s%s\n", ++n, d.name.c_str(), p.port, p.link_layer.c_str(), p.state.c_str(),
                  d.driver.empty() ? "" : (", driver " + d.driver).c_str(), d.netdev.empty() ? "" : ", netdev ",
                  d.netdev.c_str());
  if (devs.empty()) std::fprintf(stderr, "rdmadiag capture: no RDMA devices (%s)\n", rdma_err.empty() ? "libibverbs lists none" : rdma_err.c_str());
  return n > 0 ? kExitOk : kExitCannotStart;
}

void print_status(const std::vector<capture::SourceStats>& stats, const CaptureCounters& counters, AnalysisSession& session,
                  double elapsed, std::uint64_t last_packets, std::uint64_t last_bytes, double interval) {
  std::uint64_t drops = 0, if_drops = 0;
  for (const auto& s : stats) {
    drops += s.dropped;
    if_drops += s.if_dropped;
  }
  const std::uint64_t packets = counters.packets.load(std::memory_order_relaxed);
  const std::uint64_t bytes = counters.bytes.load(std::memory_order_relaxed);
  const std::uint64_t not_analysed = counters.not_analysed.load(std::memory_order_relaxed);
  const double pps = interval > 0 ? static_cast<double>(packets - last_packets) / interval : 0;
  const double bps = interval > 0 ? static_cast<double>(bytes - last_bytes) * 8 / interval : 0;
  std::string rate = human_bytes(bps);
  rate.back() = 'b';  // "12.3 Mb": bits, like link speeds
  const std::string lost = not_analysed ? " | " + std::to_string(not_analysed) + " not analysed (analysis queue full)" : "";
  std::fprintf(stderr, "\r%4.0fs %llu pkts %s | %.0f pkt/s %s/s | %zu QPs | %llu anomalies | kernel drops %llu, interface drops %llu%s\033[K",
               elapsed, static_cast<unsigned long long>(packets), human_bytes(static_cast<double>(bytes)).c_str(), pps,
               rate.c_str(), session.analyzer().summary().queue_pairs(),
               static_cast<unsigned long long>(session.analyzer().anomalies().total()), static_cast<unsigned long long>(drops),
               static_cast<unsigned long long>(if_drops), lost.c_str());
  std::fflush(stderr);
}

// The pause analysis' options; without --link-speed, the speed of the one
// network interface captured on (a pause's length depends on the link it paused).
bool capture_pfc_options(const CaptureOptions& o, decode::PfcOptions& pfc) {
  if (!to_pfc_options(o.pause, "capture", pfc)) return false;
  std::string dev;
  unsigned port = 1;
  bool prefixed = false;
  if (pfc.link_bps || o.interfaces.size() != 1 || !o.read_files.empty() ||
      capture::parse_rdma_spec(o.interfaces[0], dev, port, prefixed))
    return true;
  pfc.link_bps = interface_speed_bps(o.interfaces[0]);
  if (pfc.link_bps && !o.quiet)
    std::fprintf(stderr, "rdmadiag capture: link speed %.3f Gb/s from %s (for pause times; --link-speed overrides)\n",
                 static_cast<double>(pfc.link_bps) / 1e9, o.interfaces[0].c_str());
  return true;
}

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One run of `rdmadiag capture`, in the order it happens: check the command
// line; open the sources while still privileged; drop privileges; open the
// outputs; capture on this thread while a second one analyses; report. A step
// that can end the run returns the exit status, or kGoOn.
class CaptureRun {
 public:
  explicit CaptureRun(CaptureOptions o) : o_(std::move(o)) {}
  int run();

 private:
  static constexpr int kGoOn = -1;
  // What the analysis thread's last tick saw (status line and warnings).
  struct TickState {
    Clock::time_point last;
    std::uint64_t packets = 0, bytes = 0, drops = 0, not_analysed = 0;
  };

  int check_command_line();
  void set_live_options();
  int open_sources();
  int open_interface(const std::string& name, SourceState& st);
  int open_writer();
  int open_analysis();
  int start_metrics();
  void publish_metrics(const std::vector<capture::SourceStats>& stats, bool running);
  std::vector<capture::SourceStats> current_stats() const;
  void announce() const;
  void start_analysis_thread();
  void analyse();
  void tick(TickState& t, bool force);
  void capture_loop();
  std::string stop_reason(double elapsed) const;
  void wait_for_packets(std::vector<pollfd>& fds, double elapsed) const;
  int dispatch_all(bool draining);
  void refresh_stats();
  void drain_and_join();
  std::string close_writer();
  int report(const std::string& write_error);
  exporters::Json sources_report(int& status);
  int print_closing_lines(const std::string& write_error) const;
  void linger() const;

  CaptureOptions o_;
  decode::PfcOptions pfc_;
  std::uint64_t rotate_bytes_ = 0;
  capture::LiveOptions live_;
  std::vector<SourceState> sources_;
  int pcap_stdout_ = STDOUT_FILENO;
  std::unique_ptr<capture::CaptureWriter> writer_;
  std::unique_ptr<AnalysisSession> session_;
  CaptureCounters live_counters_;  // written by the capture thread
  exporters::MetricsServer metrics_;
  bool any_live_ = false, status_line_ = false;
  std::unique_ptr<capture::PacketQueue> queue_;
  std::unique_ptr<CaptureSink> sink_;
  std::vector<std::uint32_t> linktypes_;
  // Source counters as last read by the capture thread (pcap_stats is not for
  // another thread to call), for the analysis thread's status line and metrics.
  std::mutex stats_mutex_;
  std::vector<capture::SourceStats> shared_stats_;
  std::atomic<bool> capture_done_{false};
  std::thread analysis_thread_;
  Clock::time_point start_;
  std::string stopped_by_ = "end of input";
  std::string source_error_;
};

int CaptureRun::run() {
  if (o_.list) return list_interfaces();
  if (const int s = check_command_line(); s != kGoOn) return s;
  set_live_options();
  if (const int s = open_sources(); s != kGoOn) return s;
  if (!o_.user.empty()) {
    std::string err;
    if (!drop_privileges(o_.user, err)) {
      std::fprintf(stderr, "rdmadiag capture: %s\n", err.c_str());
      return kExitCannotStart;
    }
  }
  if (const int s = open_writer(); s != kGoOn) return s;
  if (const int s = open_analysis(); s != kGoOn) return s;
  if (const int s = start_metrics(); s != kGoOn) return s;
  publish_metrics(current_stats(), true);
  install_signal_handlers();
  any_live_ = std::any_of(sources_.begin(), sources_.end(), [](const SourceState& s) { return s.source->is_live(); });
  status_line_ = any_live_ && !o_.no_status && isatty(STDERR_FILENO) && !(o_.packets && isatty(STDOUT_FILENO));
  announce();
  start_analysis_thread();
  capture_loop();
  drain_and_join();
  const std::string write_error = close_writer();
  int status = report(write_error);
  publish_metrics(current_stats(), false);
  status = std::max(status, print_closing_lines(write_error));
  linger();
  metrics_.stop();
  return status;
}

int CaptureRun::check_command_line() {
  if (!capture_pfc_options(o_, pfc_)) return kExitUsage;
  if (o_.interfaces.empty() && o_.read_files.empty()) {
    std::fprintf(stderr, "rdmadiag capture: name an interface (-i IFACE, -i rdma:DEV:PORT) or a file (-r FILE); --list-interfaces shows them\n");
    return kExitUsage;
  }
  if (!o_.rotate_size.empty() && !parse_rotate_size(o_.rotate_size, rotate_bytes_)) {
    std::fprintf(stderr, "rdmadiag capture: -C %s: expected a size in millions of bytes, or with a k/m/g suffix\n", o_.rotate_size.c_str());
    return kExitUsage;
  }
  if ((rotate_bytes_ || o_.rotate_seconds || o_.max_files) && o_.write_path.empty()) {
    std::fprintf(stderr, "rdmadiag capture: -C, -G and -W need -w FILE\n");
    return kExitUsage;
  }
  if (o_.tstamp_precision != "micro" && o_.tstamp_precision != "nano") {
    std::fprintf(stderr, "rdmadiag capture: --time-stamp-precision must be micro or nano\n");
    return kExitUsage;
  }
  if (o_.write_path == "-" && o_.json_path == "-") {
    std::fprintf(stderr, "rdmadiag capture: -w - and --json - cannot both use standard output\n");
    return kExitUsage;
  }
  NamedOutputs outputs = report_outputs(o_.json_path, o_.outputs);
  outputs.emplace_back("-w", o_.write_path);
  if (!outputs_apart("capture", o_.read_files, outputs, {"--json", "--jsonl", "-w"})) return kExitUsage;
  return kGoOn;
}

void CaptureRun::set_live_options() {
  // 32 MiB unless told otherwise: libpcap's 2 MiB fills in milliseconds on a busy RoCE
  // port while every packet is also decoded and analysed (docs/performance.md).
  live_.buffer_kib = o_.buffer_kib > 0 ? o_.buffer_kib : 32768;
  live_.snaplen = o_.snaplen > 0 ? o_.snaplen : 262144;
  live_.immediate = o_.immediate || o_.packet_buffered || o_.write_path == "-";
  live_.promiscuous = !o_.no_promiscuous;
  live_.tstamp_type = o_.tstamp_type;
  live_.nanoseconds = o_.tstamp_precision == "nano";
  for (const auto& w : o_.filter_words) live_.filter += (live_.filter.empty() ? "" : " ") + w;
}

// Every source, opened while still privileged.
int CaptureRun::open_sources() {
  for (const std::string& name : o_.interfaces) {
    SourceState st;
    if (const int s = open_interface(name, st); s != kGoOn) return s;
    st.index = sources_.size();
    sources_.push_back(std::move(st));
  }
  for (const std::string& path : o_.read_files) {
    auto src = std::make_unique<capture::FileSource>();
    if (!src->open(path)) {
      std::fprintf(stderr, "rdmadiag capture: %s\n", src->error().c_str());
      return kExitCannotStart;
    }
    SourceState st;
    st.source = std::move(src);
    st.index = sources_.size();
    sources_.push_back(std::move(st));
  }
  for (const auto& s : sources_)
    if (!decode::linktype_supported(s.source->linktype()))
      std::fprintf(stderr, "rdmadiag capture: %s: link type %u is not one rdmadiag decodes; frames are counted only\n",
                   s.source->name().c_str(), s.source->linktype());
  return kGoOn;
}

// A network interface (libpcap) or an RDMA sniffer device.
int CaptureRun::open_interface(const std::string& name, SourceState& st) {
  std::string dev;
  unsigned port = 1;
  bool prefixed = false;
  if (capture::parse_rdma_spec(name, dev, port, prefixed)) {
    auto src = std::make_unique<capture::RdmaSnifferSource>();
    if (!src->open(dev, port, live_.snaplen)) {
      std::fprintf(stderr, "rdmadiag capture: %s\n", src->error().c_str());
      return kExitCannotStart;
    }
    if (!live_.filter.empty())
      std::fprintf(stderr, "rdmadiag capture: %s: capture filters do not apply to RDMA sniffer devices; capturing everything\n",
                   src->name().c_str());
    st.source = std::move(src);
    return kGoOn;
  }
  auto src = std::make_unique<capture::PcapLiveSource>();
  if (!src->open(name, live_)) {
    std::fprintf(stderr, "rdmadiag capture: %s\n", src->error().c_str());
    return kExitCannotStart;
  }
  for (const auto& w : src->warnings()) std::fprintf(stderr, "rdmadiag capture: warning: %s\n", w.c_str());
  st.source = std::move(src);
  return kGoOn;
}

int CaptureRun::open_writer() {
  // With -w -, standard output carries the capture: the text report goes to stderr.
  if (o_.write_path == "-") {
    std::cout.flush();
    pcap_stdout_ = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (pcap_stdout_ < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      std::fprintf(stderr, "rdmadiag capture: cannot set up standard output: %s\n", std::strerror(errno));
      return kExitCannotStart;
    }
  }
  if (o_.write_path.empty()) return kGoOn;
  capture::WriterOptions wo;
  wo.path = o_.write_path;
  wo.stdout_fd = pcap_stdout_;
  wo.format = o_.pcapng ? capture::FileFormat::pcapng : capture::FileFormat::pcap;
  wo.rotate_bytes = rotate_bytes_;
  wo.rotate_seconds = o_.rotate_seconds;
  wo.max_files = o_.max_files;
  wo.force = o_.force;
  wo.flush_each_batch = o_.packet_buffered || o_.write_path == "-";
  std::vector<capture::InterfaceDesc> descs;
  for (const auto& s : sources_)
    descs.push_back({s.source->name(), s.source->description(), s.source->linktype(), s.source->snaplen()});
  writer_ = std::make_unique<capture::CaptureWriter>();
  if (!writer_->open(wo, descs, std::time(nullptr))) {
    std::fprintf(stderr, "rdmadiag capture: %s\n", writer_->error().c_str());
    return kExitCannotStart;
  }
  return kGoOn;
}

int CaptureRun::open_analysis() {
  SessionOptions so;
  so.packets = o_.packets;
  so.json_path = o_.json_path;
  so.quiet = o_.quiet;
  so.outputs = o_.outputs;
  so.outputs.tally = so.outputs.tally || !o_.metrics_listen.empty();
  so.decode.roce_heuristic = !o_.no_heuristic;
  for (auto port : o_.roce_ports)
    if (!so.decode.add_roce_port(port)) {
      std::fprintf(stderr, "rdmadiag capture: at most %zu extra RoCE ports\n", so.decode.extra_roce_ports.size());
      return kExitUsage;
    }
  session_ = std::make_unique<AnalysisSession>(std::move(so));
  session_->analyzer().pfc().set_options(pfc_);
  if (!session_->open()) {
    std::fprintf(stderr, "rdmadiag capture: %s\n", session_->error().c_str());
    return kExitCannotStart;
  }
  return kGoOn;
}

// The metrics endpoint serves a snapshot rendered by the analysis thread
// once a second: the server thread never touches the analysis.
int CaptureRun::start_metrics() {
  if (o_.metrics_listen.empty()) return kGoOn;
  std::string err;
  if (!metrics_.start(o_.metrics_listen, err)) {
    std::fprintf(stderr, "rdmadiag capture: %s\n", err.c_str());
    return kExitCannotStart;
  }
  if (!o_.quiet) std::fprintf(stderr, "rdmadiag capture: metrics on http://%s/metrics\n", o_.metrics_listen.c_str());
  return kGoOn;
}

void CaptureRun::publish_metrics(const std::vector<capture::SourceStats>& stats, bool running) {
  if (o_.metrics_listen.empty()) return;
  exporters::MetricsInput in;
  in.tally = session_->outputs().tally();
  in.analyzer = &session_->analyzer();
  in.max_flow_series = o_.outputs.max_flow_series;
  in.running = running;
  in.not_analysed = live_counters_.not_analysed.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < sources_.size(); ++i)
    in.sources.push_back({sources_[i].source->name(), stats[i].available, stats[i].received, stats[i].dropped, stats[i].if_dropped});
  metrics_.set_body(exporters::render_metrics(in));
}

std::vector<capture::SourceStats> CaptureRun::current_stats() const {
  std::vector<capture::SourceStats> v;
  for (const auto& s : sources_) v.push_back(s.last_stats);
  return v;
}

void CaptureRun::announce() const {
  if (!any_live_ || o_.quiet) return;
  std::string names;
  for (const auto& s : sources_) names += (names.empty() ? "" : ", ") + s.source->name();
  std::fprintf(stderr, "rdmadiag capture: capturing on %s%s%s\n", names.c_str(),
               live_.filter.empty() ? "" : (", filter '" + live_.filter + "'").c_str(),
               o_.write_path.empty() ? ""
                                     : (", writing " + (o_.write_path == "-" ? std::string("to standard output") : o_.write_path)).c_str());
}

// Two threads: this one only takes packets from the sources, writes them and
// queues a copy (as fast as tcpdump, so the kernel drops no more than it);
// the analysis thread decodes and analyses from the queue, and drives the
// status line and the metrics. 64K packets / 64 MiB of queue absorb bursts the analysis
// cannot keep up with for a while (docs/performance.md).
void CaptureRun::start_analysis_thread() {
  // A smaller queue (--queue-packets) gets a proportionally smaller arena, but
  // always room for the largest packets.
  const std::size_t arena_bytes =
      std::clamp<std::size_t>(std::size_t{o_.queue_packets} * 1024, std::size_t{2} * live_.snaplen, std::size_t{64} << 20);
  queue_ = std::make_unique<capture::PacketQueue>(o_.queue_packets, arena_bytes);
  sink_ = std::make_unique<CaptureSink>(*queue_, live_counters_, writer_.get());
  for (const auto& s : sources_) linktypes_.push_back(s.source->linktype());
  shared_stats_ = current_stats();
  start_ = Clock::now();
  // The analysis thread leaves the stop signals to this thread, whose poll() they interrupt.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);
  analysis_thread_ = std::thread([this] { analyse(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void CaptureRun::analyse() {
  // When the CPUs are busy, taking packets from the kernel comes first (a
  // kernel drop is lost for good; a packet the analysis misses is still in
  // the file): the analysis thread runs at the lowest priority.
  if (any_live_) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  TickState t;
  t.last = start_;
  capture::Record rec;
  std::uint32_t source = 0;
  for (;;) {
    // Read "done" before looking at the queue: once done, an empty queue stays empty.
    const bool done = capture_done_.load(std::memory_order_acquire);
    std::uint32_t batch = 0;
    while (queue_->front(rec, source)) {
      session_->frame(rec, linktypes_[source]);
      queue_->pop();
      if (++batch == 1024) break;  // look at the clock now and then during a burst
    }
    if (batch == 0) {
      if (done) break;
      queue_->wait(std::chrono::milliseconds(100));
    }
    if (!done) tick(t, false);
  }
}

// Once a second: the status line (or warnings of new drops) and the metrics.
void CaptureRun::tick(TickState& t, bool force) {
  const auto now = Clock::now();
  const double since_tick = seconds_between(t.last, now);
  if (!force && since_tick < 1.0) return;
  std::vector<capture::SourceStats> stats;
  {
    std::lock_guard lock(stats_mutex_);
    stats = shared_stats_;
  }
  std::uint64_t drops = 0;
  for (const auto& st : stats) drops += st.dropped + st.if_dropped;
  const std::uint64_t not_analysed = live_counters_.not_analysed.load(std::memory_order_relaxed);
  if (status_line_) {
    print_status(stats, live_counters_, *session_, seconds_between(start_, now), t.packets, t.bytes, since_tick);
  } else {
    if (drops > t.drops)
      std::fprintf(stderr, "rdmadiag capture: warning: %llu packets dropped so far (kernel or interface)\n",
                   static_cast<unsigned long long>(drops));
    if (not_analysed > t.not_analysed)
      std::fprintf(stderr, "rdmadiag capture: warning: %llu packets not analysed so far (analysis queue full; they are in the file)\n",
                   static_cast<unsigned long long>(not_analysed));
  }
  t.drops = drops;
  t.not_analysed = not_analysed;
  publish_metrics(stats, true);
  t.packets = live_counters_.packets.load(std::memory_order_relaxed);
  t.bytes = live_counters_.bytes.load(std::memory_order_relaxed);
  t.last = now;
}

void CaptureRun::capture_loop() {
  auto last_tick = start_;
  std::vector<pollfd> fds;
  for (;;) {
    const double elapsed = seconds_between(start_, Clock::now());
    if (std::string why = stop_reason(elapsed); !why.empty()) {
      stopped_by_ = std::move(why);
      break;
    }
    wait_for_packets(fds, elapsed);
    dispatch_all(false);
    if (writer_ && (o_.packet_buffered || o_.write_path == "-") && !writer_->flush()) continue;  // stop_reason reports it
    const auto after = Clock::now();
    if (seconds_between(last_tick, after) >= 1.0) {
      refresh_stats();
      if (writer_ && !sink_->write_stopped() && !writer_->flush()) continue;  // stop_reason reports it
      last_tick = after;
    }
  }
  // Packets the kernel already holds were captured: take them before stopping,
  // unless the user asked for a count or writing failed.
  if (stopped_by_ != "write error" && stopped_by_ != "packet count reached" && stopped_by_ != "file count reached (-W)")
    for (int round = 0; round < 64 && dispatch_all(true) > 0; ++round) {
    }
  refresh_stats();
}

// Why the capture stops now; empty: it goes on.
std::string CaptureRun::stop_reason(double elapsed) const {
  if (const int sig = g_signal.load())
    return sig == SIGINT ? "interrupted (SIGINT)" : sig == SIGTERM ? "terminated (SIGTERM)" : "hangup (SIGHUP)";
  if (o_.count && sink_->packets() >= o_.count) return "packet count reached";
  if (sink_->write_stopped() || (writer_ && !writer_->error().empty()))
    return writer_->done() ? "file count reached (-W)" : "write error";
  if (!source_error_.empty()) return "source error";
  if (o_.duration > 0 && elapsed >= o_.duration) return "duration reached";
  if (std::all_of(sources_.begin(), sources_.end(), [](const SourceState& s) { return s.finished; })) return "end of input";
  return {};
}

// Until a live source has packets (at most 100 ms, or what is left of --duration);
// not at all while a file source has records left.
void CaptureRun::wait_for_packets(std::vector<pollfd>& fds, double elapsed) const {
  const bool files_pending =
      std::any_of(sources_.begin(), sources_.end(), [](const SourceState& s) { return !s.finished && !s.source->is_live(); });
  fds.clear();
  for (const auto& s : sources_)
    if (!s.finished && s.source->is_live()) fds.push_back({s.source->selectable_fd(), POLLIN, 0});
  int timeout_ms = files_pending ? 0 : 100;
  if (o_.duration > 0) timeout_ms = std::min(timeout_ms, std::max(0, static_cast<int>((o_.duration - elapsed) * 1000) + 1));
  if (!fds.empty()) ::poll(fds.data(), fds.size(), timeout_ms);
}

int CaptureRun::dispatch_all(bool draining) {
  int total = 0;
  for (auto& s : sources_) {
    if (s.finished || sink_->write_stopped()) continue;
    if (draining && !s.source->is_live()) continue;
    int budget = 4096;
    if (o_.count) {
      if (sink_->packets() >= o_.count) return total;
      budget = static_cast<int>(std::min<std::uint64_t>(o_.count - sink_->packets(), 4096));
    }
    sink_->set_source(&s);
    const int n = s.source->dispatch(budget, *sink_);
    if (n == capture::PacketSource::kEnd) {
      s.finished = true;
    } else if (n == capture::PacketSource::kFailed) {
      s.finished = true;
      source_error_ = s.source->error();
    } else {
      total += n;
    }
  }
  queue_->notify();
  return total;
}

void CaptureRun::refresh_stats() {
  for (auto& s : sources_)
    if (s.source->is_live()) s.last_stats = s.source->stats();
  std::lock_guard lock(stats_mutex_);
  shared_stats_ = current_stats();
}

// The report covers every queued packet: let the analysis finish them.
void CaptureRun::drain_and_join() {
  capture_done_.store(true, std::memory_order_release);
  queue_->notify();
  analysis_thread_.join();
  if (status_line_) std::fprintf(stderr, "\r\033[K");
}

// Closes the output file(s) with the sources' drop counters; the write error, if any.
std::string CaptureRun::close_writer() {
  if (!writer_) return {};
  std::vector<capture::InterfaceCounters> counters;
  for (const auto& s : sources_) {
    capture::InterfaceCounters c;
    c.received = s.last_stats.received;
    c.dropped = s.last_stats.dropped;
    c.if_dropped = s.last_stats.if_dropped;
    c.if_dropped_known = s.last_stats.available;
    counters.push_back(c);
  }
  const bool had_error = !writer_->error().empty();
  if (!writer_->close(counters) || had_error) return writer_->error();
  return {};
}

// The same inputs section and summary as analyze, plus capture statistics.
int CaptureRun::report(const std::string& write_error) {
  int status = kExitOk;
  exporters::Json cap = {{"sources", sources_report(status)},
                         {"packets_captured", sink_->packets()},
                         {"bytes_captured", sink_->bytes()},
                         {"stopped_by", stopped_by_},
                         {"filter", live_.filter},
                         {"packets_not_analysed", live_counters_.not_analysed.load()}};
  if (writer_) {
    cap["packets_written"] = writer_->packets_written();
    cap["files"] = writer_->files();
    if (!write_error.empty()) cap["write_error"] = write_error;
  }
  if (!source_error_.empty()) cap["source_error"] = source_error_;
  session_->add_report_member("capture", cap);
  if (!session_->finish()) {
    std::fprintf(stderr, "rdmadiag capture: %s\n", session_->error().c_str());
    status = std::max(status, kExitWriteFailed);
  }
  return status;
}

// Each source as an input of the report, and its part of the capture statistics.
exporters::Json CaptureRun::sources_report(int& status) {
  exporters::Json sources_json = exporters::Json::array();
  for (const auto& s : sources_) {
    session_->begin_input(s.source->name(), s.source->linktype(), s.source->snaplen());
    session_->end_input(s.captured, s.source->stop_reason());
    if (!s.source->stop_reason().empty()) {
      std::fprintf(stderr, "rdmadiag capture: %s: damaged capture, %s\n", s.source->name().c_str(), s.source->stop_reason().c_str());
      status = std::max(status, kExitDamagedInput);
    }
    exporters::Json j = {{"name", s.source->name()}, {"live", s.source->is_live()}, {"linktype", s.source->linktype()},
                         {"snaplen", s.source->snaplen()}, {"captured", s.captured}};
    if (s.last_stats.available) {
      j["received"] = s.last_stats.received;
      j["dropped"] = s.last_stats.dropped;
      j["if_dropped"] = s.last_stats.if_dropped;
    }
    sources_json.push_back(j);
  }
  return sources_json;
}

// tcpdump-style closing lines on stderr; the exit status the failures among them call for.
int CaptureRun::print_closing_lines(const std::string& write_error) const {
  const std::string written =
      writer_ ? ", " + std::to_string(writer_->packets_written()) + " written to " +
                    (o_.write_path == "-" ? std::string("standard output") : std::to_string(writer_->files().size()) + " file(s)")
              : "";
  std::fprintf(stderr, "rdmadiag capture: %llu packets captured%s; stopped: %s\n",
               static_cast<unsigned long long>(sink_->packets()), written.c_str(), stopped_by_.c_str());
  if (const std::uint64_t not_analysed = live_counters_.not_analysed.load())
    std::fprintf(stderr,
                 "rdmadiag capture: %llu packets not analysed (analysis queue full): they are in the file but not in this report; "
                 "rdmadiag analyze on the file gives the full report\n",
                 static_cast<unsigned long long>(not_analysed));
  for (const auto& s : sources_)
    if (s.last_stats.available)
      std::fprintf(stderr, "rdmadiag capture: %s: %llu received, %llu dropped by kernel, %llu dropped by interface\n",
                   s.source->name().c_str(), static_cast<unsigned long long>(s.last_stats.received),
                   static_cast<unsigned long long>(s.last_stats.dropped), static_cast<unsigned long long>(s.last_stats.if_dropped));
  int status = kExitOk;
  for (const std::string* err : {&source_error_, &write_error})
    if (!err->empty()) {
      std::fprintf(stderr, "rdmadiag capture: error: %s\n", err->c_str());
      status = kExitWriteFailed;
    }
  return status;
}

// --linger: keep serving the final metrics a while (a last scrape, or a test).
void CaptureRun::linger() const {
  if (o_.metrics_listen.empty() || o_.linger <= 0) return;
  const auto until = Clock::now() + std::chrono::duration<double>(o_.linger);
  while (Clock::now() < until && !g_signal.load()) ::poll(nullptr, 0, 50);
}

// Counts and times as tcpdump takes them: 0 or less is refused (it was taken as
// "no limit"); CLI11's own number checks print a range up to 1.8e308.
CLI::Validator sign_check(bool zero_ok) {
  return CLI::Validator(
      [zero_ok](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0') return "expected a number, got " + v;
        if (d > 0 || (zero_ok && d == 0)) return "";
        return std::string("must be ") + (zero_ok ? "0 or more" : "greater than 0") + ", got " + v;
      },
      zero_ok ? ">= 0" : "> 0");
}
const CLI::Validator kAboveZero = sign_check(false), kNotNegative = sign_check(true);

}  // namespace

void add_capture_command(CLI::App& app, Commands& out) {
  auto o = std::make_shared<CaptureOptions>();
  CLI::App* sub = app.add_subcommand("capture", "Capture live RDMA traffic (or replay files), analyse it as it arrives, write pcap/pcapng");
  sub->add_option("-i,--interface", o->interfaces,
                  "Interface to capture on (repeatable): a network interface, 'any', or an RDMA device (mlx5_0, rdma:mlx5_0:1)");
  sub->add_option("-r,--read", o->read_files, "Read packets from a capture file instead (repeatable; '-' standard input)");
  sub->add_option("-w,--write", o->write_path, "Write the packets to FILE ('-' standard output)");
  sub->add_flag("--pcapng", o->pcapng, "Write pcapng (one interface block per source, drop counters at the end) instead of pcap");
  sub->add_option("-C,--file-size", o->rotate_size, "Start a new file before one exceeds SIZE (millions of bytes; or with k/m/g suffix)");
  sub->add_option("-G,--rotate-seconds", o->rotate_seconds, "Start a new file every N seconds (FILE may hold strftime %-escapes)")
      ->check(kAboveZero);
  sub->add_option("-W,--file-count", o->max_files, "With -C: keep a ring of N files; with -G alone: stop after N files")
      ->check(kAboveZero);
  sub->add_option("-c,--count", o->count, "Stop after N packets")->check(kAboveZero);
  sub->add_option("--duration", o->duration, "Stop after N seconds")->check(kAboveZero);
  sub->add_option("-B,--buffer-size", o->buffer_kib, "Kernel capture buffer in KiB (default 32768; tcpdump's is 2048)")
      ->check(CLI::Range(1, 1 << 22));
  sub->add_option("-s,--snapshot-length", o->snaplen, "Bytes kept per packet (default: whole packets, 262144; 0: the default)")
      ->check(CLI::Range(0, 262144));
  sub->add_flag("--immediate-mode", o->immediate, "Deliver each packet at once instead of per kernel block");
  sub->add_flag("-p,--no-promiscuous-mode", o->no_promiscuous, "Do not put the interface into promiscuous mode");
  sub->add_option("-j,--time-stamp-type", o->tstamp_type, "Time stamps from: host, adapter, adapter_unsynced... (what the NIC offers)");
  sub->add_option("--time-stamp-precision", o->tstamp_precision, "micro (default) or nano");
  sub->add_flag("-U,--packet-buffered", o->packet_buffered, "Write each packet to the file as it arrives");
  sub->add_option("-Z,--relinquish-privileges", o->user, "Drop root for USER once the capture is open");
  sub->add_flag("--force", o->force, "Overwrite existing output files");
  sub->add_flag("--packets", o->packets, "One line per packet on standard output (and a packets array in --json)");
  sub->add_option("--json", o->json_path, "Write the final report (with capture statistics) as JSON to FILE ('-' standard output)");
  sub->add_flag("-q,--quiet", o->quiet, "No text report on standard output");
  add_pause_options(sub, &o->pause);
  sub->add_option("--metrics-listen", o->metrics_listen,
                  "Serve Prometheus metrics on http://HOST:PORT/metrics while capturing (e.g. 127.0.0.1:9464)");
  sub->add_option("--linger", o->linger, "With --metrics-listen: keep serving the final metrics N seconds after the capture ends")
      ->check(kNotNegative);
  sub->add_option("--metrics-file", o->outputs.metrics_path, "Write Prometheus metrics to FILE at the end (node exporter textfile format)");
  sub->add_option("--metrics-max-flows", o->outputs.max_flow_series, "Flows with their own metric labels (default 100; the rest: flow=\"other\")")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--html", o->outputs.html_path, "Write a self-contained HTML report to FILE at the end");
  sub->add_option("--csv", o->outputs.csv_flows_path, "Write the per-flow table as CSV to FILE at the end");
  sub->add_option("--csv-packets", o->outputs.csv_packets_path, "Write one CSV row per packet to FILE");
  sub->add_option("--jsonl", o->outputs.jsonl_path, "Write one JSON object per line: each packet, then the report");
  sub->add_option("--queue-packets", o->queue_packets,
                  "Packets the queue between capture and analysis holds (default 65536, at most 64 MiB); when it is full, "
                  "packets are written but not analysed (and counted)")
      ->check(CLI::Range(1u, 1u << 24));
  sub->add_flag("--no-status", o->no_status, "No live status line on the terminal");
  sub->add_flag("-D,--list-interfaces", o->list, "List the interfaces and RDMA devices that can be captured on");
  sub->add_option("--roce-port", o->roce_ports, "Extra UDP destination port carrying RoCEv2 (repeatable)")
      ->check(CLI::Range(1, 65535));
  sub->add_flag("--no-roce-heuristic", o->no_heuristic, "Do not look for RoCEv2 on other UDP ports");
  sub->add_option("filter", o->filter_words, "Capture filter (BPF, as tcpdump), e.g.: udp port 4791");
  sub->footer(
      "Exit status: 0 done; 1 could not start (no such interface, not permitted, output exists);\n"
      "2 bad command line (also: an output is one of the -r inputs); 3 a -r input was damaged;\n"
      "4 writing failed (e.g. disk full: the file is valid up to the last whole packet) or a source\n"
      "failed. See docs/capture.md.");
  out.push_back(Command{sub, [o] { return CaptureRun(*o).run(); }});
}

}  // namespace rdmadiag::cli
