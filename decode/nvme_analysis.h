// Per-command NVMe over Fabrics analysis on RDMA (NVMe-oF 1.1 sections 2-3, 7.3;
// NVMe Base 1.4 section 4): a stateful pass over the capsules of
// nvme_rdma.h, keyed by flow with bounded memory.
//
// Queue pairs are NVMe's when an rdma_cm REQ/REP for the NVMe-oF service (port
// 4420) was seen for them, or (assume_all) whenever a capsule-shaped RC SEND
// reaches them. A queue pair learns its NVMe queue ID from the Connect
// command sent on it (Connect is the first command of every queue); the
// host's queue pair learns it from the first completion that pairs with one of
// that queue's commands. An NVMe queue is (host address, controller address,
// QID); a Connect for a queue that exists (a reconnect) starts it afresh.
// Command and completion pair by (queue, CID): the CQE carries SQID and CID.
// Latency is submit -> completion at the capture point.
//
// Bounds: at most kMaxQueuePairs queue pairs and kMaxQueues queues live (the
// least recently active are retired past that), at most kMaxOutstanding
// commands outstanding per queue (NVMe-oF queues hold at most 65535; Linux
// uses up to 1024); aggregates are fixed-size arrays and histograms; the
// slowest kSlowest commands and the first kMaxListed unanswered ones are kept.
//
// NVMe over iWARP (add_iwarp): the TCP connections to or from the NVMe-oF
// port (or, with assume_all, any carrying capsule-shaped Sends) are queue
// pairs, one per direction; the iWARP pass (iwarp_analysis.h) hands over the
// DDP segments, and data is matched by STag and tagged offset (nvme_data.h).
//
// Mid-stream captures (no Connect seen): commands on a queue pair without a
// QID are decoded and counted (queue kind unknown: opcodes are not named, an
// admin 02h and an I/O Read look alike) but not paired; their completions count
// as unmatched. The first completion on such a queue pair names its queue
// (the CQE's SQID): the host's queue pair, and the controller's when the
// connection's two directions are known (iWARP's TCP connection, or rdma_cm),
// are bound to it from then on, so later commands pair; the queue says its
// Connect was not seen (queue size and keep-alive unknown). On RoCE without
// rdma_cm the controller's queue pair is the one, between the same two
// addresses, whose latest unbound commands hold the completion's CID, when
// exactly one does (tried on a queue pair's first kPeerTries completions).
// The queue pairs holding a CID are listed by (controller, host, CID), so a
// try looks at no more than kCidHolders of them, however many queue pairs
// there are; a CID held by more than kCidHolders unbound queue pairs between
// the same two addresses at once is not used to pair (it could not be told).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "decode/analyzer.h"
#include "decode/flow_slots.h"
#include "decode/nvme_capsule.h"
#include "decode/nvme_data.h"
#include "decode/nvme_rdma.h"
#include "decode/nvme_timeline.h"
#include "decode/packet.h"

