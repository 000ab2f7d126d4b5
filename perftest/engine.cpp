#include "perftest/engine.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <thread>
#include <limits>
#include <functional>
#include <memory>
#include <optional>

#include "perftest/clock.h"
#include "perftest/errors.h"
#include "perftest/oob_channel.h"
#include "perftest/rdma_cm_connection.h"

namespace rdmadiag::perftest {

std::string iso_time_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

constexpr std::uint64_t kLargestSweepSize = 1ull << 23;  // perftest's -a: 2 B .. 8 MiB
constexpr int kSignalEvery = 100;                          // perftest's default cq_mod
constexpr std::uint64_t kMaxReceiveDepth = 512;            // perftest's DEF_RX_SEND
constexpr int kCreditWritesInFlight = 4;  // send-bw -b on iWARP: send-credit WRITEs per QP beside -t SENDs

std::string transport_name(Transport t) { return t == Transport::RC ? "RC" : t == Transport::UC ? "UC" : "UD"; }

// Waits for progress with a no-progress limit: every blocking loop in a test calls
// check() while it spins, so a dead peer ends the test with an explanation instead of a hang.
// Thrown by the watchdog when -D's time is over: ends the loop of a run_* function.
struct TimeUp {};

// -D SECONDS, perftest's phases: the first quarter (whole seconds, perftest's default margin)
// warms up, the middle is measured, the last quarter lets the peer finish; then the run ends.
struct DurationWindow {
  bool active = false;
  std::uint64_t sample_from = 0, sample_to = 0, end = 0;  // cycle counter values

  static DurationWindow start(int duration_s, const CycleClock& clock) {
    DurationWindow w;
    if (duration_s <= 0) return w;
    const int margin_s = duration_s / 4;
    const double cycles_per_s = clock.cycles_per_usec * 1e6;
    const std::uint64_t now = read_cycles();
    w.active = true;
    w.sample_from = now + static_cast<std::uint64_t>(margin_s * cycles_per_s);
    w.sample_to = now + static_cast<std::uint64_t>((duration_s - margin_s) * cycles_per_s);
    w.end = now + static_cast<std::uint64_t>(duration_s * cycles_per_s);
    return w;
  }
  bool sampling(std::uint64_t now) const { return !active || (now >= sample_from && now < sample_to); }
  bool over(std::uint64_t now) const { return active && now >= end; }
};

class ProgressWatchdog {
 public:
  // Counts in the test's cycle counter, not with clock_gettime: under emulation (the
  // qemu lab) the guest's clock source can be a device register whose every read
  // costs tens of microseconds, and progressed() runs once per iteration, inside
  // the time that becomes the latency samples.
  ProgressWatchdog(int limit_s, std::string what, const CycleClock& clock)
      : limit_cycles_(static_cast<std::uint64_t>(static_cast<double>(limit_s) * 1e6 *
                                                 (clock.cycles_per_usec > 0 ? clock.cycles_per_usec : 1000.0))),
        what_(std::move(what)), limit_s_(limit_s) {
    progressed();
  }
  void progressed() { deadline_ = read_cycles() + limit_cycles_; }
  void end_with(const DurationWindow* window) { window_ = window; }
  // Cheap enough to call on every spin: reads the counter only every 1024 calls.
  void check(const std::string& waiting_for) {
    if (++spins_ & 1023) return;
    const std::uint64_t now = read_cycles();
    if (window_ && window_->over(now)) throw TimeUp{};
    if (now > deadline_)
      throw RunError(what_ + ": no progress for " + std::to_string(limit_s_) + " s while waiting for " +
                     waiting_for +
                     " - the peer stopped, runs a different test or size (-s/-a/-n), or the RDMA path drops packets");
  }

 private:
  std::uint64_t limit_cycles_;
  std::uint64_t deadline_ = 0;
  std::uint64_t spins_ = 0;
  std::string what_;
  int limit_s_;
  const DurationWindow* window_ = nullptr;
};

// One completion from cq, by busy polling or (use_events) through the completion channel.
ibv_wc wait_completion(ibv_cq* cq, ibv_comp_channel* channel, bool use_events, ProgressWatchdog& watchdog,
                       const std::string& what) {
  ibv_wc wc{};
  for (;;) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) throw RunError("ibv_poll_cq failed while waiting for " + what);
    if (n == 1) break;
    if (!use_events) {
      watchdog.check(what);
      continue;
    }
    if (ibv_req_notify_cq(cq, 0)) throw RunError("ibv_req_notify_cq failed");
    if (ibv_poll_cq(cq, 1, &wc) == 1) break;  // arrived between poll and arm
    pollfd p{channel->fd, POLLIN, 0};
    if (poll(&p, 1, 1000) == 1) {
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
    }
    for (int i = 0; i < 1024; ++i) watchdog.check(what);  // forces a clock read
  }
  if (wc.status != IBV_WC_SUCCESS)
    throw RunError("completion error on " + what + ": " + completion_status_name(wc.status) + " (vendor error 0x" +
                   [&] { char b[16]; std::snprintf(b, sizeof b, "%x", wc.vendor_err); return std::string(b); }() + ") - " +
                   completion_status_hint(wc.status));
  watchdog.progressed();
  return wc;
}

void post_send(ibv_qp* qp, ibv_send_wr& wr) {
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp, &wr, &bad); rc)
    throw RunError(std::string("ibv_post_send failed: ") + std::strerror(rc));
}

// UD receives start with the 40-byte GRH (present or not), so each has room for it.
void post_receives(VerbsResources& res, std::uint64_t size, std::uint64_t count, std::size_t qp_index = 0) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(res.recv_region(qp_index)),
              static_cast<std::uint32_t>(size + res.receive_overhead()), res.mr()->lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  for (std::uint64_t i = 0; i < count; ++i) {
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(res.qp(qp_index), &wr, &bad); rc)
      throw RunError(std::string("ibv_post_recv failed: ") + std::strerror(rc));
  }
}

// -r on every QP (-q); perftest posts rx_depth receives per QP.
void post_receives_on_every_qp(VerbsResources& res, std::uint64_t size, std::uint64_t count) {
  for (std::size_t q = 0; q < res.qp_count(); ++q) post_receives(res, size, count, q);
}

// One key message each way (perftest's ctx_hand_shake): text on TCP, binary on rdma_cm.
// A server's reply is the last message of an exchange step; when the client has it and closes
// at once, our SEND can complete in error on rdma_cm (siw flushes it): that is only a warning.
oob::KeyMessage exchange_key(OobTransport& oob, const oob::KeyMessage& mine, bool with_gid, bool cm_tail_markers,
                             const std::string& step, int timeout_ms, std::vector<std::string>* warnings = nullptr) {
  if (oob.message_based()) {
    const auto encoded = oob::encode_cm_key_message(mine, cm_tail_markers);
    if (oob.is_client() || !warnings)
      return oob::parse_cm_key_message(oob.exchange_message(encoded, step, timeout_ms, warnings));
    const auto got = oob::parse_cm_key_message(oob.receive_message(step, timeout_ms));
    try {
      oob.send(encoded, step);
    } catch (const RunError& e) {
      warnings->push_back(std::string("the peer closed the connection right after our last message: ") + e.what());
    }
    return got;
  }
  const std::size_t expected = with_gid ? oob::kKeyMessageSizeWithGid : oob::kKeyMessageSizeWithoutGid;
  return oob::parse_key_message(oob.exchange(oob::encode_key_message(mine), expected, step, timeout_ms), with_gid);
}

struct Session {
  const TestOptions& opt;
  VerbsResources& res;
  OobTransport& oob;
  TestResult& result;
  int timeout_ms;
  oob::KeyMessage my_key;
  oob::KeyMessage remote_key;
  bool have_remote_key = false;
  int barrier_count = 0;
  bool cm_tail_markers = false;  // -R: send upstream 6.29's 64-byte key struct
  std::vector<oob::KeyMessage> remote_keys;  // -q: one per QP, from the first per-QP exchange

  bool is_server() const { return opt.peer.empty(); }

  // perftest's per-QP loop of ctx_hand_shake: one key message per QP, in QP order.
  void exchange_every_qp_key(const std::string& step) {
    const bool first = remote_keys.empty();
    for (std::size_t q = 0; q < res.qp_count(); ++q) {
      const std::string what = res.qp_count() > 1 ? step + " (QP " + std::to_string(q) + ")" : step;
      oob::KeyMessage key;
      try {
        key = exchange_key(oob, res.key_message(q), res.uses_gid(), cm_tail_markers, what, timeout_ms, &result.warnings);
      } catch (const oob::ProtocolError& e) {
        throw RunError(std::string("out-of-band ") + what + ": " + e.what());
      }
      if (first) remote_keys.push_back(key);
      ++barrier_count;
    }
    if (first) {
      remote_key = remote_keys.front();
      have_remote_key = true;
    }
  }

  // The peer's key for QP q (its address, rkey, QPN), or the one key of a single-QP test.
  const oob::KeyMessage& remote_key_of(std::size_t q) const { return q < remote_keys.size() ? remote_keys[q] : remote_key; }

  // perftest's ctx_hand_shake: exchange key messages; used for the addresses and as a barrier.
  // With -R the keys travel in binary (perftest's struct) on the rdma_cm exchange QP.
  void barrier(const std::string& step, int wait_ms = 0) {
    try {
      const auto key = exchange_key(oob, my_key, res.uses_gid(), cm_tail_markers, step, wait_ms ? wait_ms : timeout_ms,
                                    &result.warnings);
      if (!have_remote_key) {
        remote_key = key;
        have_remote_key = true;
      }
    } catch (const oob::ProtocolError& e) {
      throw RunError(std::string("out-of-band ") + step + ": " + e.what());
    }
    ++barrier_count;
  }

  void finish_with_done() {
    barrier("final barrier", timeout_ms);
    if (oob.message_based()) return;  // perftest sends "done" only on its TCP exchange
    oob.send({oob::kDoneMessage, sizeof oob::kDoneMessage}, "done message");
    (void)oob.drain(500);  // the peer's own "done", if it sends one; nothing depends on it
  }
};

double to_usec(std::uint64_t cycles, double cycles_per_usec, int factor) {
  return static_cast<double>(cycles) / (cycles_per_usec * factor);
}

// in_cycles (-C, iteration mode): perftest's figures in counter cycles (perftest then divides
// by 1 instead of the MHz, which also changes where its int truncation bites).
void fill_latency(SizeResult& out, const std::vector<std::uint64_t>& posted, const CycleClock& clock, int factor,
                  const TestOptions& opt, TestResult& result, bool in_cycles) {
  std::vector<std::uint64_t> deltas;
  for (std::size_t i = 1; i < posted.size(); ++i) deltas.push_back(posted[i] - posted[i - 1]);
  if (deltas.size() >= 3) out.perftest = perftest_figures(deltas, in_cycles ? 1.0 : clock.cycles_per_usec, factor);
  out.perftest_in_cycles = in_cycles;
  std::vector<double> usec;
  for (std::size_t i = 0; i < deltas.size(); ++i)
    if (i >= opt.warmup) usec.push_back(to_usec(deltas[i], clock.cycles_per_usec, factor));
  if (usec.empty()) {
    result.errors.push_back("size " + std::to_string(out.size) + ": no samples left after " + std::to_string(opt.warmup) +
                            " warm-up iterations");
    return;
  }
  out.stats = compute_statistics(usec);
  if (opt.keep_samples || opt.print_every_sample || opt.report_unsorted) out.samples_usec = std::move(usec);
}

constexpr std::size_t kMaxDurationSamples = std::size_t{1} << 21;  // -D keeps at most 2 Mi samples (16 MiB)

