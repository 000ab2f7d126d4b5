// Exact copies of recent frames: the mark of two capture points merged onto one
// interface (mergecap's default -I all merges identical interface descriptions;
// a capture merged with its own copy). Each packet is then seen twice, the same
// bytes a few microseconds apart, and the transport analysis calls half of the
// traffic duplicates. A network duplicate (netem `duplicate`, a looping switch)
// is also an exact copy, but of a few packets, not of about half of them: the
// hint needs a quarter of the frames to be copies.
//
// Per frame: one hash of its length, its first 64 bytes and its last 8 (the
// ICRC or MPA CRC and TCP checksum cover the rest) compared with the last
// kRecent frames' within kWindowNs. Fixed memory, no heap. A merged capture is
// merged throughout, so a sample tells: of every kBlock frames (in frame order)
// the first kExamined are looked at, each block afresh (nothing before it is
// recent), which keeps the cost off the hot path past the first kExamined.
#pragma once
#include <array>
#include <cstdint>
#include "decode/byte_reader.h"

namespace rdmadiag::decode {

class CopyDetector {
 public:
  static constexpr std::size_t kRecent = 16;
  static constexpr std::int64_t kWindowNs = 1'000'000;  // 1 ms
  static constexpr std::uint64_t kMinCopies = 8;
  static constexpr std::uint64_t kBlock = 65536;
  static constexpr std::uint64_t kExamined = 8192;

  // Called for every frame, in frame order.
  void add(Bytes frame, std::int64_t ts_ns) {
    if (seen_++ % kBlock < kExamined) examine(frame, ts_ns);
  }
  // The same, with the frame read (`read()`: its bytes and time) only when it
  // is in the sample: most frames' bytes are then not touched here.
  template <class ReadFrame>
  void add_lazy(ReadFrame&& read) {
    if (seen_++ % kBlock >= kExamined) return;
    const auto [frame, ts_ns] = read();
    examine(frame, ts_ns);
  }
  // The frames looked at (the sample), and the copies among them.
  std::uint64_t frames() const { return frames_; }
  std::uint64_t copies() const { return copies_; }
  // At least kMinCopies copies and a quarter of the frames.
  bool looks_merged() const { return copies_ >= kMinCopies && copies_ * 4 >= frames_; }

 private:
  struct Seen {
    std::uint64_t hash = 0;
    std::int64_t ts_ns = 0;
  };
  void examine(Bytes frame, std::int64_t ts_ns);

  std::array<Seen, kRecent> recent_{};
  std::size_t next_ = 0;
  std::uint64_t seen_ = 0;
  std::uint64_t frames_ = 0;
  std::uint64_t copies_ = 0;
};

}  // namespace rdmadiag::decode