namespace rdmadiag::decode {

inline constexpr std::uint16_t kNvmeUnknownQid = 0xFFFF;

using IpAddress = std::array<std::uint8_t, 16>;  // IPv4 in the first 4 bytes

// `point`: the capture point that saw it (DecodedPacket::capture_point): a queue
// seen at two points is two queues, each analysed as its point saw it.
struct NvmeQueueKey {
  IpAddress host{}, controller{};
  std::uint16_t qid = kNvmeUnknownQid;
  std::uint16_t point = 0;
  bool operator==(const NvmeQueueKey&) const = default;
};

// One direction of a queue pair: the receiver's address and QPN (RoCE/IB); for
// iWARP one direction of a TCP connection (tcp set; qpn: source port << 16 |
// destination port, and the source address).
struct NvmeQpKey {
  IpAddress dst{};
  std::uint32_t qpn = 0;
  bool tcp = false;
  IpAddress src{};
  std::uint16_t point = 0;  // DecodedPacket::capture_point
  bool operator==(const NvmeQpKey&) const = default;
};

// Latency histogram: 4 buckets per octave from 1 us; percentiles are the upper
// bound of the bucket that holds them (at most 19% above the true value).
struct LatencyHistogram {
  static constexpr std::size_t kBuckets = 128;
  std::array<std::uint64_t, kBuckets> counts{};
  std::uint64_t n = 0;
  double sum_us = 0, min_us = 0, max_us = 0;
  void add(double us);
  double percentile_upper_us(double p) const;  // p in [0, 1]; 0 when empty
  static double bucket_upper_us(std::size_t i);
};

// Kinds of transport event a command's window can hold (a packet may be several).
// tcp_hole (iWARP): a hole in the connection's byte stream closed at that frame
// (filled by a resend or reordering, or given up); retransmission there: a
// segment of bytes seen before.
enum class NvmeCause : std::uint8_t { psn_gap, retransmission, duplicate, out_of_order, cnp, nak, rnr_nak, tcp_hole, count_ };
inline constexpr std::size_t kNvmeCauseKinds = static_cast<std::size_t>(NvmeCause::count_);
std::string_view nvme_cause_name(NvmeCause c);

// Per opcode (and queue kind) over the whole capture.
struct NvmeOpcodeStats {
  std::uint64_t commands = 0;
  std::uint64_t completed = 0;
  std::uint64_t errors = 0;          // completed with a status other than success
  std::uint64_t bytes = 0;           // data length of the completed commands (SGL length)
  LatencyHistogram latency;
};

// A command that completed (or never did): what the report lists.
struct NvmeCommandResult {
  NvmeQueueKey queue;
  std::uint64_t command_frame = 0;
  std::uint64_t response_frame = 0;  // 0: no completion in the capture
  std::int64_t submit_ns = 0;
  double latency_us = -1;
  std::uint16_t cid = 0;
  std::uint8_t opcode = 0;
  std::uint8_t fctype = 0;           // fabrics only
  bool fabrics = false;
  NvmeQueueKind kind = NvmeQueueKind::unknown;
  std::uint32_t nsid = 0;
  std::uint64_t slba = 0;
  std::uint32_t blocks = 0;          // 0 when the opcode has no LBA range
  std::uint32_t data_len = 0;        // SGL length
  std::uint64_t sgl_address = 0;     // keyed SGL: host memory the data moves to or from
  std::uint32_t sgl_key = 0;
  bool sgl_invalidate = false;       // the SGL asks the controller to invalidate the key
  // The RDMA READ/WRITE packets matched to the keyed SGL (nvme_data.h), resends
  // included: first and last frame, and how far into the SGL they reached.
  std::uint64_t data_first_frame = 0, data_last_frame = 0;
  std::int64_t data_first_ns = 0, data_last_ns = 0;
  std::uint64_t data_bytes = 0;      // highest RETH address + length - SGL address
  std::uint16_t data_operations = 0; // READ requests / WRITEs matched (resent ones too)
  bool remote_invalidate = false;    // completed by a SEND with Invalidate
  std::uint32_t invalidated_key = 0;
  std::uint16_t status = 0;          // CQE status field (bits 15:1 of bytes 14-15)
  std::uint8_t sct = 0, sc = 0;
  // Transport events (PSN gap, retransmission, duplicate, out of order, NAK,
  // RNR NAK, CNP; iWARP: TCP hole, retransmission) on the queue's queue pairs
  // (iWARP: its TCP connection) between submit and completion.
  std::uint32_t transport_events = 0;
  std::uint64_t first_event_frame = 0;
  std::array<std::uint32_t, kNvmeCauseKinds> causes{};  // packets per kind (by NvmeCause)
  // While it was outstanding, bytes its completion could travel in were not
  // captured (a response capsule cut by the snap length; iWARP: a segment from
  // the controller cut short): left unanswered, its completion may be there.
  bool completion_maybe_uncaptured = false;
  std::string_view name() const;
  std::string_view status_name() const;
  // First to last data packet, in microseconds; -1 when no data packet was matched.
  double data_transfer_us() const;
};

// What one capsule was (for --capsules and the cross-check with tshark).
struct NvmeCapsuleRecord {
  std::uint64_t frame = 0;
  bool command = false;
  NvmeQueueKey queue;                // qid kNvmeUnknownQid when not bound
  NvmeCommand cmd;                   // command
  NvmeCompletion cqe;                // response
  std::uint64_t paired_frame = 0;    // response: its command's frame (0: unmatched)
  double latency_us = -1;
};

struct NvmeQueueStats {
  NvmeQueueKey key;
  std::uint64_t first_frame = 0;
  bool connect_seen = false;         // false: QID learnt from a completion (mid-stream), sqsize/kato unknown
  std::uint16_t sqsize = 0;          // from Connect (0's based)
  std::uint32_t kato_ms = 0;
  std::string subnqn, hostnqn;       // from Connect's data (in the capsule, or read by the controller)
  std::uint64_t commands = 0, completed = 0, errors = 0, unanswered = 0;
  std::uint64_t io_completed = 0;    // of completed: NVMe I/O commands (not Fabrics, not admin): what IOPS counts
  std::uint64_t read_bytes = 0, write_bytes = 0;
  std::uint32_t max_outstanding = 0;
  std::uint64_t transport_events = 0;
  std::array<std::uint64_t, kNvmeCauseKinds> causes{};  // packets per kind of event
  std::uint64_t outstanding_dropped = 0;  // commands not tracked: kMaxOutstanding were outstanding
  std::int64_t first_ns = 0, last_ns = 0;
  NvmeTimeline timeline;             // outstanding commands, completions and bytes over time
};

// Data sizes of I/O reads and writes in classes: class 0 up to 512 bytes, then
// one per power of two, the last from 1 MiB up.
inline constexpr std::size_t kNvmeSizeClasses = 13;
std::size_t nvme_size_class(std::uint32_t bytes);
std::uint64_t nvme_size_class_upper(std::size_t size_class);  // bytes; the last class: 0 (no bound)

struct NvmeTotals {
  std::uint64_t capsules = 0, commands = 0;
  std::uint64_t responses = 0;              // response capsules, copies (resent_responses) counted once
  std::uint64_t completed = 0, errors = 0, unanswered = 0;
  std::uint64_t unanswered_maybe_uncaptured = 0;  // of the unanswered: completion_maybe_uncaptured
  std::uint64_t unmatched_responses = 0;    // a CQE with no outstanding command for its (queue, CID)
  std::uint64_t unbound_commands = 0;       // on a queue pair whose QID is unknown (no Connect seen)
  std::uint64_t truncated_capsules = 0, malformed_capsules = 0;
  std::uint64_t resent_commands = 0;        // the same command (CID, opcode) again while outstanding: a transport resend
  std::uint64_t resent_responses = 0;       // a completion again, in a frame the transport analysis calls a resend
  std::uint64_t duplicate_cids = 0;         // a CID reused for another command while still outstanding
  std::uint64_t queue_pairs = 0;            // NVMe queue pairs seen
  std::uint64_t iwarp_segments = 0;         // TCP segments with data to or from the NVMe-oF port (iWARP)
  std::uint64_t data_packets = 0;           // RDMA READ/WRITE packets matched to a command
  std::uint64_t unmatched_data_packets = 0; // on an NVMe queue, naming no outstanding command's keyed SGL
  std::uint64_t remote_invalidates = 0;     // completions by SEND with Invalidate
  // A SEND with Invalidate naming another key than its command's keyed SGL, or
  // for a command whose keyed SGL did not ask for it (subtype Fh; NVMe-oF 1.1 section 7.3).
  std::uint64_t invalidate_mismatches = 0;
  bool queue_cap_reached = false;
};

class NvmeAnalyzer {
 public:
  static constexpr std::size_t kMaxQueuePairs = 8192;
  static constexpr std::size_t kMaxQueues = 4096;
  static constexpr std::size_t kMaxOutstanding = 4096;
  static constexpr std::size_t kSlowest = 10;
  static constexpr std::size_t kMaxListed = 20;
  static constexpr std::uint8_t kPeerTries = 16;
  static constexpr std::size_t kCidHolders = 8;
  // Times of the latest frames: an iWARP unit reported after a TCP hole is
  // timed by the frame that carried it (older ones: by the reporting frame).
  static constexpr std::size_t kFrameTimes = 4096;