// What every run_* function starts from: the result for this size, one work request over the
// send region aimed at the peer (RDMA address or UD address handle), the watchdog, the -D
// window, and the post times that become the latency samples.
class SizeRun {
 public:
  SizeRun(Session& s, std::uint64_t size, const CycleClock& clock, ibv_wr_opcode opcode, const std::string& what)
      : session(s), clock_(clock), watchdog(s.opt.timeout_s, what, clock), window(DurationWindow::start(s.opt.run_infinitely ? 0 : s.opt.duration_s, clock)) {
    out.size = size;
    out.iterations = s.opt.iterations;
    iters = window.active ? std::numeric_limits<std::uint64_t>::max() : s.opt.iterations;
    posted.reserve(window.active ? 4096 : iters);
    watchdog.end_with(&window);
    sge = {reinterpret_cast<std::uintptr_t>(s.res.send_region()), static_cast<std::uint32_t>(size), s.res.mr()->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    if (s.res.address_handle()) {
      wr.wr.ud.ah = s.res.address_handle();
      wr.wr.ud.remote_qpn = s.remote_key.qpn;
      wr.wr.ud.remote_qkey = kUdQkey;
    } else {
      wr.wr.rdma.remote_addr = s.remote_key.vaddr;
      wr.wr.rdma.rkey = s.remote_key.rkey;
    }
    inline_ok = static_cast<int>(size) <= s.res.inline_size();
    t0 = monotonic_ns();
  }
  SizeRun(const SizeRun&) = delete;
  SizeRun& operator=(const SizeRun&) = delete;

  // A post time: every one in iteration mode; with -D only those inside the measured window.
  void record(std::uint64_t cycles) {
    watch_cpu(cycles);
    if (window.sampling(cycles) && posted.size() < kMaxDurationSamples) posted.push_back(cycles);
  }
  // --cpu_util with -D: CPU snapshots where the measured window starts and ends (perftest takes
  // them in its alarm handler at the same two moments); called with each event's time.
  void watch_cpu(std::uint64_t now) {
    if (!session.opt.cpu_util || !window.active) return;
    if (!cpu_from_ && window.sampling(now)) cpu_from_ = take_cpu_snapshot();
    else if (cpu_from_ && !cpu_to_ && now >= window.sample_to) cpu_to_ = take_cpu_snapshot();
  }
  // The window's CPU utilisation into the result (the window's end if no event came after it).
  void finish_cpu() {
    if (!cpu_from_) return;
    if (!cpu_to_) cpu_to_ = take_cpu_snapshot();
    out.cpu_util = cpu_utilisation(*cpu_from_, *cpu_to_);
  }
  bool time_up() const { return window.over(read_cycles()); }
  // --latency_gap: perftest spins this long before taking the post time of each iteration.
  void wait_gap() const {
    if (session.opt.latency_gap_usec <= 0) return;
    const std::uint64_t until = read_cycles() + static_cast<std::uint64_t>(session.opt.latency_gap_usec * clock_.cycles_per_usec);
    while (read_cycles() < until) {
    }
  }

  // Latency figures over the recorded post times (factor 2: one-way figure of a ping-pong).
  SizeResult finish_latency(int factor) {
    out.elapsed_usec = static_cast<double>(monotonic_ns() - t0) / 1000.0;
    finish_cpu();
    if (window.active) {
      out.iterations = posted.size();
      DurationFigures d;
      d.seconds = static_cast<double>(window.sample_to - window.sample_from) / (clock_.cycles_per_usec * 1e6);
      if (!posted.empty()) {
        d.t_avg_usec = d.seconds * 1e6 / factor / static_cast<double>(posted.size());
        d.tps = static_cast<double>(posted.size()) / d.seconds;
      }
      out.duration = d;
      if (posted.size() < 2) {
        session.result.errors.push_back("-D " + std::to_string(session.opt.duration_s) +
                                        ": fewer than 2 iterations in the measured window (use a longer duration)");
        return out;
      }
    }
    fill_latency(out, posted, clock_, factor, session.opt, session.result, session.opt.report_cycles && !window.active);
    return out;
  }

  Session& session;
  SizeResult out;
  ibv_sge sge{};
  ibv_send_wr wr{};
  bool inline_ok = false;
  std::uint64_t iters = 0;  // -D: unbounded, the window ends the run
  std::vector<std::uint64_t> posted;
  std::uint64_t t0 = 0;

 private:
  const CycleClock& clock_;
  std::optional<CpuSnapshot> cpu_from_, cpu_to_;

 public:
  ProgressWatchdog watchdog;
  DurationWindow window;
};

// WRITE latency ping-pong: each side writes `size` bytes into the peer's buffer; the last
// byte carries the iteration number, and the receiver spins on its own copy of that byte.
// The server posts first, as in perftest, so the two ends interoperate.
SizeResult run_write_lat(Session& s, std::uint64_t size, const CycleClock& clock) {
  auto& res = s.res;
  SizeRun run(s, size, clock, IBV_WR_RDMA_WRITE, "write-lat size " + std::to_string(size));
  run.wr.send_flags = IBV_SEND_SIGNALED | (run.inline_ok ? IBV_SEND_INLINE : 0);
  volatile char* poll_byte = res.recv_region() + size - 1;
  char* post_byte = res.send_region() + size - 1;
  const std::uint64_t iters = run.iters;
  std::uint64_t sent = 0, received = 0;
  bool awaiting_write = false;  // received counts a write we are still waiting for
  try {
    while ((sent < iters || received < iters) && !run.time_up()) {
      if (received < iters && !(sent == 0 && s.is_server())) {
        ++received;
        awaiting_write = true;
        const char expected = static_cast<char>(received);
        while (*poll_byte != expected) run.watchdog.check("the peer's RDMA WRITE #" + std::to_string(received));
        awaiting_write = false;
        run.watchdog.progressed();
      }
      if (sent < iters) {
        run.wait_gap();
        run.record(read_cycles());
        *post_byte = static_cast<char>(++sent);
        post_send(res.qp(), run.wr);
        wait_completion(res.send_cq(), res.channel(), s.opt.use_events, run.watchdog, "RDMA WRITE #" + std::to_string(sent));
      }
    }
  } catch (const TimeUp&) {
  } catch (const RunError& e) {
    // -D against perftest: a perftest peer whose time is up posts one last write and closes; our
    // answer to it can fail. After the measured window that is the end of the run, not an error.
    if (!run.window.active || read_cycles() < run.window.sample_to) throw;
    s.result.warnings.push_back(std::string("after the measured window: ") + e.what());
    return run.finish_latency(2);
  }
  if (run.window.active && !s.result.info.peer_is_rdmadiag) {
    // -D: perftest's write-lat spins on our next write without re-reading its own clock (its
    // state flag is not volatile), so a perftest peer whose time is not up yet would wait
    // forever. Keep answering its writes, unmeasured, until it is quiet for 1 s (at most 3 s);
    // a failed write then only means it has left.
    const std::uint64_t give_up = monotonic_ns() + 3000000000ull;
    try {
      for (;;) {
        if (!awaiting_write) ++received;
        awaiting_write = false;
        const char expected = static_cast<char>(received);
        const std::uint64_t quiet_until = std::min<std::uint64_t>(monotonic_ns() + 1000000000ull, give_up);
        while (*poll_byte != expected && monotonic_ns() < quiet_until) {
        }
        if (*poll_byte != expected) break;
        *post_byte = static_cast<char>(++sent);
        post_send(res.qp(), run.wr);
        ProgressWatchdog quick(1, "write-lat (after -D)", clock);
        wait_completion(res.send_cq(), res.channel(), false, quick, "RDMA WRITE after the measured time");
      }
    } catch (const RunError&) {
    }
  }
  return run.finish_latency(2);
}

// READ / ATOMIC latency: the client alone issues one operation at a time; a sample is a
// whole round trip (perftest does not halve these).
SizeResult run_read_or_atomic_lat(Session& s, std::uint64_t size, const CycleClock& clock, bool atomic) {
  auto& res = s.res;
  SizeRun run(s, size, clock, atomic ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_RDMA_READ,
              std::string(atomic ? "atomic-lat" : "read-lat") + " size " + std::to_string(size));
  run.wr.send_flags = IBV_SEND_SIGNALED;
  if (atomic) {
    run.wr.wr.atomic.remote_addr = s.remote_key.vaddr;
    run.wr.wr.atomic.rkey = s.remote_key.rkey;
    run.wr.wr.atomic.compare_add = 1;
  }
  const char* name = atomic ? "ATOMIC FETCH_AND_ADD" : "RDMA READ";
  try {
    for (std::uint64_t i = 0; i < run.iters && !run.time_up(); ++i) {
      run.wait_gap();
      run.record(read_cycles());
      post_send(res.qp(), run.wr);
      wait_completion(res.send_cq(), res.channel(), s.opt.use_events, run.watchdog, std::string(name) + " #" + std::to_string(i + 1));
    }
  } catch (const TimeUp&) {
  }
  return run.finish_latency(1);
}

// SEND latency ping-pong with receives posted in advance; the client sends first. Sends are
// signalled every 100th and at the last one (perftest's cq_mod), so the send CQ is polled
// rarely and the samples measure the message round trip, not completion handling.
SizeResult run_send_lat(Session& s, std::uint64_t size, std::uint64_t receive_depth, const CycleClock& clock) {
  auto& res = s.res;
  SizeRun run(s, size, clock, IBV_WR_SEND, "send-lat size " + std::to_string(size));
  const unsigned base_flags = run.inline_ok ? IBV_SEND_INLINE : 0;
  const std::uint64_t iters = run.iters;
  std::uint64_t sent = 0, received = 0;
  try {
    while ((sent < iters || received < iters) && !run.time_up()) {
      if (received < iters && !(sent == 0 && !s.is_server())) {
        wait_completion(res.recv_cq(), res.channel(), s.opt.use_events, run.watchdog,
                        "the peer's SEND #" + std::to_string(received + 1));
        ++received;
        if (run.window.active || received + receive_depth <= iters) post_receives(res, size, 1);
      }
      if (sent < iters) {
        run.wait_gap();
        run.record(read_cycles());
        ++sent;
        const bool signalled = sent % kSignalEvery == 0 || sent == iters;
        run.wr.send_flags = base_flags | (signalled ? IBV_SEND_SIGNALED : 0);
        post_send(res.qp(), run.wr);
        if (signalled)
          wait_completion(res.send_cq(), res.channel(), s.opt.use_events, run.watchdog, "SEND #" + std::to_string(sent));
      }
    }
  } catch (const TimeUp&) {
  }
  return run.finish_latency(2);
}

// perftest's figures over all QPs (statistics.h).
void fill_bandwidth(SizeResult& out, const std::vector<std::uint64_t>& posted, const std::vector<std::uint64_t>& completed,
                    const CycleClock& clock, bool want_peak) {
  const auto f = perftest_bandwidth(posted, completed, out.size, clock.cycles_per_usec, want_peak);
  out.bw_peak_mb_per_sec = f.bw_peak_mb_per_sec;
  out.bw_avg_mb_per_sec = f.bw_avg_mb_per_sec;
  out.msg_rate_mpps = f.msg_rate_mpps;
}

// perftest computes no peak with -N, in duration mode, or above 20000 iterations (per QP).
bool peak_wanted(const TestOptions& o) { return !o.no_peak && o.duration_s == 0 && o.iterations <= 20000; }

// -D bandwidth: messages completed inside the measured window over its length. perftest has no
// peak in duration mode: it prints 0 (its noPeak; seen in the lab from Debian's ib_write_bw -D).
void fill_duration_bandwidth(SizeRun& run, std::uint64_t messages_in_window, const CycleClock& clock) {
  run.finish_cpu();
  DurationFigures d;
  d.seconds = static_cast<double>(run.window.sample_to - run.window.sample_from) / (clock.cycles_per_usec * 1e6);
  d.tps = static_cast<double>(messages_in_window) / d.seconds;
  run.out.duration = d;
  run.out.iterations = messages_in_window;
  run.out.msg_rate_mpps = d.tps / 1e6;
  run.out.bw_avg_mb_per_sec = static_cast<double>(run.out.size) * d.tps / 1048576.0;
  run.out.bw_peak_mb_per_sec = 0;
  if (messages_in_window == 0)
    run.session.result.errors.push_back("-D " + std::to_string(run.session.opt.duration_s) +
                                        ": no message completed in the measured window (use a longer duration)");
}

// The sending side of a bandwidth test over every QP (-q), perftest's run_iter_bw: each QP posts
// -n operations with at most -t in flight; posting goes round the QPs; a signalled completion
// retires that QP's earlier unsignalled sends. Post and retirement times are kept in perftest's
// global order (its tposted/tcompleted) for the peak; -D only counts what the window saw.
class BwSender {
 public:
  BwSender(SizeRun& run, Session& s)
      : run_(run), timed_(run.window.active || s.opt.run_infinitely), depth_(static_cast<std::uint64_t>(std::max(1, s.opt.tx_depth))),
        cq_mod_(static_cast<std::uint64_t>(effective_cq_mod(s.opt))), iters_(run.iters),
        post_list_(static_cast<std::uint64_t>(std::max(1, s.opt.post_list))),
        credit_window_(send_credit_window(s)), res_(s.res) {
    const unsigned inline_flag = (s.opt.verb != Verb::Read && run.inline_ok) ? IBV_SEND_INLINE : 0;
    for (std::size_t q = 0; q < s.res.qp_count(); ++q) {
      Flow f;
      f.qp = s.res.qp(q);
      f.sge = run.sge;
      f.sge.addr = reinterpret_cast<std::uintptr_t>(s.res.send_region(q));
      f.wr = run.wr;
      f.wr.send_flags = inline_flag;
      f.signalled_post.assign(depth_, 0);
      const auto& key = s.remote_key_of(q);
      if (s.res.address_handle()) f.wr.wr.ud.remote_qpn = key.qpn;
      else f.wr.wr.rdma = {key.vaddr, key.rkey};
      flows_.push_back(f);
    }
    if (!timed_) {
      posted_.reserve(iters_ * flows_.size());
      completed_.assign(iters_ * flows_.size(), 0);
    }
  }

