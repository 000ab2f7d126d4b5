// Bounds-checked big-endian reads over a span of captured bytes (tcpdump's GET_*
// discipline without longjmp). Every read checks the captured length; an
// out-of-range read returns 0 and latches `overrun()`, so a parser that forgot a
// length check yields a wrong-but-safe value and a detectable flag, never an
// over-read. Parsers still check `has(n)` up front so that truncation is reported
// at the right offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmadiag::decode {

using Bytes = std::span<const std::uint8_t>;

// The readers are a bounds check and a load, always inlined: GCC had stopped
// inlining them in the large header parsers (ib_transport, ethernet, l4: 60
// calls), which cost 3-4 % of analyze's CPU (docs/performance.md, session 23).
class ByteReader {
 public:
  constexpr explicit ByteReader(Bytes data) : data_(data) {}

  constexpr std::size_t size() const { return data_.size(); }
  constexpr bool has(std::size_t offset, std::size_t n) const {
    return offset <= data_.size() && n <= data_.size() - offset;
  }
  constexpr bool overrun() const { return overrun_; }

  [[gnu::always_inline]] constexpr std::uint8_t u8(std::size_t off) const {
    if (!has(off, 1)) return fail();
    return data_[off];
  }
  [[gnu::always_inline]] constexpr std::uint16_t be16(std::size_t off) const {
    if (!has(off, 2)) return fail();
    return static_cast<std::uint16_t>(data_[off] << 8 | data_[off + 1]);
  }
  [[gnu::always_inline]] constexpr std::uint32_t be24(std::size_t off) const {
    if (!has(off, 3)) return fail();
    return std::uint32_t{data_[off]} << 16 | std::uint32_t{data_[off + 1]} << 8 | data_[off + 2];
  }
  [[gnu::always_inline]] constexpr std::uint32_t be32(std::size_t off) const {
    if (!has(off, 4)) return fail();
    return std::uint32_t{data_[off]} << 24 | std::uint32_t{data_[off + 1]} << 16 |
           std::uint32_t{data_[off + 2]} << 8 | data_[off + 3];
  }
  [[gnu::always_inline]] constexpr std::uint64_t be64(std::size_t off) const {
    if (!has(off, 8)) return fail();
    return std::uint64_t{be32(off)} << 32 | be32(off + 4);
  }
  [[gnu::always_inline]] constexpr std::uint32_t le32(std::size_t off) const {
    if (!has(off, 4)) return fail();
    return std::uint32_t{data_[off + 3]} << 24 | std::uint32_t{data_[off + 2]} << 16 |
           std::uint32_t{data_[off + 1]} << 8 | data_[off];
  }
  [[gnu::always_inline]] constexpr std::uint16_t le16(std::size_t off) const {
    if (!has(off, 2)) return fail();
    return static_cast<std::uint16_t>(data_[off + 1] << 8 | data_[off]);
  }
  [[gnu::always_inline]] constexpr std::uint64_t le64(std::size_t off) const {
    if (!has(off, 8)) return fail();
    return std::uint64_t{le32(off + 4)} << 32 | le32(off);
  }
  // A sub-span; empty (and overrun latched) when out of range.
  constexpr Bytes sub(std::size_t off, std::size_t n) const {
    if (!has(off, n)) {
      fail();
      return {};
    }
    return data_.subspan(off, n);
  }
  constexpr Bytes from(std::size_t off) const {
    if (off > data_.size()) {
      fail();
      return {};
    }
    return data_.subspan(off);
  }

 private:
  constexpr std::uint8_t fail() const {
    overrun_ = true;
    return 0;
  }
  Bytes data_;
  mutable bool overrun_ = false;
};

}  // namespace rdmadiag::decode