  NvmeAnalyzer();
  ~NvmeAnalyzer();
  NvmeAnalyzer(const NvmeAnalyzer&) = delete;
  NvmeAnalyzer& operator=(const NvmeAnalyzer&) = delete;

  // Treat every capsule-shaped RC SEND as NVMe (captures without the rdma_cm exchange).
  void set_assume_all(bool on) { assume_all_ = on; }
  void set_port(std::uint16_t port) { port_ = port; }
  // Called for every capsule (in frame order); for the cross-check and --capsules.
  void set_capsule_sink(std::function<void(const NvmeCapsuleRecord&)> f) { capsule_sink_ = std::move(f); }
  // Called for every command that completed, at its completion (for --commands).
  void set_command_sink(std::function<void(const NvmeCommandResult&)> f) { command_sink_ = std::move(f); }

  // One decoded frame; `analysis` is the transport analysis' view of it (or
  // null; over iWARP without it nothing is decoded).
  void add(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, const PacketAnalysis* analysis);
  void finish();

  const NvmeTotals& totals() const { return totals_; }
  const std::vector<NvmeQueueStats>& queues() const { return finished_queues_; }  // after finish(), by first frame
  // Index: kind (0 unknown, 1 admin, 2 io, 3 fabrics) * 256 + opcode (fabrics: fctype).
  const std::array<NvmeOpcodeStats, 4 * 256>& by_opcode() const { return by_opcode_; }
  // I/O Read (index 0) and Write (1) per data size class: index op * kNvmeSizeClasses + class.
  const std::array<NvmeOpcodeStats, 2 * kNvmeSizeClasses>& by_size() const { return by_size_; }
  const std::vector<NvmeCommandResult>& slowest() const { return slowest_; }  // slowest first, after finish()
  const std::vector<NvmeCommandResult>& unanswered() const { return unanswered_; }
  static std::size_t opcode_index(const NvmeCommandResult& r);
  // Queue pairs looked at to pair mid-stream queue pairs (find_peer); the
  // analysis tests check it does not grow with the number of queue pairs.
  std::uint64_t peer_probes() const { return peer_probes_; }