  bool finished() const { return retired_ == iters_ * flows_.size(); }
  // The last post_round stopped at a QP's send credit (iWARP send-bw): nothing may complete
  // until the peer's credit arrives, so do not wait for a completion.
  bool gated_by_credit() const { return gated_; }

  // After an endless run: let what is still in flight complete (until the CQ is quiet for
  // 100 ms, at most wait_ms) before the QPs go; statuses no longer matter.
  static void drain(ibv_cq* cq, int wait_ms) {
    const std::uint64_t end = monotonic_ns() + static_cast<std::uint64_t>(wait_ms) * 1000000;
    std::uint64_t quiet_since = monotonic_ns();
    std::array<ibv_wc, 16> wcs{};
    for (std::uint64_t now = quiet_since; now < end && now - quiet_since < 100000000; now = monotonic_ns())
      if (ibv_poll_cq(cq, 16, wcs.data()) != 0) quiet_since = now;
  }
  std::uint64_t retired() const { return retired_; }

  // --perform_warm_up (perftest's perform_warm_up): per QP, -t signalled operations and their
  // completions, before anything is timed.
  void warm_up(Session& s) {
    constexpr std::uint64_t kWarmUpId = ~std::uint64_t{0};
    for (Flow& f : flows_) {
      ibv_send_wr wr = f.wr;
      wr.sg_list = &f.sge;
      wr.wr_id = kWarmUpId;
      wr.send_flags = (f.wr.send_flags & IBV_SEND_INLINE) | IBV_SEND_SIGNALED;
      for (std::uint64_t i = 0; i < depth_; ++i) post_send(f.qp, wr);
      for (std::uint64_t i = 0; i < depth_; ++i)
        wait_completion(s.res.send_cq(), s.res.channel(), s.opt.use_events, run_.watchdog, "a warm-up operation");
    }
  }

  // perftest's inner loop: every QP posts while it has room (-t) and operations left; with -l
  // the work requests of one post are chained (one ibv_post_send, one post time each).
  void post_round() {
    gated_ = false;
    for (std::size_t q = 0; q < flows_.size(); ++q) {
      Flow& f = flows_[q];
      while (f.sent < iters_ && f.sent - f.done + post_list_ <= depth_ && credit_allows(q, f.sent)) {
        const std::uint64_t count = std::min(post_list_, iters_ - f.sent);
        f.chain.assign(count, f.wr);
        f.sges.assign(count, f.sge);
        for (std::uint64_t k = 0; k < count; ++k) {
          const std::uint64_t seq = f.sent + k;
          const bool signalled = (seq + 1) % cq_mod_ == 0 || seq + 1 == iters_;
          f.chain[k].send_flags = (f.wr.send_flags & IBV_SEND_INLINE) | (signalled ? IBV_SEND_SIGNALED : 0);
          f.chain[k].wr_id = (static_cast<std::uint64_t>(q) << 40) | seq;
          f.chain[k].sg_list = &f.sges[k];
          f.chain[k].next = k + 1 < count ? &f.chain[k + 1] : nullptr;
        }
        const std::uint64_t now = read_cycles();
        if (!timed_) posted_.insert(posted_.end(), count, now);
        if (f.sent == 0) f.first_post = now;
        for (std::uint64_t k = 0; k < count; ++k)
          if (f.chain[k].send_flags & IBV_SEND_SIGNALED) f.signalled_post[(f.sent + k) % depth_] = now;
        post_send(f.qp, f.chain.front());
        f.sent += count;
      }
    }
  }

  void retire(const ibv_wc& wc, std::uint64_t now) {
    Flow& f = flows_.at(wc.wr_id >> 40);
    const std::uint64_t upto = (wc.wr_id & ((std::uint64_t{1} << 40) - 1)) + 1;
    const std::uint64_t count = upto - f.done;
    f.done = upto;
    f.last_completion = now;
    retired_ += count;
    record_completion_latency(f, now - f.signalled_post[(upto - 1) % depth_], now);
    run_.watch_cpu(now);
    if (timed_) {
      if (run_.window.sampling(now)) in_window_ += count;
    } else if (retired_ > 0) {
      completed_[retired_ - 1] = now;
    }
  }

  // The result of this size: perftest's figures over all QPs and each QP's share.
  void finish(const CycleClock& clock, bool want_peak) {
    if (timed_) fill_duration_bandwidth(run_, in_window_, clock);
    else fill_bandwidth(run_.out, posted_, completed_, clock, want_peak);
    if (!timed_) fill_min_window(clock);
    if (!timed_) run_.out.iterations = retired_;
    fill_completion_latency(clock);
    if (flows_.size() < 2) return;
    for (const auto& f : flows_) {
      QpShare share{f.qp->qp_num, f.done, 0};
      if (f.last_completion > f.first_post)
        share.bw_avg_mb_per_sec = static_cast<double>(run_.out.size) * static_cast<double>(f.done) * clock.cycles_per_usec *
                                  1e6 / (static_cast<double>(f.last_completion - f.first_post) * 1048576.0);
      if (!f.latency_cycles.empty()) {
        const auto st = compute_statistics(to_usec_samples(f.latency_cycles, clock), 1);
        share.completion_p50_usec = st.percentiles[0].usec;
        share.completion_p99_usec = st.percentiles[2].usec;
      }
      run_.out.per_qp.push_back(share);
    }
  }

 private:
  // Minimum bandwidth over a sliding window of a tenth of the run, from the signalled completions,
  // first to last: the wait for the first one is latency, not bandwidth (in the lab the first
  // WRITE of a run left the guest up to 50 ms after its post; counted from the post, that start
  // was the slowest window of every run and hid the dips the figure is for).
  void fill_min_window(const CycleClock& clock) {
    if (retired_ == 0 || !completed_[retired_ - 1]) return;
    std::vector<std::uint64_t> times, retired;
    for (std::size_t k = 0; k < retired_; ++k)
      if (completed_[k]) {
        times.push_back(completed_[k]);
        retired.push_back(k + 1);
      }
    if (times.size() < 3) return;
    const std::uint64_t window = (times.back() - times.front()) / 10;
    if (window == 0) return;
    run_.out.bw_min_window_mb_per_sec = min_window_bandwidth(times, retired, run_.out.size, clock.cycles_per_usec, window);
    run_.out.min_window_seconds = static_cast<double>(window) / (clock.cycles_per_usec * 1e6);
  }

  struct Flow {
    ibv_qp* qp = nullptr;
    ibv_sge sge{};
    ibv_send_wr wr{};
    std::uint64_t sent = 0, done = 0, first_post = 0, last_completion = 0;
    std::vector<ibv_send_wr> chain;  // the work requests of one post (-l)
    std::vector<ibv_sge> sges;
    std::vector<std::uint64_t> signalled_post;  // post time of a signalled operation, by sequence mod -t
    std::vector<std::uint64_t> latency_cycles;  // post -> completion of the signalled operations
  };

  // Post -> signalled completion of each signalled operation (with -D only those completed inside
  // the window; --run_infinitely keeps none): the latency under load, per QP, bounded.
  void record_completion_latency(Flow& f, std::uint64_t cycles, std::uint64_t now) {
    if (run_.session.opt.run_infinitely || !run_.window.sampling(now)) return;
    if (f.latency_cycles.size() < kMaxDurationSamples / flows_.size()) f.latency_cycles.push_back(cycles);
  }

  static std::vector<double> to_usec_samples(const std::vector<std::uint64_t>& cycles, const CycleClock& clock) {
    std::vector<double> usec;
    usec.reserve(cycles.size());
    for (const auto c : cycles) usec.push_back(to_usec(c, clock.cycles_per_usec, 1));
    return usec;
  }

  // All QPs' completion latencies together: percentiles and histogram (statistics.h).
  void fill_completion_latency(const CycleClock& clock) {
    std::vector<std::uint64_t> all;
    for (const auto& f : flows_) all.insert(all.end(), f.latency_cycles.begin(), f.latency_cycles.end());
    if (!all.empty()) run_.out.completion_latency = compute_statistics(to_usec_samples(all, clock));
  }

  // perftest's send credit on iWARP (see SendCreditWriter): the peer writes its receive count
  // for QP q into our credit word q (our key message's vaddr); at most credit_window_ SENDs
  // beyond it. 0: no credit (not iWARP, or a one-way send-bw server, which only receives).
  static std::uint64_t send_credit_window(const Session& s) {
    if (s.opt.verb != Verb::Send || (s.is_server() && !s.opt.bidirectional) ||
        s.res.context()->device->transport_type != IBV_TRANSPORT_IWARP)
      return 0;
    return std::min<std::uint64_t>(s.opt.iterations, static_cast<std::uint64_t>(s.opt.rx_depth));
  }
  bool credit_allows(std::size_t q, std::uint64_t sent) {
    if (credit_window_ == 0) return true;
    std::atomic_thread_fence(std::memory_order_acquire);  // the word is written by the peer's RDMA WRITE
    std::uint32_t credit = 0;
    std::memcpy(&credit, res_.credit_word(q), sizeof credit);
    if (sent + post_list_ - credit < credit_window_) return true;
    gated_ = true;
    return false;
  }

