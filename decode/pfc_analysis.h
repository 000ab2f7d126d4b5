// Pause analysis of lossless Ethernet (IEEE 802.1Qbb clause 36 PFC; IEEE 802.3
// Annex 31B PAUSE, Annex 31D PFC frame format): a stateful pass over the MAC
// Control frames of a capture, keyed by the sender of the pause (its source
// MAC address) and the priority it speaks for.
//
// A frame with pause_time/time[n] = q > 0 tells the link partner to stop
// sending on priority n for q x 512 bit times from its reception; a new frame
// restarts that timer (Annex 31B: the new value replaces the old), and q = 0
// resumes at once (XON). So one sender's pause of one priority is an interval
// that refreshes extend and XON or expiry end: a continuous pause. PAUSE
// (802.3x) speaks for every priority. Quanta become time only with the link
// speed (--link-speed); without it the pass counts frames and quanta and says
// time is unknown, never guesses.
//
// RoCE traffic on a paused priority: each RoCE packet's priority is its VLAN
// PCP when tagged, else its IP DSCP through a table (default DSCP / 8, the
// precedence bits, which most RoCE NICs use in DSCP-trust mode: DSCP 26 ->
// priority 3). A packet counts as sent while paused when some tracked sender
// other than the packet's own Ethernet source had that priority paused at the
// packet's capture time: what the partner of a paused link still transmits.
// The distinct queue pairs (destination address and QP) of those packets are
// counted too, up to kMaxPausedQps per priority.
//
// The pass is a pure step (classify) and an update (apply) reporting storms
// through a narrow sink, per (sender, priority). Memory is bounded: at most
// kMaxSenders senders are tracked (frames from further senders are counted, not
// tracked; a small table of its own, until the generic flow table replaces it)
// and at most kMaxPausedQps queue pairs per priority.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <unordered_set>
#include <vector>

#include "decode/anomaly.h"
#include "decode/mac_control.h"
#include "decode/packet.h"
#include "decode/pause_stalls.h"

namespace rdmadiag::decode {

struct PfcOptions {
  std::uint64_t link_bps = 0;        // bits per second; 0: unknown (no times)
  double storm_seconds = 0.1;        // a continuous pause longer than this is a storm
  std::array<std::uint8_t, 64> dscp_priority = default_dscp_priority();
  static constexpr std::array<std::uint8_t, 64> default_dscp_priority() {
    std::array<std::uint8_t, 64> m{};
    for (std::size_t d = 0; d < m.size(); ++d) m[d] = static_cast<std::uint8_t>(d >> 3);
    return m;
  }
  // Nanoseconds that `quanta` pause quanta last at the link speed; < 0 when unknown.
  double quanta_ns(std::uint32_t quanta) const {
    return link_bps ? static_cast<double>(quanta) * kBitTimesPerQuantum * 1e9 / static_cast<double>(link_bps) : -1.0;
  }
};

// Times are integer nanoseconds since the epoch, as the capture has them (a
// double of seconds since the epoch resolves only ~240 ns, 47 quanta at 100 Gb/s),
// and pause lengths are nanoseconds as doubles (a quantum is 5.12 ns at 100 Gb/s).

// One sender's pause of one priority, as the receiver of its frames sees it.
struct PauseState {
  bool paused = false;
  std::int64_t start_ns = 0;        // when the continuous pause began
  std::int64_t timer_ns = 0;        // when the last frame (re)started the timer
  double timer_length_ns = 0;       // for how long: it expires at timer_ns + timer_length_ns
  std::uint64_t start_frame = 0;
  std::uint32_t frames = 0;         // frames in the continuous pause (the XOFFs and refreshes)
  // Whether the pause runs at `ts_ns` (a time at or after timer_ns).
  bool runs_at(std::int64_t ts_ns) const {
    return paused && ts_ns >= start_ns && static_cast<double>(ts_ns - timer_ns) <= timer_length_ns;
  }
  // Its length if it ends by expiring.
  double expired_length_ns() const { return static_cast<double>(timer_ns - start_ns) + timer_length_ns; }
};

// What one frame says about one priority.
struct PauseFrame {
  std::uint64_t frame = 0;
  std::int64_t ts_ns = 0;
  std::uint16_t quanta = 0;
  double length_ns = -1;            // quanta as time; < 0: link speed unknown
};

enum class PauseStep : std::uint8_t {
  counted,      // no link speed: frames and quanta only
  start,        // XOFF while not paused
  refresh,      // XOFF while paused: the timer restarts
  resume,       // XON while paused: the pause ends now
  idle_xon,     // XON while not paused
};

struct PauseDecision {
  PauseStep step = PauseStep::counted;
  bool expired = false;             // the open pause expired before this frame (closed at its `until` first)
};

// Per sender and priority: what the report shows.
struct PriorityPauses {
  std::uint64_t frames = 0;         // frames that speak for this priority
  std::uint64_t xon = 0;            // of which quanta 0
  std::uint64_t quanta_sum = 0;
  std::uint16_t quanta_max = 0;
  std::uint64_t first_frame = 0, last_frame = 0;
  // With a link speed (else 0):
  std::uint64_t pauses = 0;         // continuous pauses (refreshes merged)
  double paused_seconds = 0;        // their total length
  double longest_seconds = 0;
  std::uint64_t longest_frame = 0;  // where the longest began
  std::uint64_t storms = 0;         // continuous pauses longer than the storm threshold
};

// A continuous pause that ended, handed to the sink.
struct PauseEnded {
  std::size_t priority = 0;
  std::uint64_t start_frame = 0;
  std::int64_t start_ns = 0;
  double length_ns = 0;
  std::uint32_t frames = 0;
};

class PauseSink {
 public:
  virtual ~PauseSink() = default;
  virtual void pause_ended(const PauseEnded& p, bool storm) = 0;
};

PauseDecision classify(const PauseState& s, const PauseFrame& f);
void apply(PauseState& s, PriorityPauses& stats, const PauseDecision& d, const PauseFrame& f, std::size_t priority,
           const PfcOptions& opts, PauseSink& sink);
// End of input: an open pause ends when it expires (the capture's end does not end it).
void close_open(PauseState& s, PriorityPauses& stats, std::size_t priority, const PfcOptions& opts, PauseSink& sink);

struct PfcSender {
  std::array<std::uint8_t, 6> mac{};
  std::uint16_t point = 0;          // the capture point that saw its frames (DecodedPacket::capture_point)
  std::uint64_t pause_frames = 0;   // 802.3x PAUSE
  std::uint64_t pfc_frames = 0;     // 802.1Qbb PFC
  std::array<PauseState, kPriorities> state{};
  std::array<PriorityPauses, kPriorities> priorities{};
};

// RoCE packets per priority (summed over the shards of analyze -j).
struct RocePriorityCounts {
  std::array<std::uint64_t, kPriorities> packets{};
  std::array<std::uint64_t, kPriorities> while_paused{};
  std::uint64_t unmapped = 0;       // no VLAN tag and no IP header (native IB has no priority here)
};

// The distinct queue pairs sent to while their priority was paused, per
// priority: a set each, at most kMaxPausedQps (then `capped`: at least that many).
struct PausedQueuePairs {
  static constexpr std::size_t kMaxPausedQps = 4096;
  std::array<std::unordered_set<std::uint64_t>, kPriorities> keys;
  std::array<bool, kPriorities> capped{};
  void add(std::size_t priority, std::uint64_t key);
  // The union with another shard's sets (the result of one analyzer fed both).
  void merge(const PausedQueuePairs& o);
};

// One continuous pause, as listed for the report's timeline.
struct PauseInterval {
  std::array<std::uint8_t, 6> mac{};
  std::uint8_t priority = 0;
  std::uint64_t start_frame = 0;
  std::int64_t start_ns = 0;
  double length_ns = 0;
};

class PfcAnalyzer {
 public:
  static constexpr std::size_t kMaxSenders = 256;
  static constexpr std::size_t kMaxIntervals = 4096;  // listed pauses (the timeline); then only counted