  struct QueuePair;
  struct Queue;
  // Where a capsule travelled: the queue pair it arrived on, sender and receiver.
  struct Hop {
    NvmeQpKey qp;
    IpAddress src, dst;
    // RoCE/IB: the capsule's first PSN; iWARP: the TCP sequence number of its
    // FPDU (a resent copy keeps its original's either way); -1 unknown.
    std::int64_t psn = -1;
  };

 private:
  void add_cm(const DecodedPacket& p);
  void add_iwarp(const DecodedPacket& p, const IwarpFrame& units, std::uint64_t frame, std::int64_t ts_ns);
  void add_capsule(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns, bool resent);
  void add_command(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns);
  void add_response(const Hop& h, const NvmeRdmaPayload& c, std::uint64_t frame, std::int64_t ts_ns, bool resent);
  void add_transport_event(const NvmeQpKey& k, std::uint64_t frame, std::int64_t ts_ns, std::uint8_t kinds);
  void add_data(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns);
  void add_iwarp_data(const Hop& h, const DdpSegment& seg, Bytes read_response_head, std::uint64_t frame,
                      std::int64_t ts_ns);
  Queue* data_queue(const NvmeQpKey& k, std::uint64_t frame, std::int64_t ts_ns);
  void note_uncaptured(const NvmeQpKey& host, std::uint64_t frame, std::int64_t ts_ns);
  NvmeCommandResult* credit_data(Queue& q, const std::optional<NvmeDataPacket>& d, std::uint64_t frame,
                                 std::int64_t ts_ns);
  void mark_connection(const NvmeQpKey& host, const NvmeQpKey& controller);
  std::int64_t time_of(std::uint64_t frame, std::int64_t fallback) const;
  void note_invalidate(NvmeCommandResult& r, std::uint32_t key);
  static void note_connect_data(Bytes payload, NvmeQueueStats& stats);
  void bind_connect(QueuePair& qp, const NvmeQueueKey& key, std::uint64_t frame);
  void bind_both(QueuePair& qp, const NvmeQueueKey& key, std::uint64_t frame);
  void find_peer(QueuePair& host, const Hop& h, std::uint16_t cid, std::uint64_t frame);
  // Mid-stream pairing on RoCE: the unbound controller-side queue pairs whose
  // latest commands hold a CID, by (controller address, host address, CID);
  // checked when read, since a listed queue pair may since have been bound,
  // paired, retired, or have seen the CID leave its latest ones.
  struct CidKey {
    IpAddress controller{}, host{};
    std::uint16_t cid = 0;
    std::uint16_t point = 0;
    bool operator==(const CidKey&) const = default;
  };
  struct CidKeyHash {
    std::size_t operator()(const CidKey& k) const;
  };
  struct CidHolders {
    std::array<std::uint32_t, kCidHolders> slots{};
    std::uint8_t n = 0;
    bool crowded = false;  // more than kCidHolders at once: never used to pair
  };
  void note_unbound_command(std::uint32_t slot, QueuePair& qp, std::uint16_t cid, const IpAddress& from);
  void list_holder(std::uint32_t slot, const QueuePair& qp, std::uint16_t cid);
  bool holds(std::uint32_t slot, const CidKey& k) const;
  void drop_stale(const CidKey& k, CidHolders& c) const;
  std::uint32_t sole_holder(const CidKey& k);
  QueuePair* queue_pair(const NvmeQpKey& k, bool create, std::int64_t ts_ns);
  Queue* queue(const NvmeQueueKey& k, bool create, std::uint64_t frame, std::int64_t ts_ns);
  void complete(Queue& q, NvmeCommandResult& r, std::int64_t ts_ns);
  void keep_slowest(const NvmeCommandResult& r);
  void leave_unanswered(Queue& q, const NvmeCommandResult& r);
  void retire_queue(Queue& q);
  void restart_queue(const NvmeQueueKey& key);