  SizeRun& run_;
  bool timed_;
  std::uint64_t depth_, cq_mod_, iters_;
  std::uint64_t post_list_;
  std::uint64_t credit_window_;
  const VerbsResources& res_;
  bool gated_ = false;
  std::vector<Flow> flows_;
  std::vector<std::uint64_t> posted_, completed_;
  std::uint64_t retired_ = 0, in_window_ = 0;
};

ibv_wr_opcode bw_opcode(Verb verb) {
  return verb == Verb::Write ? IBV_WR_RDMA_WRITE : verb == Verb::Read ? IBV_WR_RDMA_READ : IBV_WR_SEND;
}

// Client side of write-bw/read-bw/send-bw (and both sides of -b write/read-bw).
SizeResult run_bw_client(Session& s, std::uint64_t size, const CycleClock& clock) {
  SizeRun run(s, size, clock, bw_opcode(s.opt.verb), s.opt.test_name + " size " + std::to_string(size));
  BwSender sender(run, s);
  if (s.opt.perform_warm_up && s.opt.verb != Verb::Send) sender.warm_up(s);
  try {
    while (!sender.finished() && !(run.window.active && run.time_up())) {
      sender.post_round();
      if (sender.gated_by_credit()) {
        ibv_wc wc{};
        const int n = ibv_poll_cq(s.res.send_cq(), 1, &wc);
        if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS))
          throw RunError("completion error on a SEND: " + completion_status_name(wc.status) + " - " + completion_status_hint(wc.status));
        if (n == 1) {
          sender.retire(wc, read_cycles());
          run.watchdog.progressed();
        } else {
          run.watchdog.check("the peer's send credit (iWARP; its receives)");
        }
        continue;
      }
      const ibv_wc wc = wait_completion(s.res.send_cq(), s.res.channel(), s.opt.use_events, run.watchdog,
                                        "completion of a " + s.opt.test_name + " operation");
      sender.retire(wc, read_cycles());
    }
  } catch (const TimeUp&) {
  }
  run.out.elapsed_usec = static_cast<double>(monotonic_ns() - run.t0) / 1000.0;
  sender.finish(clock, peak_wanted(s.opt));
  return run.out;
}

// The QP index of a completion (-q): perftest's QPs share one receive CQ.
std::size_t qp_index_of(const VerbsResources& res, std::uint32_t qp_num) {
  for (std::size_t q = 0; q < res.qp_count(); ++q)
    if (res.qp(q)->qp_num == qp_num) return q;
  return 0;
}

// perftest's send-bw on iWARP (send_rcredit): an iWARP SEND with no receive posted ends the
// connection (iWARP has no RNR NAK), so perftest's sender keeps at most rx_depth SENDs per QP
// beyond the receive count its peer last RDMA WRITE-s into the sender's credit word (a
// host-order uint32; its address and rkey are the sender's key-message vaddr and rkey), which
// the receiver does when (count mod rx_depth) mod (rx_depth / 3) is 0. Found in the lab: without
// the writes ib_send_bw -R -n 60 on siw sent 59 SENDs and waited for ever; with -b (both sides
// send and receive, perftest's run_iter_bi) ib_send_bw -b -R stopped after 511.
// A one-way server waits for each write; with -b the writes share the send CQ with the SENDs:
// take() picks their completions out of the -b loop, and at most kCreditWritesInFlight per QP
// are outstanding (the QP has that room beside -t).
class SendCreditWriter {
 public:
  using SendCompletion = std::function<void(const ibv_wc&)>;
  SendCreditWriter(Session& s, std::uint64_t receive_depth, const CycleClock& clock, SendCompletion other_send = {})
      : s_(s), clock_(clock), active_(s.res.context()->device->transport_type == IBV_TRANSPORT_IWARP),
        depth_(std::max<std::uint64_t>(receive_depth, 1)), every_(std::max<std::uint64_t>(receive_depth / 3, 1)),
        other_send_(std::move(other_send)), in_flight_(s.res.qp_count(), 0) {}

  // After a receive on QP q; count: that QP's receives so far.
  void received(std::size_t q, std::uint64_t count) {
    if (!active_ || (count % depth_) % every_ != 0) return;
    if (other_send_) {
      ProgressWatchdog watchdog(s_.opt.timeout_s, "send credit", clock_);
      while (in_flight_[q] >= kCreditWritesInFlight) poll_send_cq(watchdog);
    }
    const auto value = static_cast<std::uint32_t>(count);
    char* word = s_.res.credit_source(q);
    std::memcpy(word, &value, sizeof value);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(word), sizeof value, s_.res.mr()->lkey};
    ibv_send_wr wr{};
    wr.wr_id = q;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    const auto& key = s_.remote_key_of(q);
    wr.wr.rdma = {key.vaddr, key.rkey};
    post_send(s_.res.qp(q), wr);
    ++in_flight_[q];
    if (other_send_) return;
    ProgressWatchdog watchdog(s_.opt.timeout_s, "send credit", clock_);
    (void)wait_completion(s_.res.send_cq(), s_.res.channel(), s_.opt.use_events, watchdog,
                          "the send credit RDMA WRITE (iWARP)");
    --in_flight_[q];
  }

  // A successful send-CQ completion that is one of our writes (the SENDs complete as IBV_WC_SEND).
  bool take(const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_WRITE || wc.wr_id >= in_flight_.size()) return false;
    --in_flight_[wc.wr_id];
    return true;
  }

  // perftest's clean_scq_credit: the last writes complete before the QPs go.
  void finish() {
    ProgressWatchdog watchdog(s_.opt.timeout_s, "send credit", clock_);
    while (std::any_of(in_flight_.begin(), in_flight_.end(), [](int n) { return n > 0; })) poll_send_cq(watchdog);
  }

 private:
  void poll_send_cq(ProgressWatchdog& watchdog) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(s_.res.send_cq(), 1, &wc);
    if (n < 0) throw RunError("ibv_poll_cq failed on the send CQ");
    if (n == 0) return watchdog.check("the send credit RDMA WRITE (iWARP)");
    watchdog.progressed();
    if (!take(wc)) other_send_(wc);
  }

  Session& s_;
  const CycleClock& clock_;
  bool active_;
  std::uint64_t depth_, every_;
  SendCompletion other_send_;
  std::vector<int> in_flight_;
};

// Server side of send-bw: count receives on every QP, re-post on the QP that consumed one.
SizeResult run_send_bw_server(Session& s, std::uint64_t size, std::uint64_t receive_depth, const CycleClock& clock) {
  auto& res = s.res;
  SizeRun run(s, size, clock, IBV_WR_SEND, "send-bw size " + std::to_string(size));
  const std::uint64_t per_qp = run.iters;
  const bool timed = run.window.active;
  const std::uint64_t expected = timed ? per_qp : per_qp * res.qp_count();
  std::vector<std::uint64_t> received(res.qp_count(), 0);
  std::uint64_t first = 0, last = 0, arrived = 0, in_window = 0;
  SendCreditWriter credits(s, receive_depth, clock);
  try {
    for (std::uint64_t i = 0; i < expected && !(timed && run.time_up()); ++i) {
      const ibv_wc wc = wait_completion(res.recv_cq(), res.channel(), s.opt.use_events, run.watchdog,
                                        "the peer's SEND #" + std::to_string(i + 1));
      last = read_cycles();
      if (i == 0) first = last;
      ++arrived;
      run.watch_cpu(last);
      if (run.window.active && run.window.sampling(last)) ++in_window;
      const std::size_t q = qp_index_of(res, wc.qp_num);
      ++received[q];
      if (timed || received[q] + receive_depth <= per_qp) post_receives(res, size, 1, q);
      credits.received(q, received[q]);
    }
  } catch (const TimeUp&) {
  }
  run.out.elapsed_usec = static_cast<double>(monotonic_ns() - run.t0) / 1000.0;
  if (timed) {
    fill_duration_bandwidth(run, in_window, clock);
    return run.out;
  }
  run.out.iterations = arrived;
  // The server sees arrivals only: average from the first arrival to the last.
  const double total = static_cast<double>(last - first);
  const double cycles_per_sec = clock.cycles_per_usec * 1e6;
  if (arrived > 1 && total > 0) {
    run.out.bw_avg_mb_per_sec = static_cast<double>(size) * static_cast<double>(arrived - 1) * cycles_per_sec / (total * 1048576.0);
    run.out.msg_rate_mpps = static_cast<double>(arrived - 1) * cycles_per_sec / (total * 1e6);
    // No peak: perftest's force_dependecies sets noPeak on a one-way SEND server (prints 0.00).
    run.out.bw_peak_mb_per_sec = 0;
  }
  for (std::size_t q = 0; q < res.qp_count() && res.qp_count() > 1; ++q)
    run.out.per_qp.push_back({res.qp(q)->qp_num, received[q], 0});
  return run.out;
}

// --run_infinitely: SIGINT ends the run (the handler only sets this flag).
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// --run_infinitely's periods (perftest's print thread: a row every -D s, default 5): the
// messages counted since the last report, handed to on_period (row, JSON line, metrics). The
// result is the last whole period (the run so far if none ended) with the whole run in infinite.
class InfinitePeriods {
 public:
  InfinitePeriods(const Session& s, const SizeResult& base, const CycleClock& clock)
      : on_period_(s.opt.on_period), base_(base), cycles_per_sec_(clock.cycles_per_usec * 1e6),
        period_cycles_(static_cast<std::uint64_t>((s.opt.duration_s > 0 ? s.opt.duration_s : 5) * cycles_per_sec_)),
        start_(read_cycles()), period_start_(start_) {}

  // messages: the running total. True when a period ended (a moment to look at the peer).
  bool update(std::uint64_t messages, std::uint64_t now) {
    if (now - period_start_ < period_cycles_) return false;
    last_ = figures(messages - at_period_start_, now - period_start_);
    ++periods_;
    if (on_period_) on_period_(last_);
    period_start_ = now;
    at_period_start_ = messages;
    return true;
  }

  SizeResult finish(std::uint64_t messages, std::uint64_t now, const std::string& ended_by) const {
    SizeResult out = periods_ ? last_ : figures(messages, now - start_);
    out.infinite = InfiniteRun{periods_, messages, static_cast<double>(now - start_) / cycles_per_sec_, ended_by};
    return out;
  }

 private:
  SizeResult figures(std::uint64_t messages, std::uint64_t cycles) const {
    SizeResult period = base_;
    const double seconds = std::max(1e-9, static_cast<double>(cycles) / cycles_per_sec_);
    period.iterations = messages;
    period.msg_rate_mpps = static_cast<double>(messages) / seconds / 1e6;
    period.bw_avg_mb_per_sec = static_cast<double>(base_.size) * static_cast<double>(messages) / seconds / 1048576.0;
    period.bw_peak_mb_per_sec = 0;  // perftest: noPeak with --run_infinitely
    period.elapsed_usec = seconds * 1e6;
    return period;
  }

  std::function<void(const SizeResult&)> on_period_;
  SizeResult base_, last_;
  double cycles_per_sec_;
  std::uint64_t period_cycles_, start_, period_start_, at_period_start_ = 0, periods_ = 0;
};

// What ends a --run_infinitely loop: SIGINT here, or the peer closing the exchange (a perftest
// peer is killed; an rdmadiag peer stopped by its own SIGINT). The peer is looked at every
// 100 ms, not per completion (a system call).
class InfiniteStop {
 public:
  // The handler stays for the rest of the process: a SIGINT arriving after the loop ended (the
  // peer closed first; seen in the lab) must not kill the process before its final report.
  InfiniteStop(Session& s, const CycleClock& clock)
      : oob_(s.oob), check_cycles_(static_cast<std::uint64_t>(clock.cycles_per_usec * 1e5)) {
    g_interrupted = 0;
    std::signal(SIGINT, on_sigint);
  }

