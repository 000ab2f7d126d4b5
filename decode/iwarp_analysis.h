// iWARP analysis (RFC 5044 MPA, RFC 5041 DDP, RFC 5040 RDMAP, RFC 6581, RFC
// 7306): a stateful pass over TCP segments. Per connection and direction it
// reassembles the TCP stream (tcp_reassembly.h), follows the MPA negotiation,
// cuts the stream into FPDUs (removing markers, checking CRC32c), decodes DDP
// and RDMAP, and checks DDP sequencing (MSN per queue, MO within a message,
// tagged offsets against the RDMA Read Request) and matches Read Requests with
// their Responses. Without the negotiation (a capture that starts mid-connection,
// or after a gap it cannot fill) it finds FPDU boundaries again from the bytes
// (plausible ULPDU length + DDP/RDMAP header + CRC32c, or the next header; or
// the markers) and says so. Memory: bounded connections (the generic flow
// table, flow_slots.h: idle connections that carry no MPA are retired, and past
// kMaxConnections the least recently active), bounded bytes per stream.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "decode/anomaly.h"
#include "decode/ddp_rdmap.h"
#include "decode/exact_sum.h"
#include "decode/flow_slots.h"
#include "decode/mpa.h"
#include "decode/packet.h"
#include "decode/tcp_reassembly.h"

