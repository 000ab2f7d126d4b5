// Byte fixtures for the iWARP stream tests, written from RFC 5044/5041/5040:
// MPA Request/Reply, FPDUs with pad, CRC32c computed bit by bit, markers placed
// every `stride` octets (RFC 5044: 512) of sequence space counted from the first
// FPDU; a harness that feeds them to the analysis as TCP segments.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "decode/analyzer.h"
#include "decode/iwarp_analysis.h"

namespace iwarp_fixture {

using namespace rdmadiag::decode;
using Buf = std::vector<std::uint8_t>;

inline std::uint32_t crc32c_bitwise(const std::uint8_t* b, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFF;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= b[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
  }
  return ~c;
}
inline void be16(Buf& b, std::uint32_t v) { b.push_back(std::uint8_t(v >> 8)); b.push_back(std::uint8_t(v)); }
inline void be32(Buf& b, std::uint32_t v) { be16(b, v >> 16); be16(b, v & 0xFFFF); }
inline void be64(Buf& b, std::uint64_t v) { be32(b, std::uint32_t(v >> 32)); be32(b, std::uint32_t(v)); }

inline Buf mpa_frame(bool request, bool marker, bool crc) {
  const std::string key = request ? "MPA ID Req Frame" : "MPA ID Rep Frame";
  Buf b(key.begin(), key.end());
  b.push_back(std::uint8_t((marker ? 0x80 : 0) | (crc ? 0x40 : 0) | 0x10));
  b.push_back(2);    // revision 2 (RFC 6581)
  be16(b, 4);
  be16(b, 0x8000 | 8);  // P, IRD 8
  be16(b, 0x8000 | 4);  // write RTR, ORD 4
  return b;
}

// ULPDU of an untagged Send (QN 0) with `payload` bytes, or a tagged RDMA Write.
inline Buf send_ulpdu(std::uint32_t msn, std::size_t payload, bool last = true, std::uint32_t mo = 0) {
  Buf u = {std::uint8_t(0x01 | (last ? 0x40 : 0)), 0x43};
  be32(u, 0);
  be32(u, 0);      // QN
  be32(u, msn);
  be32(u, mo);
  for (std::size_t i = 0; i < payload; ++i) u.push_back(std::uint8_t(i * 7 + msn));
  return u;
}
inline Buf write_ulpdu(std::uint32_t stag, std::uint64_t to, std::size_t payload, bool last) {
  Buf u = {std::uint8_t(0x81 | (last ? 0x40 : 0)), 0x40};
  be32(u, stag);
  be64(u, to);
  for (std::size_t i = 0; i < payload; ++i) u.push_back(std::uint8_t(i));
  return u;
}

// Writes FPDUs into one direction's byte stream, inserting markers when asked:
// a marker at every sequence number base + 512k, holding the distance back to the
// start of the FPDU it is in (0 when it sits where an FPDU starts).
struct StreamWriter {
  Buf wire;
  std::uint32_t start_seq = 0;     // sequence number of wire[0]
  bool markers = false;
  std::uint32_t base = 0;          // sequence number of the first FPDU
  std::uint32_t stride = 512;      // RFC 5044 section 4.3; others make a non-conforming sender
  bool crc = true;
  void raw(const Buf& b) { wire.insert(wire.end(), b.begin(), b.end()); }
  std::uint32_t seq_now() const { return start_seq + std::uint32_t(wire.size()); }
  void put(std::uint8_t v, std::uint32_t fpdu_start) {
    if (markers && (seq_now() - base) % stride == 0) {
      Buf m;
      be16(m, 0);
      be16(m, seq_now() - fpdu_start);
      raw(m);
    }
    wire.push_back(v);
  }
  void fpdu(const Buf& ulpdu) {
    const std::uint32_t s = seq_now();
    const std::size_t at = wire.size();
    Buf logical;
    be16(logical, std::uint32_t(ulpdu.size()));
    logical.insert(logical.end(), ulpdu.begin(), ulpdu.end());
    while ((logical.size() & 3) != 0) logical.push_back(0);
    for (auto v : logical) put(v, s);
    // A marker due right where the CRC starts is on the wire before it: covered.
    if (markers && (seq_now() - base) % stride == 0) {
      Buf m;
      be16(m, 0);
      be16(m, seq_now() - s);
      raw(m);
    }
    const std::uint32_t c = crc ? crc32c_bitwise(wire.data() + at, wire.size() - at) : 0;
    for (int i = 0; i < 4; ++i) put(std::uint8_t(c >> (8 * i)), s);
  }
};

struct Segment {
  int dir;  // 0: initiator -> responder
  std::uint32_t seq;
  Buf data;
  std::uint16_t flags = 0x18;
};

struct Harness {
  Analyzer an;
  std::uint64_t frame = 0;
  std::vector<IwarpPdu> units;
  std::map<std::uint64_t, std::size_t> units_at;
  void send(const Segment& s, std::uint32_t ack = 0) {
    DecodedPacket p;
    Ipv4Header ip{};
    ip.src = s.dir == 0 ? std::array<std::uint8_t, 4>{10, 0, 0, 2} : std::array<std::uint8_t, 4>{10, 0, 0, 1};
    ip.dst = s.dir == 0 ? std::array<std::uint8_t, 4>{10, 0, 0, 1} : std::array<std::uint8_t, 4>{10, 0, 0, 2};
    p.ipv4 = ip;
    TcpHeader t{};
    t.src_port = s.dir == 0 ? 40000 : 18515;
    t.dst_port = s.dir == 0 ? 18515 : 40000;
    t.seq = s.seq;
    t.ack = ack;
    t.flags = s.flags;
    p.tcp = t;
    p.tcp_payload = Bytes(s.data);
    p.tcp_payload_len = std::uint32_t(s.data.size());
    p.wirelen = 54 + p.tcp_payload_len;
    PacketAnalysis pa;
    ++frame;
    an.add(p, frame, double(frame) * 1e-3, pa);
    for (const IwarpPdu& u : pa.iwarp) units.push_back(u);
    units_at[frame] = pa.iwarp.size;
  }
  std::vector<IwarpPdu> fpdus() const {
    std::vector<IwarpPdu> v;
    for (const auto& u : units)
      if (u.kind == IwarpPdu::Kind::fpdu) v.push_back(u);
    return v;
  }
  std::uint64_t anomalies(AnomalyKind k) const { return an.anomalies().count(k); }
};

inline constexpr std::uint32_t kIsnI = 1000, kIsnR = 5000000;

// Handshake + MPA Request/Reply; returns the writers positioned after them.
inline void negotiate(Harness& h, StreamWriter& ini, StreamWriter& res, bool markers, bool crc) {
  h.send({0, kIsnI, {}, 0x02});
  h.send({1, kIsnR, {}, 0x12});
  ini.start_seq = kIsnI + 1;
  res.start_seq = kIsnR + 1;
  const Buf req = mpa_frame(true, markers, crc), rep = mpa_frame(false, markers, crc);
  h.send({0, ini.start_seq, req});
  h.send({1, res.start_seq, rep});
  ini.start_seq += std::uint32_t(req.size());
  res.start_seq += std::uint32_t(rep.size());
  ini.markers = res.markers = markers;
  ini.base = ini.start_seq;
  res.base = res.start_seq;
  ini.crc = res.crc = crc;
}

// Cuts a writer's wire bytes into segments of the given sizes (cycling).
inline std::vector<Segment> cut(const StreamWriter& w, int dir, std::vector<std::size_t> sizes) {
  std::vector<Segment> out;
  std::size_t off = 0, k = 0;
  while (off < w.wire.size()) {
    const std::size_t n = std::min(sizes[k++ % sizes.size()], w.wire.size() - off);
    out.push_back({dir, w.start_seq + std::uint32_t(off), Buf(w.wire.begin() + std::ptrdiff_t(off), w.wire.begin() + std::ptrdiff_t(off + n))});
    off += n;
  }
  return out;
}


}  // namespace iwarp_fixture