  bool now(std::uint64_t cycles) {
    if (g_interrupted) reason_ = "SIGINT";
    else if (cycles - last_check_ >= check_cycles_) {
      last_check_ = cycles;
      if (oob_.peer_closed()) reason_ = "peer closed";
    }
    return !reason_.empty();
  }
  // A completion error once the peer is gone (its QP destroyed) ends the run too: wait up to 3 s
  // for the exchange to show it; otherwise the error stands.
  bool explains_error() {
    for (int i = 0; i < 30 && reason_.empty(); ++i) {
      if (oob_.peer_closed()) reason_ = "peer closed";
      else std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return !reason_.empty();
  }
  const std::string& reason() const { return reason_; }

 private:
  OobTransport& oob_;
  std::uint64_t check_cycles_, last_check_ = 0;
  std::string reason_;
};

// --run_infinitely, a sender (perftest's run_iter_bw_infinitely; write/read/send-bw client,
// both sides of write/read-bw -b): send without end, report every period, stop at SIGINT or
// when the peer is gone, then wait (at most 2 s) for what is still in flight.
SizeResult run_bw_infinitely(Session& s, std::uint64_t size, const CycleClock& clock) {
  SizeRun run(s, size, clock, bw_opcode(s.opt.verb), s.opt.test_name + " --run_infinitely");
  run.iters = std::numeric_limits<std::uint64_t>::max() >> 24;  // unbounded, fits the wr_id field
  BwSender sender(run, s);
  InfinitePeriods periods(s, run.out, clock);
  InfiniteStop stop(s, clock);
  std::array<ibv_wc, 16> wcs{};
  std::uint64_t now = read_cycles();
  while (!stop.now(now)) {
    sender.post_round();
    const int n = ibv_poll_cq(s.res.send_cq(), 16, wcs.data());
    if (n < 0) throw RunError("ibv_poll_cq failed in --run_infinitely");
    now = read_cycles();
    for (int k = 0; k < n; ++k) {
      if (wcs[k].status != IBV_WC_SUCCESS) {
        if (stop.explains_error()) return periods.finish(sender.retired(), now, stop.reason());
        throw RunError("completion error in --run_infinitely: " + completion_status_name(wcs[k].status) + " - " +
                       completion_status_hint(wcs[k].status));
      }
      sender.retire(wcs[k], now);
    }
    if (n > 0) run.watchdog.progressed();
    else run.watchdog.check("a --run_infinitely operation");
    periods.update(sender.retired(), now);
  }
  SizeResult out = periods.finish(sender.retired(), now, stop.reason());
  if (stop.reason() == "SIGINT") BwSender::drain(s.res.send_cq(), 2000);
  return out;
}

// --run_infinitely, send-bw server (perftest's run_iter_bw_infinitely_server): consume the
// client's SENDs, re-post each receive, report every period; stop at SIGINT or when the client
// is gone (perftest's client is killed; ours closes after its SIGINT).
SizeResult run_send_bw_infinitely_server(Session& s, std::uint64_t size, std::uint64_t receive_depth, const CycleClock& clock) {
  auto& res = s.res;
  SendCreditWriter credits(s, receive_depth, clock);
  std::vector<std::uint64_t> received(res.qp_count(), 0);
  SizeRun run(s, size, clock, IBV_WR_SEND, "send-bw --run_infinitely");
  InfinitePeriods periods(s, run.out, clock);
  InfiniteStop stop(s, clock);
  std::array<ibv_wc, 16> wcs{};
  std::uint64_t arrived = 0, now = read_cycles();
  while (!stop.now(now)) {
    const int n = ibv_poll_cq(res.recv_cq(), 16, wcs.data());
    if (n < 0) throw RunError("ibv_poll_cq failed in send-bw --run_infinitely");
    now = read_cycles();
    for (int k = 0; k < n; ++k) {
      if (wcs[k].status != IBV_WC_SUCCESS) {
        if (stop.explains_error()) return periods.finish(arrived, now, stop.reason());
        throw RunError("completion error on a receive in --run_infinitely: " + completion_status_name(wcs[k].status));
      }
      ++arrived;
      const std::size_t q = qp_index_of(res, wcs[k].qp_num);
      post_receives(res, size, 1, q);
      credits.received(q, ++received[q]);
    }
    periods.update(arrived, now);  // no watchdog: a quiet client is not an error here
  }
  return periods.finish(arrived, now, stop.reason());
}

// -b send-bw, perftest's run_iter_bi: each side sends its -n per QP (figures as a sender) and
// at the same time consumes the peer's SENDs, re-posting receives on the QP that used one; on
// iWARP each side also gives its peer send credits (SendCreditWriter).
SizeResult run_send_bw_bidirectional(Session& s, std::uint64_t size, std::uint64_t receive_depth, const CycleClock& clock) {
  auto& res = s.res;
  SizeRun run(s, size, clock, IBV_WR_SEND, "send-bw -b size " + std::to_string(size));
  BwSender sender(run, s);
  const auto on_send = [&sender](const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS)
      throw RunError("completion error on a SEND: " + completion_status_name(wc.status) + " - " + completion_status_hint(wc.status));
    sender.retire(wc, read_cycles());
  };
  SendCreditWriter credits(s, receive_depth, clock, on_send);
  const bool timed = run.window.active;
  const std::uint64_t expected = run.iters * res.qp_count();  // -D: unbounded
  std::vector<std::uint64_t> received(res.qp_count(), 0);
  std::uint64_t arrived = 0;
  std::array<ibv_wc, 16> wcs{};
  try {
    while (!(sender.finished() && arrived >= expected) && !(timed && run.time_up())) {
      sender.post_round();
      const int sends = ibv_poll_cq(res.send_cq(), 16, wcs.data());
      for (int k = 0; k < sends; ++k)
        if (!credits.take(wcs[k])) on_send(wcs[k]);
      const int recvs = ibv_poll_cq(res.recv_cq(), 16, wcs.data());
      for (int k = 0; k < recvs; ++k) {
        if (wcs[k].status != IBV_WC_SUCCESS)
          throw RunError("completion error on a receive: " + completion_status_name(wcs[k].status) + " - " +
                         completion_status_hint(wcs[k].status));
        const std::size_t q = qp_index_of(res, wcs[k].qp_num);
        ++arrived;
        ++received[q];
        if (timed || received[q] + receive_depth <= run.iters) post_receives(res, size, 1, q);
        credits.received(q, received[q]);
      }
      if (sends < 0 || recvs < 0) throw RunError("ibv_poll_cq failed in send-bw -b");
      if (sends > 0 || recvs > 0) run.watchdog.progressed();
      else run.watchdog.check("completions of send-bw -b (" + std::to_string(arrived) + " SENDs received)");
    }
    credits.finish();
  } catch (const TimeUp&) {
  }
  run.out.elapsed_usec = static_cast<double>(monotonic_ns() - run.t0) / 1000.0;
  sender.finish(clock, peak_wanted(s.opt));
  return run.out;
}

// perftest's xchg_bw_reports: five 8-byte fields, in the unit each side prints (MB/s, or Gb/s
// with --report_gbits; both sides need the same choice, as with perftest).
oob::BwReport exchange_bw_report(Session& s, const SizeResult* mine_result) {
  const double to_unit = s.opt.report_gbits ? 1048576.0 * 8 / 1e9 : 1.0;
  oob::BwReport mine{};
  if (mine_result)
    mine = {mine_result->size, mine_result->iterations, mine_result->bw_peak_mb_per_sec * to_unit,
            mine_result->bw_avg_mb_per_sec * to_unit, mine_result->msg_rate_mpps};
  const auto fields = oob::encode_bw_report(mine);
  std::array<std::array<char, 8>, 5> theirs{};
  static const char* const kFieldNames[] = {"size", "iterations", "peak bandwidth", "average bandwidth", "message rate"};
  for (std::size_t i = 0; i < 5; ++i) {
    const auto got = s.oob.exchange(fields[i], 8, std::string("bandwidth report (") + kFieldNames[i] + ")", s.timeout_ms);
    std::memcpy(theirs[i].data(), got.data(), 8);
  }
  auto remote = oob::parse_bw_report(theirs);
  remote.bw_peak_mb_per_sec /= to_unit;
  remote.bw_avg_mb_per_sec /= to_unit;
  return remote;
}

// A peer's report that counts messages but no bandwidth: perftest's get_cpu_mhz returns 0 when
// its clock sampling fails (stderr "Correlation coefficient r^2: ... < 0.9"; seen under
// emulation), and every figure it computes is then 0. Printed as perftest would (the -b sum is
// this side's figure alone), but said, so the halved sum is not taken for a slow fabric.
void note_peer_without_bandwidth(Session& s, const oob::BwReport& remote) {
  if (remote.iterations == 0 || remote.bw_avg_mb_per_sec != 0) return;
  s.result.warnings.push_back("the peer reported " + std::to_string(remote.iterations) +
                              " iterations at 0 bandwidth (perftest does when its CPU clock measurement fails: "
                              "its stderr says \"Correlation coefficient\"); the figures shown are this side's alone");
}

// --run_infinitely: a run the peer ended (it closed the exchange) has nothing more to
// exchange; said as a warning (perftest's peer is simply killed, that is its normal end).
bool ended_by_peer(Session& s) {
  const auto& last = s.result.sizes.back();
  if (!last.infinite || last.infinite->ended_by != "peer closed") return false;
  s.result.warnings.push_back("--run_infinitely: the peer closed the connection (stopped); the figures are this side's");
  return true;
}

// write-bw/read-bw without -b: the client runs, the server waits; then the client's report goes
// to the server, which prints it (perftest 4.5's write_bw.c / read_bw.c).
void run_rdma_bw_one_way(Session& s, const std::vector<std::uint64_t>& sizes, const CycleClock& clock,
                         const std::function<void(std::uint64_t)>& announce, int whole_test_ms) {
  if (!s.is_server())
    for (auto size : sizes) {
      announce(size);
      s.result.sizes.push_back(s.opt.run_infinitely ? run_bw_infinitely(s, size, clock) : run_bw_client(s, size, clock));
      if (ended_by_peer(s)) return;
    }
  if (s.is_server() && s.opt.run_infinitely) {
    // The client runs until it is stopped (a day at most here); a perftest client is simply
    // killed, so its closed connection is the normal end (perftest: "Client closed connection").
    try {
      s.barrier("end of test (waiting for the client)", 86400 * 1000);
    } catch (const RunError& e) {
      s.result.warnings.push_back(std::string("client closed connection: ") + e.what());
      return;
    }
  } else {
    s.barrier(s.is_server() ? "end of test (waiting for the client)" : "end of test", whole_test_ms);
  }
  const auto remote = exchange_bw_report(s, s.result.sizes.empty() ? nullptr : &s.result.sizes.back());
  if (s.is_server()) {
    note_peer_without_bandwidth(s, remote);
    SizeResult r;
    r.size = remote.size;
    r.iterations = remote.iterations;
    r.bw_peak_mb_per_sec = remote.bw_peak_mb_per_sec;
    r.bw_avg_mb_per_sec = remote.bw_avg_mb_per_sec;
    r.msg_rate_mpps = remote.msg_rate_mpps;
    r.remote_report = remote;
    s.result.sizes.push_back(r);
  } else if (s.result.info.peer_is_rdmadiag && !s.result.sizes.empty()) {
    // perftest's server sends uninitialised memory here; only an rdmadiag peer's is meaningful.
    s.result.sizes.back().remote_report = remote;
  }
  s.finish_with_done();
}