namespace rdmadiag::decode {

enum class MpaCrcStatus : std::uint8_t { ok, bad, unverifiable, not_negotiated };
std::string_view to_string(MpaCrcStatus s);

// One MPA unit that ended in a frame: an FPDU, or a Request/Reply frame.
struct IwarpPdu {
  enum class Kind : std::uint8_t { fpdu, mpa_request, mpa_reply };
  Kind kind = Kind::fpdu;
  std::uint32_t flow = 0;          // index into IwarpAnalyzer::flows()
  std::uint64_t end_frame = 0;     // frame holding its last byte (earlier than the reporting frame after a refill)
  std::uint32_t seq = 0;           // TCP sequence number of its first byte
  bool resync = false;             // framing found without the MPA negotiation
  // Request / Reply
  MpaNegotiation negotiation;
  // FPDU
  std::uint16_t ulpdu_len = 0;
  std::uint8_t pad = 0;
  std::uint8_t markers = 0;        // markers removed from it
  std::uint32_t crc = 0;           // the CRC field, as the integer CRC32c gives (wire bytes are little-endian)
  std::uint32_t crc_computed = 0;
  MpaCrcStatus crc_status = MpaCrcStatus::not_negotiated;
  bool header_decoded = false;     // the DDP/RDMAP headers were captured
  DdpSegment seg;
  // The first bytes of its ULP payload (after the DDP/RDMAP headers), for an
  // upper layer that reads its own header from a Send: NVMe-oF's 64-byte
  // command capsule (nvme_analysis.h). Empty when not captured.
  static constexpr std::size_t kPayloadHead = 64;
  std::array<std::uint8_t, kPayloadHead> payload_head{};
  std::uint8_t payload_head_len = 0;
  Bytes payload_head_bytes() const { return Bytes(payload_head.data(), payload_head_len); }
  // analysis
  std::uint64_t request_frame = 0; // Read Response (last segment) / Atomic Response: the request
  double latency_us = -1;
};

// The MPA units that ended in one frame: fixed capacity, no heap per packet.
struct IwarpFrame {
  static constexpr std::size_t kCapacity = 32;  // a 1448-byte segment holds up to 27 RDMA Read Requests
  std::array<IwarpPdu, kCapacity> items{};
  std::uint8_t size = 0;
  std::uint32_t overflow = 0;   // more units ended in this frame than kCapacity
  // TCP events at this frame, on the connection it belongs to (what a PSN gap or
  // a resend is on RoCE): holes in a byte stream closed here (filled by a resend
  // or reordering, or given up) and segments carrying only bytes seen before.
  std::uint8_t tcp_holes = 0;
  std::uint8_t tcp_retransmissions = 0;
  // The first bytes of the payload of the first segment in this frame that is an
  // RDMA Read Response, or a Send's first segment longer than kPayloadHead
  // (items[long_head_unit]), kept only when asked for
  // (IwarpAnalyzer::keep_long_heads): a ULP may put more there, as NVMe-oF does
  // its 1024-byte Connect data after a 64-byte command.
  static constexpr std::size_t kLongHead = 64 + 1024;
  std::vector<std::uint8_t> long_head;
  std::uint8_t long_head_unit = 0;
  void clear() {
    size = 0;
    overflow = 0;
    tcp_holes = tcp_retransmissions = 0;
    long_head.clear();
  }
  bool empty() const { return size == 0 && overflow == 0; }
  IwarpPdu* push() {
    if (size == kCapacity) {
      ++overflow;
      return nullptr;
    }
    items[size] = IwarpPdu{};
    return &items[size++];
  }
  const IwarpPdu* begin() const { return items.data(); }
  const IwarpPdu* end() const { return items.data() + size; }
};

struct IwarpCrcCounts {
  std::uint64_t ok = 0, bad = 0, unverifiable = 0, not_negotiated = 0;
  void merge(const IwarpCrcCounts& o) {
    ok += o.ok;
    bad += o.bad;
    unverifiable += o.unverifiable;
    not_negotiated += o.not_negotiated;
  }
};

// One direction of one TCP connection that carried MPA.
struct IwarpFlowInfo {
  std::array<std::uint8_t, 16> src{}, dst{};
  bool ipv6 = false;
  std::uint16_t src_port = 0, dst_port = 0;
  std::uint16_t point = 0;       // DecodedPacket::capture_point
  std::uint64_t first_frame = 0;
  bool initiator = false;        // sent the MPA Request
  bool negotiated = false;       // framing from an MPA Request/Reply seen in the capture
  bool rejected = false;
  bool markers = false, crc = false;  // in this direction
  bool crc_inferred = false;     // CRC use worked out from the bytes (no negotiation seen)
  std::uint32_t resyncs = 0;
  std::uint64_t fpdus = 0;
  std::uint64_t payload_bytes = 0;
  IwarpCrcCounts crc_counts;
  TcpStreamStats tcp;
};

struct IwarpStats {
  std::uint64_t connections = 0;        // with MPA seen (negotiated or found by resync)
  std::uint64_t negotiated = 0;
  std::uint64_t rejected = 0;
  std::uint64_t retired_at_cap = 0;     // connections retired while live because kMaxConnections were
  std::uint64_t fpdus = 0;
  std::uint64_t frames = 0;             // frames in which an FPDU or Request/Reply ended
  IwarpCrcCounts crc;
  std::array<std::uint64_t, 16> by_opcode{};
  std::array<std::uint64_t, 16> bytes_by_opcode{};
  std::uint64_t markers = 0;
  std::uint64_t resyncs = 0;
  std::uint64_t reads_matched = 0;
  double read_latency_min_us = 0, read_latency_max_us = 0, read_latency_sum_us = 0;
  std::uint64_t atomics_matched = 0;
  std::uint64_t tcp_holes_recovered = 0, tcp_holes_lost = 0, tcp_bytes_lost = 0;
  std::uint64_t tcp_retransmitted_segments = 0;
  // Adds another part's counts (a shard of `analyze -j`): sums, the extreme
  // READ latencies. read_latency_sum_us is the analyzer's exact sum, merged there.
  void merge(const IwarpStats& o);
};

// What the fields of an iWARP Anomaly hold (the struct's names are IB's):
//   ddp_msn_gap            dest_qp = QN, psn = MSN seen, expected_psn = the MSN next on that queue
//   ddp_mo_discontinuity   dest_qp = QN, psn = MSN, count = MO seen, expected_psn = the MO expected
//   ddp_to_discontinuity   psn = STag seen, expected_psn = STag expected, count = TO seen - TO expected
//                          (mod 2^32); related: the Read Request (Read Responses; none for RDMA Writes)
//   rdmap_read_size_mismatch  count = bytes the Read Response carried, expected_psn = the Read Request's
//                          size; related: the Read Request
//   mpa_bad_framing        count = markers whose value was wrong
//   mpa_marker_stride      count = the stride the markers were found at (0: none found)
//   tcp_hole               psn = first missing TCP sequence number, count = bytes; recovered (a
//                          duration): expected_psn = the TcpGapFill that filled it; related: the
//                          segment that filled it, then (fill corruption) the damaged copy
//   rdmap_terminate        count = layer << 16 | error type << 8 | error code
//   iwarp_resync           count = bytes skipped
// A TCP connection's key: its two endpoints, the lower (address, then port)
// first, and the capture point that saw it (DecodedPacket::capture_point).
struct IwarpConnKey {
  std::array<std::uint8_t, 16> lo_addr{}, hi_addr{};  // IPv4 as IPv4-mapped IPv6
  std::uint16_t lo_port = 0, hi_port = 0;
  std::uint16_t point = 0;
  bool operator==(const IwarpConnKey&) const = default;
};
struct IwarpConnKeyHash {
  std::size_t operator()(const IwarpConnKey& k) const;
};

class IwarpAnalyzer {
 public:
  static constexpr std::size_t kMaxConnections = 16384;
  // A connection that never carried MPA and holds no bytes is retired after this
  // much capture time without a segment (checked at Analyzer::sweep).
  static constexpr double kIdleRetireSeconds = 120.0;

