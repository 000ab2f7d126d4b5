// How the fuzz targets carve one libFuzzer input into what the code under test
// takes: a link type chosen by the first byte, then frames each prefixed by a
// 2-byte big-endian length. The layout is ours (not a capture format) so that a
// mutation changes packet bytes, not file framing; tests/fuzz/make_seeds.py
// writes seeds in this layout from the captures in tests/pcaps/.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "decode/packet.h"

namespace rdmadiag::fuzz {

// Every link type decode_frame supports, plus one it does not (0, BSD loopback)
// so the "not decoded" path runs too. Seed files name the index, not the value.
inline constexpr std::array<std::uint32_t, 11> kLinkTypes = {
    decode::linktype::kEthernet, decode::linktype::kRawDlt12,  decode::linktype::kRawDlt14,
    decode::linktype::kRaw,      decode::linktype::kLinuxSll,  decode::linktype::kErf,
    decode::linktype::kIpv4,     decode::linktype::kIpv6,      decode::linktype::kInfiniband,
    decode::linktype::kLinuxSll2, 0};

inline std::uint32_t pick_linktype(std::uint8_t selector) { return kLinkTypes[selector % kLinkTypes.size()]; }

// Reads the input front to back; every read past the end yields empty/zero.
class InputCursor {
 public:
  InputCursor(const std::uint8_t* data, std::size_t size) : data_(data, size) {}
  bool empty() const { return pos_ >= data_.size(); }
  std::uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  std::uint16_t be16() { return static_cast<std::uint16_t>(u8() << 8 | u8()); }
  std::uint32_t be32() { return std::uint32_t{be16()} << 16 | be16(); }
  // Up to n bytes (fewer at the end of the input).
  std::span<const std::uint8_t> take(std::size_t n) {
    const std::size_t k = std::min(n, data_.size() - std::min(pos_, data_.size()));
    auto s = data_.subspan(pos_, k);
    pos_ += k;
    return s;
  }
  std::span<const std::uint8_t> rest() { return take(data_.size()); }

 private:
  std::span<const std::uint8_t> data_;
  std::size_t pos_ = 0;
};

}  // namespace rdmadiag::fuzz