// -b write-bw/read-bw (perftest 4.5): both sides run the sender; per size a barrier, the run,
// (with -a) another barrier, then the reports are exchanged; the table shows the sum.
void run_rdma_bw_bidirectional(Session& s, const std::vector<std::uint64_t>& sizes, const CycleClock& clock,
                               const std::function<void(std::uint64_t)>& announce) {
  for (auto size : sizes) {
    announce(size);
    if (s.opt.run_infinitely) {
      // perftest 4.5: no barrier, both sides send until killed, no report exchange; each side
      // reports its own (a barrier here waited for ever on ib_write_bw -b in the lab).
      s.result.sizes.push_back(run_bw_infinitely(s, size, clock));
      (void)ended_by_peer(s);
      return;
    }
    s.barrier("start of size " + std::to_string(size));
    auto r = run_bw_client(s, size, clock);
    if (s.opt.all_sizes) s.barrier("end of size " + std::to_string(size));
    r.remote_report = exchange_bw_report(s, &r);
    note_peer_without_bandwidth(s, *r.remote_report);
    r.bidirectional = true;
    s.result.sizes.push_back(r);
  }
  s.finish_with_done();
}

// send-bw (perftest 4.5's send_bw.c): per size the receivers post -r per QP, a barrier, the run,
// with -b the reports (not with -D), and with -a one more barrier.
void run_send_bw_sizes(Session& s, const std::vector<std::uint64_t>& sizes, std::uint64_t receive_depth,
                       const CycleClock& clock, const std::function<void(std::uint64_t)>& announce) {
  for (auto size : sizes) {
    announce(size);
    if (s.is_server() || s.opt.bidirectional) post_receives_on_every_qp(s.res, size, receive_depth);
    s.barrier("receives posted (size " + std::to_string(size) + ")");
    if (s.opt.run_infinitely) {
      // perftest 4.5's send_bw: after this barrier the client sends and the server receives until
      // killed; nothing more is exchanged.
      s.result.sizes.push_back(s.is_server() ? run_send_bw_infinitely_server(s, size, receive_depth, clock) : run_bw_infinitely(s, size, clock));
      (void)ended_by_peer(s);
      return;
    }
    SizeResult r = s.opt.bidirectional ? run_send_bw_bidirectional(s, size, receive_depth, clock)
                   : s.is_server()     ? run_send_bw_server(s, size, receive_depth, clock)
                                       : run_bw_client(s, size, clock);
    if (s.opt.bidirectional && s.opt.duration_s == 0) {
      r.remote_report = exchange_bw_report(s, &r);
      note_peer_without_bandwidth(s, *r.remote_report);
      r.bidirectional = true;
    }
    s.result.sizes.push_back(r);
    if (s.opt.all_sizes) s.barrier("end of size " + std::to_string(size));
  }
  s.finish_with_done();
}

// -R: perftest's sequence after the preamble: one key exchange (its keys are still empty), the
// test's own rdma_cm connection on the same port (the server listens again), another exchange.
// The QP and its resources are created on the device rdma_cm resolved, into cm_resources.
VerbsResources& connect_test_qp_with_rdma_cm(const TestOptions& opt, const ResourceRequest& req, OobTransport& oob,
                                             bool cm_tail_markers, int timeout_ms,
                                             std::vector<CmConnection>& connections,
                                             std::optional<VerbsResources>& cm_resources) try {
  std::optional<CmConnection> listener;  // server: one listener for every QP's connection (-q)
  if (oob.is_client()) {
    exchange_key(oob, {}, false, cm_tail_markers, "sync before the rdma_cm connection", timeout_ms);
  } else {
    // The client connects as soon as it has our answer: listen before answering (perftest
    // listens after, and a fast client - seen with ib_send_lat -R on siw - is refused).
    (void)oob::parse_cm_key_message(oob.receive_message("sync before the rdma_cm connection", timeout_ms));
    listener.emplace(CmConnection::listen(opt.tcp_port, "test connection", opt.qp_count));
    oob.send(oob::encode_cm_key_message({}, cm_tail_markers), "sync before the rdma_cm connection");
  }
  CmHooks hooks;
  hooks.create_qp = [&](rdma_cm_id* id) {
    // The first id brings the device: all resources; each further one (-q) adds its QP.
    if (connections.empty()) {
      ResourceRequest cm_request = req;
      cm_request.cm_id = id;
      cm_resources.emplace(cm_request);
    } else {
      cm_resources->add_cm_qp(id, req);
    }
    CmConnectParams params;
    if (opt.verb == Verb::Read || opt.verb == Verb::Atomic) {
      // rdma_cm grants the QP remote read/atomic access only with responder resources.
      params.responder_resources = cm_resources->out_reads();
      params.initiator_depth = std::min(cm_resources->out_reads(), cm_resources->max_initiator_depth());
    }
    return params;
  };
  hooks.destroy_qp = [&] {
    if (connections.empty()) cm_resources.reset();
    else cm_resources->remove_last_cm_qp();
  };
  hooks.tos = opt.tos;
  hooks.ack_timeout = opt.qp_timeout;
  // One rdma_cm connection per QP, one after the other: QP i of the client is QP i of the
  // server (perftest's server numbers them in arrival order, its client in connect order).
  for (int q = 0; q < std::max(opt.qp_count, 1); ++q) {
    const std::string what = opt.qp_count > 1 ? "test connection (QP " + std::to_string(q) + ")" : "test connection";
    if (oob.is_client())
      connections.push_back(CmConnection::connect(opt.peer, opt.tcp_port, timeout_ms, hooks, what));
    else
      connections.push_back(listener->accept_next(timeout_ms, hooks, what));
  }
  exchange_key(oob, {}, false, cm_tail_markers, "sync after the rdma_cm connection", timeout_ms);
  return *cm_resources;
} catch (const oob::ProtocolError& e) {
  throw RunError(std::string("out-of-band sync around the rdma_cm connection: ") + e.what());
}

// The device, port and GID fields of the report.
void describe_resources(TestInfo& info, const VerbsResources& res) {
  info.device = res.device_name();
  info.port = res.port();
  info.link_layer = link_layer_name(res.port_attr().link_layer);
  const bool iwarp = res.context()->device->transport_type == IBV_TRANSPORT_IWARP;
  info.transport_type = iwarp ? "IW" : "IB";
  // perftest reports the GID index it picked even where rdma_cm addresses the peer without one
  // (iWARP: siw's only, MAC-based GID is index 0; Debian's ib_*_bw -R prints "GID index : 0").
  info.gid_index = res.gid_index() >= 0 || !iwarp ? res.gid_index() : 0;
  info.gid.clear();
  info.gid_type.clear();
  info.netdev.clear();
  if (res.gid()) {
    info.gid = res.gid()->text();
    info.gid_type = res.gid()->type;
    info.netdev = res.gid()->netdev;
  }
  info.inline_size = res.inline_size();
}

int perftest_verb_code(Verb v) {
  switch (v) {
    case Verb::Send: return 0;
    case Verb::Write: return 2;
    case Verb::Read: return 4;
    case Verb::Atomic: return 5;
  }
  return 0;
}

}  // namespace

std::vector<std::uint64_t> sizes_to_run(const TestOptions& o) {
  if (o.verb == Verb::Atomic) return {8};
  if (!o.all_sizes) return {o.size};
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = 2; s <= kLargestSweepSize; s <<= 1) sizes.push_back(s);
  return sizes;
}

int effective_cq_mod(const TestOptions& o) {
  return perftest_cq_mod(o.cq_mod, o.cq_mod_given, o.size, o.all_sizes, o.use_events, o.transport == Transport::UD,
                         effective_tx_depth(o), o.post_list);
}

namespace {
bool iterations_mode(const TestOptions& o) { return o.duration_s == 0 && !o.run_infinitely; }
int at_most_iterations(int depth, const TestOptions& o) {
  if (!iterations_mode(o) || o.iterations >= static_cast<std::uint64_t>(depth)) return depth;
  return static_cast<int>(o.iterations);
}
}  // namespace

int effective_tx_depth(const TestOptions& o) { return at_most_iterations(o.tx_depth, o); }
int effective_rx_depth(const TestOptions& o) { return at_most_iterations(o.rx_depth, o); }

std::string verb_title(Verb verb, Measure measure) {
  const char* v = verb == Verb::Write ? "RDMA_Write" : verb == Verb::Read ? "RDMA_Read" : verb == Verb::Send ? "Send" : "Atomic FETCH_AND_ADD";
  return std::string(v) + (measure == Measure::Latency ? " Latency Test" : " BW Test");
}

// The version, page and cache-line size and MTU steps; mtu becomes the smaller of both sides'.
oob::PeerVersion exchange_preamble(const TestOptions& opt, OobTransport& oob, int& mtu, int timeout_ms) {
  const auto my_version = oob::encode_version(opt.announce_version, true);
  oob::PeerVersion peer_version;
  try {
    peer_version = oob::parse_version(oob.exchange(my_version, oob::kVersionSize, "version exchange", timeout_ms));
  } catch (const oob::ProtocolError& e) {
    throw RunError(e.what());
  }
  if (peer_version.number < oob::kOldestCompatibleVersion)
    throw RunError("the peer announces perftest version " + peer_version.text +
                   "; rdmadiag (like perftest itself) needs 5.70 or newer on the other side - upgrade the peer's perftest");
  const long page_size = sysconf(_SC_PAGESIZE);
  oob.exchange(oob::encode_be32(static_cast<std::uint32_t>(page_size)), 4, "page size exchange", timeout_ms);
  oob.exchange(oob::encode_be32(64), 4, "cache line size exchange", timeout_ms);
  const auto got = oob.exchange(oob::encode_mtu(mtu), oob::kMtuMessageSize, "MTU exchange", timeout_ms);
  try {
    mtu = std::min(mtu, oob::parse_mtu(got));
  } catch (const oob::ProtocolError& e) {
    throw RunError(e.what());
  }
  return peer_version;
}

// Upstream perftest >= 6.28's parameter negotiation (perftest_communication.c negotiate_params):
// both sides send their parameters and the device attributes, and each compares them and stops
// on the first difference; rdmadiag lists every difference.
void negotiate_parameters(const TestOptions& opt, OobTransport& oob, const VerbsResources& res0, int timeout_ms) {
  const bool latency = opt.measure == Measure::Latency;
  oob::NegotiationBlock mine;
  mine.test_method = opt.all_sizes ? 1 : 0;
  mine.connection_type = opt.transport == Transport::RC ? 0 : opt.transport == Transport::UC ? 1 : 2;
  mine.verb = perftest_verb_code(opt.verb);
  mine.tst = latency ? 0 : 1;
  mine.test_type = opt.duration_s > 0 ? 1 : 0;
  if (opt.duration_s > 0) mine.duration = opt.duration_s;
  mine.size = opt.size;
  mine.iters = opt.iterations;
  mine.use_rdma_cm = opt.rdma_cm ? 1 : 0;
  mine.num_of_qps = opt.qp_count;
  mine.report_fmt = opt.report_gbits ? 0 : 1;
  const auto& da = res0.device_attr();
  mine.device_attr.assign(reinterpret_cast<const std::uint8_t*>(&da), reinterpret_cast<const std::uint8_t*>(&da) + sizeof da);
  std::vector<char> got;
  const auto with_mask = oob::encode_negotiation(mine, true);
  const auto without_mask = oob::encode_negotiation(mine, false);
  // The block's size depends on whether the peer's perftest was built with mlx5dv. The
  // server learns it from what the client sends; the client sends the distribution
  // packages' size and accepts either back.
  if (oob.is_client()) oob.send(with_mask, "parameter negotiation");
  if (oob.message_based()) {
    got = oob.receive_message("parameter negotiation", timeout_ms);
  } else {
    got = oob.receive(oob::kNegotiationSizeWithoutMlx5, "parameter negotiation", timeout_ms);
    const auto extra = oob.drain(200);
    got.insert(got.end(), extra.begin(), extra.end());
  }
  if (!oob.is_client()) oob.send(got.size() == oob::kNegotiationSizeWithMlx5 ? with_mask : without_mask, "parameter negotiation");
  try {
    const auto diffs = oob::compare_negotiation(mine, oob::parse_negotiation(got));
    if (!diffs.empty()) {
      std::string text = "parameter negotiation (perftest >= 6.28): the peer runs with other parameters; both sides "
                         "need the same (upstream perftest stops here too):";
      for (const auto& d : diffs) text += "\n  " + d;
      throw RunError(text);
    }
  } catch (const oob::ProtocolError& e) {
    throw RunError(e.what());
  }
}