  struct QpKeyHash {
    std::size_t operator()(const NvmeQpKey& k) const;
  };
  struct QueueKeyHash {
    std::size_t operator()(const NvmeQueueKey& k) const;
  };

  bool assume_all_ = false;
  std::uint16_t port_ = kNvmeRdmaPort;
  std::function<void(const NvmeCapsuleRecord&)> capsule_sink_;
  std::function<void(const NvmeCommandResult&)> command_sink_;
  FlowSlots<NvmeQpKey, QpKeyHash, QueuePair> qps_;
  FlowSlots<NvmeQueueKey, QueueKeyHash, Queue> queues_;
  std::unordered_map<CidKey, CidHolders, CidKeyHash> cid_holders_;
  std::size_t cid_purge_at_ = 0;  // list_holder purges past max(this, 8 per queue pair + 4096)
  mutable std::uint64_t peer_probes_ = 0;
  // rdma_cm REQs for NVMe waiting for their REP: local comm ID -> (host address, host QPN).
  std::unordered_map<std::uint64_t, NvmeQpKey> pending_req_;  // by capture point << 32 | REQ's local comm ID
  NvmeTotals totals_;
  std::array<std::pair<std::uint64_t, std::int64_t>, kFrameTimes> frame_times_{};
  std::array<NvmeOpcodeStats, 4 * 256> by_opcode_{};
  std::array<NvmeOpcodeStats, 2 * kNvmeSizeClasses> by_size_{};
  std::vector<NvmeCommandResult> slowest_;   // a min-heap on latency while running
  std::vector<NvmeCommandResult> unanswered_;
  std::vector<NvmeQueueStats> finished_queues_;
};

}  // namespace rdmadiag::decode
