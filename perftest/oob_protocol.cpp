#include "perftest/oob_protocol.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "exporters/printable.h"

namespace rdmadiag::perftest::oob {

static_assert(sizeof(ibv_device_attr) == kDeviceAttrSize,
              "perftest sends struct ibv_device_attr raw; its size must be the LP64 one");

std::string describe_bytes(std::span<const char> bytes, std::size_t limit) {
  const std::size_t shown = std::min(bytes.size(), limit);
  std::string out = "\"" + exporters::printable(std::string_view(bytes.data(), shown)) + "\"";
  if (bytes.size() > shown) out += "... (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

std::array<char, kVersionSize> encode_version(const std::string& version, bool add_rdmadiag_marker) {
  std::array<char, kVersionSize> out{};
  const std::size_t n = std::min(version.size(), kVersionSize - 1);
  std::memcpy(out.data(), version.data(), n);
  const std::size_t marker_len = sizeof kRdmadiagMarker - 1;
  if (add_rdmadiag_marker && n + 1 + marker_len < kVersionSize)
    std::memcpy(out.data() + n + 1, kRdmadiagMarker, marker_len);
  return out;
}

PeerVersion parse_version(std::span<const char> bytes) {
  if (bytes.size() != kVersionSize)
    throw ProtocolError("version message has " + std::to_string(bytes.size()) + " bytes, expected 16");
  const auto nul = std::find(bytes.begin(), bytes.end(), '\0');
  PeerVersion v;
  v.text.assign(bytes.begin(), nul);
  // A perftest version is digits and dots ("6.06", "5.70"); anything else means the other
  // end is not perftest (or not speaking its protocol on this port).
  const bool looks_like_version =
      !v.text.empty() && std::isdigit(static_cast<unsigned char>(v.text[0])) &&
      std::all_of(v.text.begin(), v.text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
      });
  if (!looks_like_version)
    throw ProtocolError("peer's first message is not a perftest version string: " + describe_bytes(bytes) +
                        " (is something other than perftest/rdmadiag listening on that port?)");
  v.number = std::strtod(v.text.c_str(), nullptr);
  if (nul != bytes.end()) {
    const std::string after(nul + 1, std::find(nul + 1, bytes.end(), '\0'));
    v.is_rdmadiag = after == kRdmadiagMarker;
  }
  return v;
}

std::array<char, 4> encode_be32(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

std::uint32_t parse_be32(std::span<const char> bytes) {
  if (bytes.size() != 4) throw ProtocolError("expected a 4-byte integer, got " + std::to_string(bytes.size()));
  std::uint32_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

std::array<char, kMtuMessageSize> encode_mtu(int ibv_mtu_enum) {
  if (ibv_mtu_enum < 1 || ibv_mtu_enum > 5) throw std::invalid_argument("ibv_mtu enum out of range");
  return {static_cast<char>('0' + ibv_mtu_enum), '\0'};
}

int parse_mtu(std::span<const char> bytes) {
  if (bytes.size() != kMtuMessageSize)
    throw ProtocolError("MTU message has " + std::to_string(bytes.size()) + " bytes, expected 2");
  // perftest sends sprintf("%d") of the enum in a 2-byte buffer: one digit and its NUL.
  if (bytes[0] < '1' || bytes[0] > '5' || bytes[1] != '\0')
    throw ProtocolError("MTU message " + describe_bytes(bytes) + " is not an ibv_mtu value 1..5 (256..4096 bytes)");
  return bytes[0] - '0';
}

namespace {

// Layout of the key message: (name, hex digits) fields separated by ':'.
struct Field {
  const char* name;
  int digits;
};
constexpr Field kHead[] = {{"LID", 4}, {"out_reads", 4}, {"QPN", 6}, {"PSN", 6}, {"rkey", 8}, {"vaddr", 16}};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class KeyReader {
 public:
  KeyReader(std::span<const char> bytes) : bytes_(bytes) {}
  std::uint64_t field(const char* name, int digits, bool colon_after) {
    std::uint64_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const int h = hex_value(bytes_[pos_]);
      if (h < 0)
        fail(std::string("field ") + name + " has a non-hex character " + describe_bytes(bytes_.subspan(pos_, 1)));
      v = (v << 4) | static_cast<unsigned>(h);
    }
    if (colon_after) {
      if (bytes_[pos_] != ':') fail(std::string("expected ':' after field ") + name);
      ++pos_;
    }
    return v;
  }
  void expect_nul() {
    if (bytes_[pos_] != '\0') fail("expected the terminating NUL");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw ProtocolError("malformed perftest key message at byte " + std::to_string(pos_) + ": " + what +
                        "; message was " + describe_bytes(bytes_, 120));
  }

 private:
  std::span<const char> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<char> encode_key_message(const KeyMessage& k) {
  char buf[kKeyMessageSizeWithGid + 8];
  int n = std::snprintf(buf, sizeof buf, "%04x:%04x:%06x:%06x:%08x:%016llx", k.lid & 0xffff, k.out_reads & 0xffff,
                        k.qpn & 0xffffff, k.psn & 0xffffff, k.rkey, static_cast<unsigned long long>(k.vaddr));
  if (k.gid) {
    for (std::uint8_t b : *k.gid) n += std::snprintf(buf + n, sizeof buf - n, ":%02x", b);
    n += std::snprintf(buf + n, sizeof buf - n, ":%08x:", k.srqn);
  } else {
    n += std::snprintf(buf + n, sizeof buf - n, ":%08x", k.srqn);
  }
  std::vector<char> out(buf, buf + n);
  out.push_back('\0');
  return out;
}

KeyMessage parse_key_message(std::span<const char> bytes, bool with_gid) {
  const std::size_t expected = with_gid ? kKeyMessageSizeWithGid : kKeyMessageSizeWithoutGid;
  if (bytes.size() != expected) {
    std::string hint;
    if (bytes.size() == kKeyMessageSizeWithoutGid && with_gid)
      hint = " - the peer sends the form without GID (LID addressing); use the same -x/GID choice on both sides";
    else if (bytes.size() == kKeyMessageSizeWithGid && !with_gid)
      hint = " - the peer sends the form with GID; pass -x <gid index> here too";
    throw ProtocolError("perftest key message has " + std::to_string(bytes.size()) + " bytes, expected " +
                        std::to_string(expected) + hint);
  }
  KeyReader r(bytes);
  KeyMessage k;
  k.lid = static_cast<std::uint32_t>(r.field(kHead[0].name, kHead[0].digits, true));
  k.out_reads = static_cast<std::uint32_t>(r.field(kHead[1].name, kHead[1].digits, true));
  k.qpn = static_cast<std::uint32_t>(r.field(kHead[2].name, kHead[2].digits, true));
  k.psn = static_cast<std::uint32_t>(r.field(kHead[3].name, kHead[3].digits, true));
  k.rkey = static_cast<std::uint32_t>(r.field(kHead[4].name, kHead[4].digits, true));
  k.vaddr = r.field(kHead[5].name, kHead[5].digits, true);
  if (with_gid) {
    std::array<std::uint8_t, 16> gid{};
    for (auto& b : gid) b = static_cast<std::uint8_t>(r.field("GID byte", 2, true));
    k.gid = gid;
    k.srqn = static_cast<std::uint32_t>(r.field("SRQN", 8, true));
  } else {
    k.srqn = static_cast<std::uint32_t>(r.field("SRQN", 8, false));
  }
  r.expect_nul();
  return k;
}

namespace {
std::array<char, 8> be64(std::uint64_t v) {
  std::array<char, 8> out{};
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}
std::uint64_t from_be64(std::span<const char> b) {
  std::uint64_t v = 0;
  for (char c : b) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}
}  // namespace

std::vector<char> encode_cm_key_message(const KeyMessage& k, bool with_tail_markers) {
  std::vector<char> out;
  const auto put32 = [&](std::uint32_t v) {
    const auto b = encode_be32(v);
    out.insert(out.end(), b.begin(), b.end());
  };
  const auto put64 = [&](std::uint64_t v) {
    const auto b = be64(v);
    out.insert(out.end(), b.begin(), b.end());
  };
  for (std::uint32_t v : {k.lid, k.out_reads, k.qpn, k.psn, k.rkey}) put32(v);
  put32(0);  // the C struct's padding before the 8-byte vaddr
  put64(k.vaddr);
  if (with_tail_markers) put64(0);
  std::array<std::uint8_t, 16> gid{};
  if (k.gid) gid = *k.gid;
  out.insert(out.end(), gid.begin(), gid.end());
  put32(k.srqn);
  put32(0);  // gid_index: perftest sends it but no receiver reads it
  return out;
}

KeyMessage parse_cm_key_message(std::span<const char> bytes) {
  if (bytes.size() != kCmKeyMessageSize && bytes.size() != kCmKeyMessageSizeWithTailMarkers)
    throw ProtocolError("rdma_cm key message of " + std::to_string(bytes.size()) + " bytes; perftest sends " +
                        std::to_string(kCmKeyMessageSize) + " (up to 6.28) or " +
                        std::to_string(kCmKeyMessageSizeWithTailMarkers) + " (6.29 and later): " + describe_bytes(bytes));
  const bool tail = bytes.size() == kCmKeyMessageSizeWithTailMarkers;
  KeyMessage k;
  k.lid = parse_be32(bytes.subspan(0, 4)) & 0xffff;
  k.out_reads = parse_be32(bytes.subspan(4, 4));
  k.qpn = parse_be32(bytes.subspan(8, 4)) & 0xffffff;
  k.psn = parse_be32(bytes.subspan(12, 4)) & 0xffffff;
  k.rkey = parse_be32(bytes.subspan(16, 4));
  k.vaddr = from_be64(bytes.subspan(24, 8));
  const std::size_t gid_at = tail ? 40 : 32;
  std::array<std::uint8_t, 16> gid{};
  for (std::size_t i = 0; i < 16; ++i) gid[i] = static_cast<std::uint8_t>(bytes[gid_at + i]);
  k.gid = gid;
  k.srqn = parse_be32(bytes.subspan(gid_at + 16, 4));
  return k;
}

std::array<std::array<char, 8>, 5> encode_bw_report(const BwReport& r) {
  return {be64(r.size), be64(r.iterations), be64(std::bit_cast<std::uint64_t>(r.bw_peak_mb_per_sec)),
          be64(std::bit_cast<std::uint64_t>(r.bw_avg_mb_per_sec)), be64(std::bit_cast<std::uint64_t>(r.msg_rate_mpps))};
}

BwReport parse_bw_report(const std::array<std::array<char, 8>, 5>& f) {
  BwReport r;
  r.size = from_be64(f[0]);
  r.iterations = from_be64(f[1]);
  r.bw_peak_mb_per_sec = std::bit_cast<double>(from_be64(f[2]));
  r.bw_avg_mb_per_sec = std::bit_cast<double>(from_be64(f[3]));
  r.msg_rate_mpps = std::bit_cast<double>(from_be64(f[4]));
  return r;
}

std::array<char, kOptionsMessageSize> encode_options(const std::vector<std::pair<std::string, std::string>>& options) {
  std::string text;
  for (const auto& [k, v] : options) text += k + "=" + v + ";";
  if (text.size() >= kOptionsMessageSize) throw std::invalid_argument("options message too long");
  std::array<char, kOptionsMessageSize> out{};
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_options(std::span<const char> bytes) {
  if (bytes.size() != kOptionsMessageSize)
    throw ProtocolError("rdmadiag options message has " + std::to_string(bytes.size()) + " bytes, expected 256");
  const auto nul = std::find(bytes.begin(), bytes.end(), '\0');
  if (nul == bytes.end()) throw ProtocolError("rdmadiag options message is not NUL-terminated");
  const std::string text(bytes.begin(), nul);
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find(';', start);
    if (end == std::string::npos) throw ProtocolError("rdmadiag options message lacks a final ';': " + describe_bytes(bytes));
    const std::string item = text.substr(start, end - start);
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ProtocolError("rdmadiag options message has an item without key=value: \"" + item + "\"");
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> compare_options(const std::vector<std::pair<std::string, std::string>>& local,
                                         const std::vector<std::pair<std::string, std::string>>& remote) {
  std::map<std::string, std::string> theirs(remote.begin(), remote.end());
  std::vector<std::string> diffs;
  for (const auto& [k, v] : local) {
    const auto it = theirs.find(k);
    const std::string r = it == theirs.end() ? "(not set)" : it->second;
    if (r != v) diffs.push_back(k + ": local " + v + ", remote " + r);
  }
  return diffs;
}

namespace {
void put_be32(std::vector<char>& out, std::size_t at, std::int32_t v) {
  const auto b = encode_be32(static_cast<std::uint32_t>(v));
  std::memcpy(out.data() + at, b.data(), 4);
}
void put_be64(std::vector<char>& out, std::size_t at, std::uint64_t v) {
  const auto b = be64(v);
  std::memcpy(out.data() + at, b.data(), 8);
}
std::int32_t get_be32(std::span<const char> in, std::size_t at) {
  return static_cast<std::int32_t>(parse_be32(in.subspan(at, 4)));
}
}  // namespace

std::vector<char> encode_negotiation(const NegotiationBlock& b, bool with_mlx5_mask) {
  std::vector<char> out(with_mlx5_mask ? kNegotiationSizeWithMlx5 : kNegotiationSizeWithoutMlx5, 0);
  const std::int32_t head[] = {b.test_method, b.connection_type, b.verb, b.tst, b.atomic_type, b.test_type, b.report_fmt};
  for (std::size_t i = 0; i < 7; ++i) put_be32(out, i * 4, head[i]);
  put_be64(out, 32, b.size);
  put_be64(out, 40, b.iters);
  const std::int32_t tail[] = {b.aes_xts, b.num_of_qps, b.duration, b.use_rdma_cm, b.use_write_with_imm,
                               b.no_enhanced_reorder, b.sig_offload, b.data_validation};
  for (std::size_t i = 0; i < 8; ++i) put_be32(out, 48 + i * 4, tail[i]);
  if (!b.device_attr.empty())
    std::memcpy(out.data() + 80, b.device_attr.data(), std::min(b.device_attr.size(), kDeviceAttrSize));
  return out;
}

NegotiationBlock parse_negotiation(std::span<const char> bytes) {
  if (bytes.size() != kNegotiationSizeWithMlx5 && bytes.size() != kNegotiationSizeWithoutMlx5)
    throw ProtocolError("perftest parameter negotiation block has " + std::to_string(bytes.size()) + " bytes, expected " +
                        std::to_string(kNegotiationSizeWithoutMlx5) + " or " + std::to_string(kNegotiationSizeWithMlx5));
  NegotiationBlock b;
  b.test_method = get_be32(bytes, 0);
  b.connection_type = get_be32(bytes, 4);
  b.verb = get_be32(bytes, 8);
  b.tst = get_be32(bytes, 12);
  b.atomic_type = get_be32(bytes, 16);
  b.test_type = get_be32(bytes, 20);
  b.report_fmt = get_be32(bytes, 24);
  b.size = from_be64(bytes.subspan(32, 8));
  b.iters = from_be64(bytes.subspan(40, 8));
  std::int32_t* tail[] = {&b.aes_xts, &b.num_of_qps, &b.duration, &b.use_rdma_cm, &b.use_write_with_imm,
                          &b.no_enhanced_reorder, &b.sig_offload, &b.data_validation};
  for (std::size_t i = 0; i < 8; ++i) *tail[i] = get_be32(bytes, 48 + i * 4);
  b.device_attr.assign(bytes.begin() + 80, bytes.begin() + 80 + kDeviceAttrSize);
  // max_qp_rd_atom as the sender's (little-endian x86/arm64) host stored it.
  std::uint32_t rd_atom = 0;
  std::memcpy(&rd_atom, b.device_attr.data() + offsetof(ibv_device_attr, max_qp_rd_atom), 4);
  b.max_qp_rd_atom = rd_atom;
  return b;
}

std::vector<std::string> compare_negotiation(const NegotiationBlock& l, const NegotiationBlock& r) {
  static const char* const kMethods[] = {"RUN_REGULAR", "RUN_ALL", "RUN_INFINITELY"};
  static const char* const kConn[] = {"RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"};
  static const char* const kVerb[] = {"SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "ATOMIC"};
  static const char* const kTst[] = {"LAT", "BW", "LAT_BY_BW", "FS_RATE"};
  static const char* const kAtomic[] = {"CMP_AND_SWAP", "FETCH_AND_ADD"};
  static const char* const kType[] = {"ITERATIONS", "DURATION"};
  static const char* const kFmt[] = {"GBS", "MBS"};
  static const char* const kOnOff[] = {"OFF", "ON"};
  std::vector<std::string> diffs;
  auto named = [&](const char* what, std::int64_t a, std::int64_t c, const char* const* names, std::size_t n) {
    if (a == c) return;
    auto name = [&](std::int64_t v) {
      return (names && v >= 0 && static_cast<std::size_t>(v) < n) ? std::string(names[v]) : std::to_string(v);
    };
    diffs.push_back(std::string(what) + " mismatch: local=" + name(a) + ", remote=" + name(c));
  };
  named("test_method", l.test_method, r.test_method, kMethods, 3);
  named("connection_type", l.connection_type, r.connection_type, kConn, 7);
  named("verb", l.verb, r.verb, kVerb, 6);
  named("tst", l.tst, r.tst, kTst, 4);
  named("atomicType", l.atomic_type, r.atomic_type, kAtomic, 2);
  named("test_type", l.test_type, r.test_type, kType, 2);
  named("report_fmt", l.report_fmt, r.report_fmt, kFmt, 2);
  named("size", static_cast<std::int64_t>(l.size), static_cast<std::int64_t>(r.size), nullptr, 0);
  named("iters", static_cast<std::int64_t>(l.iters), static_cast<std::int64_t>(r.iters), nullptr, 0);
  named("aes_xts", l.aes_xts, r.aes_xts, kOnOff, 2);
  named("num_of_qps", l.num_of_qps, r.num_of_qps, nullptr, 0);
  named("duration", l.duration, r.duration, nullptr, 0);
  named("use_rdma_cm", l.use_rdma_cm, r.use_rdma_cm, kOnOff, 2);
  named("use_write_with_imm", l.use_write_with_imm, r.use_write_with_imm, kOnOff, 2);
  named("no_enhanced_reorder", l.no_enhanced_reorder, r.no_enhanced_reorder, kOnOff, 2);
  named("sig_offload", l.sig_offload, r.sig_offload, kOnOff, 2);
  named("data_validation", l.data_validation, r.data_validation, kOnOff, 2);
  return diffs;
}

}  // namespace rdmadiag::perftest::oob