// -W: every named counter must be readable on the device's port, as perftest's counters_open
// requires ("Unable to access performance counters"); checked before anything waits.
void check_report_counters(const TestOptions& opt, const std::string& device, int port) {
  if (opt.report_counters.empty()) return;
  const auto available = read_port_counters(device, port);
  for (const auto& name : opt.report_counters) {
    if (available.count(name)) continue;
    std::string known;
    for (const auto& [k, v] : available) known += (known.empty() ? "" : ", ") + k;
    throw RunError("-W " + name + ": no such counter on " + device + " port " + std::to_string(port) +
                   " (names are counters/<name> or hw_counters/<name> under /sys/class/infiniband/" + device + "/ports/" +
                   std::to_string(port) + "/; this port has: " + (known.empty() ? "none" : known) + ")");
  }
}

// Option combinations perftest refuses (its parser and force_dependencies in
// perftest_parameters.c), checked before a device is opened; and those rdmadiag lacks.
void check_bandwidth_options(const TestOptions& opt) {
  const bool latency = opt.measure == Measure::Latency;
  if (latency && opt.qp_count > 1) throw RunError("-q: multiple QPs only available on bandwidth tests (as perftest)");
  if (latency && opt.bidirectional) throw RunError("-b: bidirectional is only available in bandwidth tests (as perftest)");
  if (latency && opt.no_peak) throw RunError("-N: noPeak is only valid for bandwidth tests (as perftest)");
  // perftest's parser, case 'e': a WRITE test's completions are not waited for by events.
  if (opt.use_events && opt.verb == Verb::Write) throw RunError("-e: events are not available on the WRITE verb (as perftest)");
  if (opt.post_list > 1) {
    // perftest_parameters.c force_dependencies.
    if (latency) throw RunError("-l/--post_list: post list is supported in bandwidth tests only (as perftest)");
    if (opt.duration_s == 0 && opt.iterations % static_cast<std::uint64_t>(opt.post_list) != 0)
      throw RunError("-l: the number of iterations must be a multiple of the post list size (as perftest)");
    if (opt.cq_mod_given && opt.post_list % opt.cq_mod != 0)
      throw RunError("-l: the post list size must be a multiple of the CQ moderation -Q (as perftest)");
    if (opt.post_list > opt.tx_depth) throw RunError("-l: the post list cannot be longer than -t");
  }
  if (opt.run_infinitely) {
    if (latency) throw RunError("--run_infinitely exists only in bandwidth tests (as perftest)");
    if (opt.use_events) throw RunError("--run_infinitely does not support -e (as perftest)");
    if (opt.all_sizes) throw RunError("--run_infinitely runs one size: not with -a");
    if (opt.bidirectional && opt.verb == Verb::Send)
      throw RunError("--run_infinitely is not supported in the SEND bidirectional test (as perftest)");
  }
  if (!latency && opt.latency_gap_usec > 0)
    throw RunError("--latency_gap: the latency gap is only for latency tests (as perftest)");
  // perftest's parser: -C, -H and -U "Available only on Latency tests".
  if (!latency && (opt.report_cycles || opt.print_every_sample || opt.report_unsorted))
    throw RunError(std::string(opt.report_cycles ? "-C/--report-cycles" : opt.report_unsorted ? "-U/--report-unsorted" : "-H/--report-histogram") +
                   ": available only in latency tests (as perftest)");

  if (!opt.gpu_option.empty())
    throw RunError("--" + opt.gpu_option +
                   ": GPU memory is not supported in this build of rdmadiag perftest (host memory only; nothing falls back "
                   "silently - run without it, or use perftest built with GPU support)");
  if (opt.verb != Verb::Send && opt.rx_depth_given && opt.rx_depth > 1)
    throw RunError("-r: on RDMA verbs the rx depth can only be 1 (as perftest); -r applies to SEND tests");
  if (opt.qp_count > 1 && opt.transport == Transport::UD)
    throw RunError("-q with -c UD is not supported yet by rdmadiag perftest");
}