  explicit IwarpAnalyzer(AnomalyLog& log);
  ~IwarpAnalyzer();
  IwarpAnalyzer(const IwarpAnalyzer&) = delete;
  IwarpAnalyzer& operator=(const IwarpAnalyzer&) = delete;

  // A frame with a TCP header (p.tcp set). Fills `out` with the MPA units that ended.
  static constexpr std::int64_t kNoNs = INT64_MIN;  // `ts_ns` not given: taken from `ts`
  void add(const DecodedPacket& p, std::uint64_t frame, double ts, IwarpFrame& out, std::int64_t ts_ns = kNoNs);
  // Retires the connections idle since `now` - kIdleRetireSeconds that carry no
  // MPA and hold no bytes (nothing of them is reported: they close silently).
  void sweep(double now);
  // Closes the connections still open, in the order they were created.
  void finish();
  // Keep IwarpFrame::long_head (a copy of up to 1 KB per Read Response or long Send segment).
  void keep_long_heads(bool on) { keep_long_heads_ = on; }

  // The last TCP frame added; at finish() the streams still open end there. A
  // shard of a sharded analysis (analyzer_merge.h) is told the whole input's
  // last TCP frame before finish() with set_end().
  std::uint64_t last_frame() const { return last_frame_; }
  double last_ts() const { return last_ts_; }
  std::int64_t last_ts_ns() const { return last_ts_ns_; }
  void set_end(std::uint64_t frame, double ts, std::int64_t ts_ns) {
    last_frame_ = frame;
    last_ts_ = ts;
    last_ts_ns_ = ts_ns;
  }
  // Order key (AnomalyLog::order_key) of the finish() phase: after every frame.
  static constexpr std::uint64_t kFinishOrderKey = std::uint64_t{1} << 63;

  const std::vector<IwarpFlowInfo>& flows() const { return flows_; }
  const IwarpStats& stats() const { return stats_; }

  // What a sharded analysis checks against the single-thread bounds (AnalyzerMerge::bounds_reached).
  struct Bounds {
    std::size_t peak_live = 0;      // most connections live at once
    bool cap_reached = false;       // kMaxConnections forced a retirement
    std::size_t peak_buffered = 0;  // most out-of-order bytes held at once, all streams
    std::size_t buffer_limit = 0;   // the TCP buffer budget
  };
  Bounds bounds() const;
  std::size_t live_connections() const { return conns_.size(); }

  // Into this analyzer (one that saw no frame): the flows and totals of finished
  // shards, flows in order of identification. flow_index[s][i]: the merged index
  // of flow i of part s.
  void merge(std::span<const IwarpAnalyzer* const> parts, std::vector<std::vector<std::uint32_t>>& flow_index);

  struct Connection;  // one TCP connection, both directions (iwarp_analysis.cpp)

 private:
  void close(Connection& c);
  bool adopt_damaged_port(const DecodedPacket& p, std::uint64_t frame);
  Connection& connection_for(const IwarpConnKey& key, bool from_lo, bool ipv6, std::uint64_t frame);
  void segment(Connection& c, int d, const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, IwarpFrame& out);
  void note_unit();

  AnomalyLog& log_;
  FlowSlots<IwarpConnKey, IwarpConnKeyHash, Connection> conns_;  // live connections (at most kMaxConnections)
  std::size_t peak_buffered_ = 0;        // most out-of-order bytes held at once, all streams
  IwarpFrame* cur_out_ = nullptr;
  bool keep_long_heads_ = false;
  bool unit_in_frame_ = false;
  std::vector<IwarpFlowInfo> flows_;
  std::vector<std::uint64_t> flow_order_keys_;  // per flow: the log's order key when it was identified
  IwarpStats stats_;
  ExactSum read_latency_sum_;  // stats_.read_latency_sum_us, independent of the order of the additions
  TcpBufferBudget budget_;
  std::vector<std::uint8_t> scratch_;  // an FPDU with its markers removed
  std::uint64_t last_frame_ = 0;
  double last_ts_ = 0;
  std::int64_t last_ts_ns_ = 0;
  bool finished_ = false;
};

}  // namespace rdmadiag::decode
