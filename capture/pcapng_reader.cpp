#include "capture/pcapng_reader.h"

#include <algorithm>
#include <cstring>

namespace rdmadiag::capture {

namespace {

constexpr std::uint32_t kShb = 0x0A0D0D0A;
constexpr std::uint32_t kIdb = 1;
constexpr std::uint32_t kOpb = 2;  // obsolete Packet Block, still written by old tools
constexpr std::uint32_t kSpb = 3;
constexpr std::uint32_t kEpb = 6;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEnd = 0, kIfName = 2, kIfTsresol = 9, kIfTsoffset = 14;
constexpr std::size_t kMaxNameLen = 256;
// Record::ts_ns() must not overflow: |seconds| below 2^63 ns (292 years from 1970).
constexpr std::int64_t kMaxSeconds = 9'000'000'000;

std::uint64_t pow10(unsigned e) {
  std::uint64_t v = 1;
  while (e--) v *= 10;
  return v;
}

// A time stamp in the interface's units as seconds and nanoseconds (+ if_tsoffset);
// false when it lies outside what Record::ts_ns() can hold.
bool split_time(std::uint64_t ts, const PcapngInterface& i, std::int64_t& sec, std::uint32_t& nsec) {
  std::uint64_t whole = 0, ns = 0;
  if (i.binary_resol) {
    whole = ts >> i.resol_exp;
    const std::uint64_t frac = ts & ((std::uint64_t{1} << i.resol_exp) - 1);
    __extension__ typedef unsigned __int128 Wide;  // frac * 10^9 needs up to 94 bits
    ns = static_cast<std::uint64_t>((static_cast<Wide>(frac) * 1'000'000'000u) >> i.resol_exp);
  } else {
    const std::uint64_t unit = pow10(i.resol_exp);
    whole = ts / unit;
    const std::uint64_t frac = ts % unit;
    ns = i.resol_exp <= 9 ? frac * pow10(9 - i.resol_exp) : frac / pow10(i.resol_exp - 9);
  }
  if (whole > static_cast<std::uint64_t>(kMaxSeconds) || i.offset_sec > kMaxSeconds || i.offset_sec < -kMaxSeconds)
    return false;
  sec = static_cast<std::int64_t>(whole) + i.offset_sec;
  nsec = static_cast<std::uint32_t>(ns);
  return sec <= kMaxSeconds && sec >= -kMaxSeconds;
}

}  // namespace

PcapngReader::~PcapngReader() {
  if (file_) std::fclose(file_);
}

bool PcapngReader::open(const std::string& path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) {
    error_ = path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool PcapngReader::damage(const std::string& why) {
  stop_reason_ = why;
  return false;
}

PcapngReader::Got PcapngReader::broken(const std::string& why) {
  stop_reason_ = why;
  return Got::damage;
}

std::uint32_t PcapngReader::u32(std::size_t at) const { return load32(block_.data() + at, swapped_); }

std::uint16_t PcapngReader::u16(std::size_t at) const {
  std::uint16_t v;
  std::memcpy(&v, block_.data() + at, 2);
  return swapped_ ? __builtin_bswap16(v) : v;
}

// Reads the next block's body into block_ (type in type_), both its lengths checked.
PcapngReader::Got PcapngReader::read_block() {
  std::uint8_t head[12];
  const std::size_t n = std::fread(head, 1, 8, file_);
  if (n == 0 && !std::ferror(file_)) return Got::end;
  if (n < 8) return broken("pcapng block header cut short (" + std::to_string(n) + " of 8 bytes)");
  std::size_t have = 0;  // body bytes already read (a section header's byte-order magic)
  if (load32(head, false) == kShb) {
    // The byte order of a section is known only from its header's magic.
    if (std::fread(head + 8, 1, 4, file_) != 4) return broken("section header block cut short");
    const std::uint32_t magic = load32(head + 8, false);
    if (magic != kByteOrderMagic && magic != __builtin_bswap32(kByteOrderMagic))
      return broken("section header block with an unknown byte-order magic");
    swapped_ = magic != kByteOrderMagic;
    have = 4;
  }
  type_ = load32(head, swapped_);
  const std::uint32_t len = load32(head + 4, swapped_);
  if (len < 12 + have || len % 4 != 0 || len > kMaxBlockLen)
    return broken("pcapng block of type " + std::to_string(type_) + " has an invalid length " + std::to_string(len));
  const std::size_t body = len - 12;
  block_.resize(body + 4);  // the body and the trailing length
  std::memcpy(block_.data(), head + 8, have);
  if (std::fread(block_.data() + have, 1, body + 4 - have, file_) != body + 4 - have)
    return broken("pcapng block of " + std::to_string(len) + " bytes cut short by the end of the file");
  if (load32(block_.data() + body, swapped_) != len)
    return broken("pcapng block of " + std::to_string(len) + " bytes ends with another length");
  block_.resize(body);
  block_start_ = next_block_;
  next_block_ += len;
  return Got::block;
}

bool PcapngReader::section_header() {
  if (block_.size() < 16) return damage("section header block too short");
  if (u16(4) != 1)
    return damage("section of pcapng version " + std::to_string(u16(4)) + "." + std::to_string(u16(6)) +
                  " (only 1.x is read)");
  in_section_ = true;
  section_base_ = interfaces_.size();  // a new section numbers its interfaces from 0 again
  return true;
}

bool PcapngReader::interface_option(PcapngInterface& idb, std::uint16_t code, const std::uint8_t* value,
                                    std::uint16_t len) {
  if (code == kIfName) {
    idb.name.assign(reinterpret_cast<const char*>(value), std::min<std::size_t>(len, kMaxNameLen));
    idb.name.erase(std::find(idb.name.begin(), idb.name.end(), '\0'), idb.name.end());
  } else if (code == kIfTsresol && len >= 1) {
    idb.binary_resol = (value[0] & 0x80) != 0;
    idb.resol_exp = value[0] & 0x7f;
    if (idb.resol_exp > (idb.binary_resol ? 63 : 19))
      return damage("interface time stamp resolution (if_tsresol " + std::to_string(value[0]) + ") finer than read");
  } else if (code == kIfTsoffset && len == 8) {
    const std::uint64_t a = load32(value, swapped_), b = load32(value + 4, swapped_);
    idb.offset_sec = static_cast<std::int64_t>(swapped_ ? (a << 32 | b) : (b << 32 | a));
  }
  return true;
}

bool PcapngReader::interface_block() {
  if (block_.size() < 8) return damage("interface description block too short");
  PcapngInterface idb;
  idb.linktype = u16(0);
  idb.snaplen = u32(4);
  for (std::size_t at = 8; at + 4 <= block_.size();) {
    const std::uint16_t code = u16(at), len = u16(at + 2);
    if (code == kOptEnd) break;
    if (len > block_.size() - at - 4) return damage("interface option " + std::to_string(code) + " runs past its block");
    if (!interface_option(idb, code, block_.data() + at + 4, len)) return false;
    at += 4 + ((std::size_t{len} + 3) & ~std::size_t{3});
  }
  interfaces_.push_back(std::move(idb));
  return true;
}

bool PcapngReader::packet(Record& rec, std::uint32_t local_iface, std::uint64_t ts, std::uint32_t caplen,
                          std::uint32_t wirelen, std::size_t data_at) {
  if (local_iface >= interfaces_.size() - section_base_)
    return damage("packet of interface " + std::to_string(local_iface) + ", but its section has " +
                  std::to_string(interfaces_.size() - section_base_) + " interface(s)");
  if (caplen > block_.size() - data_at)
    return damage("packet's captured length " + std::to_string(caplen) + " runs past its block");
  iface_ = static_cast<std::uint32_t>(section_base_ + local_iface);
  if (!split_time(ts, interfaces_[iface_], rec.ts_sec, rec.ts_nsec))
    return damage("packet time stamp more than 285 years from 1970");
  rec.caplen = caplen;
  rec.wirelen = wirelen;
  rec.data = std::span<const std::uint8_t>(block_.data() + data_at, caplen);
  return true;
}

bool PcapngReader::next(Record& rec) {
  if (!file_ || !stop_reason_.empty()) return false;
  for (;;) {
    if (read_block() != Got::block) return false;
    if (!in_section_ && type_ != kShb) return damage("pcapng block of type " + std::to_string(type_) + " before any section header");
    if (type_ == kShb && !section_header()) return false;
    if (type_ == kIdb && !interface_block()) return false;
    if (type_ == kEpb || type_ == kOpb) {
      if (block_.size() < 20) return damage("packet block too short");
      const std::uint64_t ts = std::uint64_t{u32(4)} << 32 | u32(8);
      return packet(rec, type_ == kEpb ? u32(0) : u16(0), ts, u32(12), u32(16), 20);
    }
    if (type_ == kSpb) {
      // No interface field (the section's first) and no time stamp.
      if (block_.size() < 4) return damage("simple packet block too short");
      std::uint32_t caplen = static_cast<std::uint32_t>(std::min<std::size_t>(u32(0), block_.size() - 4));
      if (interfaces_.size() > section_base_ && interfaces_[section_base_].snaplen)
        caplen = std::min(caplen, interfaces_[section_base_].snaplen);
      return packet(rec, 0, 0, caplen, u32(0), 4);
    }
  }
}

}  // namespace rdmadiag::capture