namespace {

// The combinations perftest refuses, and rdmadiag's own limits: checked before anything opens.
void check_test_options(const TestOptions& opt) {
  check_bandwidth_options(opt);
  if (opt.rdma_cm && opt.transport == Transport::UC)
    throw RunError("-c UC cannot be used with -R/--rdma_cm (librdmacm connects RC and UD QPs only; perftest refuses it too)");
  if (opt.duration_s > 0 && opt.all_sizes)
    throw RunError("-D cannot be combined with -a (perftest's duration mode runs one size too)");
  if (opt.duration_s > 0 && opt.use_events)
    throw RunError("-D cannot be combined with -e (as in perftest: duration mode polls)");
  if (opt.transport == Transport::UD && opt.verb != Verb::Send)
    throw RunError("-c UD allows only SEND tests (send-lat, send-bw): UD has no RDMA WRITE, READ or atomics");
  if (opt.transport == Transport::UD && opt.rdma_cm)
    throw RunError("-c UD with -R/--rdma_cm is not supported yet by rdmadiag perftest (UD works with the TCP exchange)");
  if (opt.transport == Transport::UC && opt.verb != Verb::Write && opt.verb != Verb::Send)
    throw RunError("-c UC allows only WRITE and SEND tests (UC has no RDMA READ or atomics)");
  const bool latency = opt.measure == Measure::Latency;
  if (opt.iterations < (latency ? 5u : 1u))
    throw RunError("-n must be at least " + std::string(latency ? "5 for latency tests" : "1"));
  if (opt.warmup >= opt.iterations) throw RunError("--warmup must be smaller than -n");
}

// The options perftest accepts but that do nothing in this combination.
void warn_ignored_options(const TestOptions& opt, TestResult& result) {
  const bool latency = opt.measure == Measure::Latency;
  if (opt.cpu_util && (opt.duration_s == 0 || opt.run_infinitely))
    result.warnings.push_back("--cpu_util works only with -D (duration mode), as perftest's: no CPU figures");
  if (opt.perform_warm_up && (latency || opt.verb == Verb::Send))
    result.warnings.push_back("--perform_warm_up is ignored here: perftest warms up only in write_bw and read_bw");
}

ResourceRequest resource_request(const TestOptions& opt, std::uint64_t largest, std::uint64_t receive_depth) {
  const bool latency = opt.measure == Measure::Latency;
  ResourceRequest req;
  req.device = opt.device;
  req.port = opt.ib_port;
  req.gid_index = opt.gid_index;
  req.transport = opt.transport;
  req.buffer_size = std::max<std::uint64_t>(largest, 8);
  req.send_queue_depth = latency ? 128 : std::max(opt.tx_depth, 1);
  // send-bw -b on iWARP: room for the send-credit RDMA WRITEs beside -t SENDs (SendCreditWriter).
  if (opt.verb == Verb::Send && opt.bidirectional) req.send_queue_depth += kCreditWritesInFlight;
  req.send_test = opt.verb == Verb::Send;
  req.qp_count = latency ? 1 : opt.qp_count;
  req.recv_queue_depth = opt.verb == Verb::Send ? static_cast<int>(receive_depth) : 1;
  req.use_events = opt.use_events;
  req.out_reads = (opt.verb == Verb::Read || opt.verb == Verb::Atomic) ? 1 << 16 : 1;
  // perftest's default inline sizes apply to the devices it knows (mlx*); for the others
  // (rxe, siw, ...) it uses 0, and so do we, unless -I says otherwise.
  if (opt.inline_size) {
    req.max_inline = *opt.inline_size;
  } else {
    const auto names = list_device_names();
    const std::string dev = opt.device.empty() ? (names.empty() ? "" : names.front()) : opt.device;
    const bool known_to_perftest = dev.rfind("mlx", 0) == 0;
    req.max_inline = !known_to_perftest || opt.verb == Verb::Read || opt.verb == Verb::Atomic ? 0
                     : opt.verb == Verb::Write                                                ? 220
                                                                                               : 236;
  }
  return req;
}

void describe_test(TestInfo& info, const TestOptions& opt, const VerbsResources& local) {
  info.test = opt.test_name;
  info.role = opt.peer.empty() ? "server" : "client";
  describe_resources(info, local);
  info.transport = transport_name(opt.transport);
  info.exchange = opt.make_oob ? opt.exchange_name : opt.rdma_cm ? "rdma_cm" : "tcp";
  info.tos = opt.tos;
  info.tcp_port = opt.tcp_port;
  info.local_version = opt.announce_version;
  info.start_time = iso_time_now();
  info.warmup = opt.warmup;
  info.peer = opt.peer;
}

// The path MTU (an IBV_MTU_* code): the port's active one, or -m's if the port allows it.
int test_mtu(const TestOptions& opt, const ibv_port_attr& port) {
  if (!opt.mtu_bytes) return port.active_mtu;
  int wanted = 0;
  for (int m = 1; m <= 5; ++m)
    if (mtu_bytes(m) == *opt.mtu_bytes) wanted = m;
  if (!wanted) throw RunError("-m must be one of 256, 512, 1024, 2048, 4096");
  if (wanted > port.max_mtu)
    throw RunError("-m " + std::to_string(*opt.mtu_bytes) + " exceeds the port's maximum MTU " +
                   std::to_string(mtu_bytes(port.max_mtu)));
  return wanted;
}

CycleClock calibrated_clock(TestResult& result) {
  const CycleClock clock = calibrate_cycle_clock();
  TestInfo& info = result.info;
  info.counter = clock.counter;
  info.frequency_source = clock.frequency_source;
  info.cycles_per_usec = clock.cycles_per_usec;
  info.cpuinfo_mhz = clock.cpuinfo_mhz;
  if (clock.cpuinfo_mhz > 0 && std::fabs(clock.cpuinfo_mhz - clock.cycles_per_usec) / clock.cycles_per_usec > 0.01)
    result.warnings.push_back("/proc/cpuinfo says " + std::to_string(clock.cpuinfo_mhz) + " MHz but the " + clock.counter +
                              " counter runs at " + std::to_string(clock.cycles_per_usec) +
                              " MHz; perftest converts with the former, so its figures are off by that ratio here");
  return clock;
}

// The out-of-band exchange: a test's own (make_oob), rdma_cm's with -R, else TCP.
std::unique_ptr<OobTransport> open_exchange(const TestOptions& opt, int timeout_ms) {
  if (opt.make_oob) return opt.make_oob();
  if (opt.rdma_cm)
    return std::make_unique<CmOobChannel>(opt.peer, opt.tcp_port, timeout_ms,
                                          opt.peer.empty() ? opt.before_accept : std::function<void()>{});
  if (opt.peer.empty() && opt.before_accept) opt.before_accept();
  return std::make_unique<OobChannel>(opt.peer.empty() ? OobChannel::accept_one(opt.tcp_port, timeout_ms)
                                                       : OobChannel::connect_to(opt.peer, opt.tcp_port, timeout_ms));
}

// Version, system data, MTU: the fixed preamble of every perftest (>= 5.70) test; all three are
// skipped with --dont_xchg_versions (perftest_communication.c; then the peer needs it too).
oob::PeerVersion open_with_peer(const TestOptions& opt, OobTransport& oob, int& mtu, int timeout_ms, TestResult& result) {
  oob::PeerVersion peer_version;
  if (opt.exchange_versions) {
    peer_version = exchange_preamble(opt, oob, mtu, timeout_ms);
  } else {
    peer_version.text = "not exchanged (--dont_xchg_versions)";
    result.warnings.push_back("--dont_xchg_versions: no version, page size or MTU exchange; the local MTU is used");
  }
  result.info.peer_version = peer_version.text;
  result.info.peer_is_rdmadiag = peer_version.is_rdmadiag;
  result.info.mtu = mtu_bytes(mtu);
  return peer_version;
}

// A UD message is one packet: perftest sweeps (-a) only up to the MTU and refuses -s above it.
void keep_ud_sizes_within_mtu(const TestOptions& opt, std::uint64_t mtu_size, std::vector<std::uint64_t>& sizes) {
  if (opt.transport != Transport::UD) return;
  if (!opt.all_sizes && sizes.front() > mtu_size)
    throw RunError("-c UD: message size " + std::to_string(sizes.front()) + " exceeds the path MTU " +
                   std::to_string(mtu_size) + " (a UD message is a single packet; use -s " + std::to_string(mtu_size) +
                   " or less)");
  std::erase_if(sizes, [&](std::uint64_t size) { return size > mtu_size; });
}

// Two rdmadiag peers compare their options, so a mismatch is an explanation, not a hang.
void check_peer_options(const TestOptions& opt, OobTransport& oob, const VerbsResources& res0, int timeout_ms) {
  const std::vector<std::pair<std::string, std::string>> mine{
      {"test", opt.test_name},
      {"sizes", opt.all_sizes ? "all" : std::to_string(opt.size)},
      {"iterations", std::to_string(opt.iterations)},
      {"connection", transport_name(opt.transport)},
      {"gid", res0.uses_gid() || opt.rdma_cm ? "yes" : "no"},
      {"duration", std::to_string(opt.duration_s)},
      {"qps", std::to_string(opt.qp_count)},
      {"bidirectional", opt.bidirectional ? "yes" : "no"},
      {"report", opt.report_gbits ? "Gb/s" : "MB/s"},
      {"run_infinitely", opt.run_infinitely ? "yes" : "no"},
  };
  const auto got = oob.exchange(oob::encode_options(mine), oob::kOptionsMessageSize, "option check", timeout_ms);
  std::vector<std::string> diffs;
  try {
    diffs = oob::compare_options(mine, oob::parse_options(got));
  } catch (const oob::ProtocolError& e) {
    throw RunError(e.what());
  }
  if (!diffs.empty()) {
    std::string text = "the peer runs a different test or options; both sides need the same ones:";
    for (const auto& d : diffs) text += "\n  " + d;
    throw RunError(text);
  }
}

// What the measuring phases need besides the session.
struct Phases {
  const std::vector<std::uint64_t>& sizes;
  std::uint64_t receive_depth;
  const CycleClock& clock;
  std::function<void()> connect;                 // the QPs to RTS (not with rdma_cm: connected already)
  std::function<void(std::uint64_t)> announce;  // a size starts (opt.on_size)
  int whole_test_ms;                             // the server's wait for a client that runs the whole test
};

// perftest's barriers and measuring loops, in its order for each verb and measure.
void run_latency_phases(Session& s, const Phases& p) {
  const TestOptions& opt = s.opt;
  if (opt.verb == Verb::Send) {
    s.barrier("address exchange");
    p.connect();
    s.barrier("barrier after RTR");
    s.barrier("address echo");
    for (auto size : p.sizes) {
      p.announce(size);
      post_receives(s.res, size, p.receive_depth);
      s.barrier("receives posted (size " + std::to_string(size) + ")");
      s.result.sizes.push_back(run_send_lat(s, size, p.receive_depth, p.clock));
    }
    s.finish_with_done();
    return;
  }
  s.barrier("address exchange");
  s.barrier("address exchange (per QP)");
  p.connect();
  s.barrier("address echo");
  s.barrier("barrier after RTR");
  if (opt.verb == Verb::Write) {
    for (auto size : p.sizes) {
      p.announce(size);
      s.result.sizes.push_back(run_write_lat(s, size, p.clock));
    }
  } else if (s.is_server()) {
    // READ and atomics: the server's part is passive; it waits until the client has finished.
    s.barrier("end of test (waiting for the client)", p.whole_test_ms);
    if (!s.oob.message_based()) {
      s.oob.send({oob::kDoneMessage, sizeof oob::kDoneMessage}, "done message");
      (void)s.oob.drain(500);
    }
  } else {
    for (auto size : p.sizes) {
      p.announce(size);
      s.result.sizes.push_back(run_read_or_atomic_lat(s, size, p.clock, opt.verb == Verb::Atomic));
    }
    s.finish_with_done();
  }
}

void run_bandwidth_phases(Session& s, const Phases& p) {
  if (s.opt.verb == Verb::Send) {
    s.exchange_every_qp_key("address exchange");
    p.connect();
    s.barrier("barrier after RTR");
    s.exchange_every_qp_key("address echo");
    run_send_bw_sizes(s, p.sizes, p.receive_depth, p.clock, p.announce);
    return;
  }
  // write-bw, read-bw
  s.exchange_every_qp_key("address exchange");
  p.connect();
  s.exchange_every_qp_key("address echo");
  s.barrier("barrier after RTR");
  if (s.opt.bidirectional) run_rdma_bw_bidirectional(s, p.sizes, p.clock, p.announce);
  else run_rdma_bw_one_way(s, p.sizes, p.clock, p.announce, p.whole_test_ms);
}

// rdma_cm teardown order: closing while the peer's last SEND has not completed on its side
// fails that SEND (siw flushes it), so the server - which answers last - waits for the client
// to close, and a client facing perftest waits for perftest's server to close. An rdmadiag
// client has seen its own SEND complete before its last receive, and closes at once.
void close_after_test(Session& s, const oob::PeerVersion& peer_version) {
  if (!s.oob.is_client()) s.oob.let_peer_close_first(5000);
  else if (!peer_version.is_rdmadiag) s.oob.let_peer_close_first(3000);
  TestInfo& info = s.result.info;
  if (s.have_remote_key) info.remote_key = s.remote_key;
  if (s.res.qp_count() > 1) {
    for (std::size_t q = 0; q < s.res.qp_count(); ++q) info.local_keys.push_back(s.res.key_message(q));
    info.remote_keys = s.remote_keys;
  }
  s.result.counters_after = read_port_counters(s.res.device_name(), s.res.port());
}

}  // namespace

TestResult run_test(const TestOptions& opt) {
  check_test_options(opt);
  const bool latency = opt.measure == Measure::Latency;
  auto sizes = sizes_to_run(opt);
  const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  if (largest == 0 || largest > (1ull << 31)) throw RunError("-s must be between 1 and 2^31 bytes");

  TestResult result;
  warn_ignored_options(opt, result);
  // perftest's -r (default DEF_RX_SEND); latency tests keep their fixed 512.
  const std::uint64_t receive_depth =
      std::min<std::uint64_t>(opt.iterations, latency ? kMaxReceiveDepth : static_cast<std::uint64_t>(opt.rx_depth));
  const ResourceRequest req = resource_request(opt, largest, receive_depth);
  // No device / bad port / bad GID: throws before anything waits. With -R this only checks the
  // device and port (and gives the MTU to announce); rdma_cm picks the device of the test's QP.
  ResourceRequest first_request = req;
  first_request.probe_only = opt.rdma_cm;
  VerbsResources local(first_request);
  check_report_counters(opt, local.device_name(), local.port());
  // With -R: the test's rdma_cm connection (declared before its resources, which go first).
  std::vector<CmConnection> test_connections;
  std::optional<VerbsResources> cm_resources;
  VerbsResources* resources = &local;

  TestInfo& info = result.info;
  describe_test(info, opt, local);
  const VerbsResources& res0 = local;
  int mtu = test_mtu(opt, res0.port_attr());
  const CycleClock clock = calibrated_clock(result);
  const int timeout_ms = opt.timeout_s * 1000;
  const std::unique_ptr<OobTransport> oob_transport = open_exchange(opt, timeout_ms);
  OobTransport& oob = *oob_transport;
  if (opt.peer.empty()) info.peer = oob.peer();
  const oob::PeerVersion peer_version = open_with_peer(opt, oob, mtu, timeout_ms, result);
  keep_ud_sizes_within_mtu(opt, static_cast<std::uint64_t>(info.mtu), sizes);
  // Upstream perftest >= 6.28 negotiates parameters when both sides announce >= 6.28 (first, so
  // that two rdmadiag peers announcing >= 6.28 exercise it and report its differences).
  if (peer_version.number >= oob::kNegotiationVersion && std::atof(opt.announce_version.c_str()) >= oob::kNegotiationVersion) {
    negotiate_parameters(opt, oob, res0, timeout_ms);
    info.negotiated = true;
  }
  if (peer_version.is_rdmadiag) check_peer_options(opt, oob, res0, timeout_ms);

  const bool cm_tail_markers = std::atof(opt.announce_version.c_str()) >= oob::kCmTailMarkersVersion;
  if (opt.rdma_cm) {
    resources = &connect_test_qp_with_rdma_cm(opt, req, oob, cm_tail_markers, timeout_ms, test_connections, cm_resources);
    describe_resources(info, *resources);
    if (!opt.device.empty() && opt.device != resources->device_name())
      result.warnings.push_back("-d " + opt.device + " was given, but rdma_cm reaches the peer through " +
                                resources->device_name() + " (the device behind the route to its address); it was used");
    if (const int path_mtu = resources->qp_path_mtu()) mtu = path_mtu;
    info.mtu = mtu_bytes(mtu);
  }
  VerbsResources& res = *resources;
  Session s{opt, res, oob, result, timeout_ms, res.key_message(), {}, false, 0, cm_tail_markers, {}};
  result.counters_before = read_port_counters(res.device_name(), res.port());
  info.local_key = s.my_key;
  std::size_t sizes_started = 0;
  const Phases phases{
      sizes, receive_depth, clock,
      [&] {
        if (res.connected_by_rdma_cm()) return;
        res.set_flow_label(opt.flow_label);
        const int traffic_class = opt.tclass >= 0 ? opt.tclass : opt.tos;
        for (std::size_t q = 0; q < res.qp_count(); ++q)
          res.connect(s.remote_key_of(q), mtu, traffic_class, opt.qp_timeout, opt.sl, q);
      },
      [&](std::uint64_t size) {
        if (opt.on_size) opt.on_size(size, ++sizes_started, sizes.size());
      },
      timeout_ms * static_cast<int>(std::min<std::size_t>(sizes.size(), 30)) + std::max(opt.duration_s, 0) * 1000};
  try {
    if (latency) run_latency_phases(s, phases);
    else run_bandwidth_phases(s, phases);
  } catch (const RunError& e) {
    result.errors.push_back(e.what());
  }
  close_after_test(s, peer_version);
  return result;
}

}  // namespace rdmadiag::perftest
