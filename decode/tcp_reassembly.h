// TCP stream reassembly (RFC 9293 section 3.4: sequence numbers, 3.10.7.4:
// segment acceptance and trimming) for the stream protocols that frame inside
// TCP (iWARP MPA). One TcpStream per connection and direction: it hands its
// sink the bytes in sequence order exactly once, trims retransmitted and
// overlapping segments, holds out-of-order segments (copied, within a per-stream
// and a global byte budget) until the gap before them is filled, and declares a
// hole when the gap cannot be filled any more (budget exceeded, the peer
// acknowledged bytes the capture never saw, end of input); the stream goes on
// after the hole. In-order segments are passed through without copying.
#pragma once
#include <cstdint>
#include <vector>

#include "decode/byte_reader.h"

namespace rdmadiag::decode {

// Serial-number comparison of sequence numbers (RFC 1982 style, mod 2^32).
constexpr bool seq_lt(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) < 0; }
constexpr bool seq_leq(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) <= 0; }

// What filled a gap, told by the IPv4 Identification of the segment that
// filled it against that of the segment after the gap (captured before it):
// senders that number their packets in order (Linux: per connection) give a
// resend a newer ID than what it sent after the original, and a late original
// an older one. Unknown without IDs (IPv6) or when they do not move.
// `corruption`: the missing bytes were captured in a segment whose TCP port took a bit
// error (IwarpAnalyzer ties it back by its checksum); its receiver dropped it.
enum class TcpGapFill : std::uint8_t { unknown, retransmission, reordering, corruption };

// A gap in the byte stream seen at the capture point.
struct TcpHoleEvent {
  std::uint32_t seq = 0;             // first missing byte
  std::uint32_t bytes = 0;           // bytes that were missing
  std::uint64_t frame_detected = 0;  // the first segment after the gap
  std::int64_t ts_detected_ns = 0;
  std::uint64_t frame_resolved = 0;  // the segment that filled it (recovered) or the frame where it was given up
  std::int64_t ts_resolved_ns = 0;
  bool recovered = false;            // filled later: no byte is missing from the stream
  TcpGapFill fill = TcpGapFill::unknown;  // recovered: by what
};

class TcpStreamSink {
 public:
  virtual ~TcpStreamSink() = default;
  // In-order bytes starting at `seq`: `captured` may be shorter than `wire_len`
  // (the snap length cut the segment); the missing tail is still part of the stream.
  virtual void stream_data(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t frame, std::int64_t ts_ns) = 0;
  // A gap was recovered (informational) or given up: after an unrecovered hole,
  // the next stream_data starts at seq + bytes.
  virtual void stream_hole(const TcpHoleEvent& hole) = 0;
};

// Shared limit on the bytes all streams hold out of order.
struct TcpBufferBudget {
  std::size_t limit = 64u << 20;
  std::size_t used = 0;
};

struct TcpStreamStats {
  std::uint64_t segments = 0;              // segments with payload
  std::uint64_t bytes = 0;                 // distinct stream bytes delivered (or declared lost)
  std::uint64_t retransmitted_segments = 0;  // entirely old data
  std::uint64_t retransmitted_bytes = 0;
  std::uint64_t overlap_bytes = 0;         // old bytes at the front of partly new segments
  std::uint64_t out_of_order_segments = 0;
  std::uint64_t holes_recovered = 0;
  std::uint64_t holes_lost = 0;
  std::uint64_t bytes_lost = 0;
};

class TcpStream {
 public:
  static constexpr std::size_t kMaxOutOfOrderBytes = 4u << 20;
  static constexpr std::size_t kMaxOutOfOrderSegments = 1024;

  explicit TcpStream(TcpBufferBudget* budget = nullptr) : budget_(budget) {}
  ~TcpStream();
  TcpStream(TcpStream&& o) noexcept;
  TcpStream& operator=(TcpStream&&) = delete;
  TcpStream(const TcpStream&) = delete;

  // A SYN at `seq`: the stream's data starts at seq + 1.
  void syn(std::uint32_t seq);
  // One segment's payload (after the SYN octet, if any); `ip_id`: its IPv4
  // Identification, -1 if none.
  void segment(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t frame, std::int64_t ts_ns,
               TcpStreamSink& sink, std::int32_t ip_id = -1);
  // An acknowledgement from the peer: bytes acknowledged beyond a gap reached the
  // receiver without passing the capture point, so the gap will never fill.
  void peer_ack(std::uint32_t ack, std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink);
  // End of input or of the connection: give up every gap, deliver what is held.
  void flush(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink);

  bool started() const { return started_; }
  bool saw_syn() const { return saw_syn_; }
  std::uint32_t next_seq() const { return next_; }
  std::size_t held_bytes() const { return held_bytes_; }
  const TcpStreamStats& stats() const { return stats_; }

 private:
  struct Held {
    std::uint32_t seq;
    std::uint32_t wire_len;
    std::uint64_t frame;
    std::int64_t ts_ns;
    std::int32_t ip_id;
    std::vector<std::uint8_t> data;  // captured bytes (may be fewer than wire_len)
  };
  void deliver(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t frame, std::int64_t ts_ns,
               TcpStreamSink& sink);
  void drain(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink);
  void give_up_first_gap(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink);
  void open_gap();
  void close_gap(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink);
  void note_fill(std::int32_t ip_id);
  void release(std::size_t n);

  TcpBufferBudget* budget_;
  bool started_ = false;
  bool saw_syn_ = false;
  std::uint32_t next_ = 0;
  std::vector<Held> held_;  // sorted by seq
  std::size_t held_bytes_ = 0;
  // The first gap (next_ .. held_.front().seq): each gap is reported on its own.
  bool gap_open_ = false;
  std::uint32_t gap_seq_ = 0;
  std::uint64_t gap_frame_ = 0;   // the first frame with bytes beyond it
  std::int64_t gap_ts_ns_ = 0;
  TcpGapFill gap_fill_ = TcpGapFill::unknown;
  TcpStreamStats stats_;
};

}  // namespace rdmadiag::decode