  explicit PfcAnalyzer(AnomalyLog& log) : log_(log) {}
  void set_options(const PfcOptions& o) { opts_ = o; }
  const PfcOptions& options() const { return opts_; }
  // analyze -j: every shard keeps the pause state (it sees every MAC Control
  // frame) but only one reports storms to its log.
  void set_reports_anomalies(bool on) { reports_anomalies_ = on; }

  // A MAC Control frame (p.mac_control and p.eth set).
  void add_mac_control(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns);
  // A RoCE packet (v1 or v2): counted on its priority, and as sent while paused.
  void add_roce(const DecodedPacket& p, std::int64_t ts_ns, std::uint64_t frame = 0);
  void finish();

  const std::vector<PfcSender>& senders() const { return senders_; }
  const RocePriorityCounts& roce() const { return roce_; }
  const PausedQueuePairs& paused_qps() const { return paused_qps_; }
  // The first kMaxIntervals continuous pauses, in the order they ended; how many more ended.
  const std::vector<PauseInterval>& intervals() const { return intervals_; }
  // Queue pairs stalled by pauses (pause_stalls.h), per priority; with a link speed only.
  const PauseStalls& stalls() const { return stalls_; }
  std::uint64_t intervals_not_listed() const { return intervals_not_listed_; }
  std::uint64_t mac_control_frames() const { return mac_control_frames_; }
  std::uint64_t other_opcode_frames() const { return other_opcode_frames_; }
  std::uint64_t untracked_frames() const { return untracked_frames_; }
  bool any() const { return mac_control_frames_ != 0; }

  // The results of the shards of analyze -j: the pause results of any shard
  // (each saw every MAC Control frame; the first is taken), the RoCE counts
  // summed, the paused queue pairs united.
  void merge(std::span<const PfcAnalyzer* const> shards);

  // The priority of a RoCE packet, or -1 when it has none to map.
  int priority_of(const DecodedPacket& p) const;

 private:
  PfcSender* sender(const std::array<std::uint8_t, 6>& mac, std::uint16_t point);
  // Pauses seen at capture point `point` only: another point's link has its own.
  bool paused_at(std::size_t priority, std::int64_t ts_ns, const std::array<std::uint8_t, 6>* except,
                 std::uint16_t point) const;
  class StormLog;

  AnomalyLog& log_;
  PfcOptions opts_;
  bool reports_anomalies_ = true;
  std::vector<PfcSender> senders_;
  RocePriorityCounts roce_;
  PausedQueuePairs paused_qps_;
  std::vector<PauseInterval> intervals_;
  PauseStalls stalls_;
  void check_stall(const DecodedPacket& p, std::size_t priority, std::int64_t ts_ns, std::uint64_t frame);
  std::uint64_t intervals_not_listed_ = 0;
  std::array<std::int64_t, kPriorities> horizon_ns_{};  // no pause of the priority lasts past this (a fast "not paused")
  std::uint64_t mac_control_frames_ = 0, other_opcode_frames_ = 0;
  std::uint64_t untracked_frames_ = 0;  // from senders past kMaxSenders
  bool finished_ = false;
};

}  // namespace rdmadiag::decode
