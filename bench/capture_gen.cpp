// Generator of large, realistic RDMA captures for the benchmarks: many reliable
// connections (RC QPs) carrying a mix of RDMA WRITE, READ, SEND and ATOMIC
// operations, segmented at the path MTU (IBA 9.7.1), answered with coalesced
// ACKs, READ responses and atomic ACKs (IBA 9.7.5), with some requests lost
// before the capture point and recovered by NAK (PSN sequence error) and a
// go-back-N resend (IBA 9.7.5.2.2). Every packet carries a correct ICRC (and a
// VCRC on native IB), computed by decode/crc.h; iWARP FPDUs carry a correct
// MPA CRC32c (RFC 5044 section 6). Encapsulations: RoCEv2 over IPv4 and IPv6,
// RoCEv1, native IB (pcap link type 247) and iWARP (RDMA WRITEs over MPA/TCP).
//
// Usage: gen_capture -o FILE [-n PACKETS] [--qps N] [--encap E] [--loss F]
//                    [--min-payload B] [--max-payload B] [--seed S]
// E: roce_v2 (default, IPv4), roce_v2_ipv6, roce_v1, ib, iwarp, mix (all
// Ethernet ones interleaved by connection).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/capture_gen.h"
#include "decode/crc.h"
#include "decode/crc32c.h"
#include "decode/mpa.h"

namespace {

using rdmadiag::bench::Encap;
using rdmadiag::bench::FrameSink;
using rdmadiag::decode::Bytes;
using rdmadiag::decode::IcrcInput;


// Big-endian field writers over a frame buffer.
struct Frame {
  std::array<std::uint8_t, 9200> b{};
  std::size_t n = 0;
  std::uint8_t* put(std::size_t len) {
    std::uint8_t* p = b.data() + n;
    std::memset(p, 0, len);
    n += len;
    return p;
  }
  void u8(std::uint8_t v) { *put(1) = v; }
  void u16(std::uint16_t v) {
    std::uint8_t* p = put(2);
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
  }
  void u24(std::uint32_t v) {
    std::uint8_t* p = put(3);
    p[0] = static_cast<std::uint8_t>(v >> 16);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v);
  }
  void u32(std::uint32_t v) {
    u16(static_cast<std::uint16_t>(v >> 16));
    u16(static_cast<std::uint16_t>(v));
  }
  void u64(std::uint64_t v) {
    u32(static_cast<std::uint32_t>(v >> 32));
    u32(static_cast<std::uint32_t>(v));
  }
  void le32(std::uint32_t v) {
    std::uint8_t* p = put(4);
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void set16(std::size_t at, std::uint16_t v) {
    b[at] = static_cast<std::uint8_t>(v >> 8);
    b[at + 1] = static_cast<std::uint8_t>(v);
  }
  Bytes span(std::size_t from, std::size_t to) const { return Bytes(b.data() + from, to - from); }
};

std::uint16_t ipv4_checksum(const std::uint8_t* h) {
  std::uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<std::uint32_t>(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

// UDP over IPv6: the one's complement sum over the pseudo-header (addresses,
// length, next header) and the UDP header and payload (RFC 8200 section 8.1).
std::uint16_t udp6_checksum(const std::uint8_t* ip6, const std::uint8_t* udp, std::size_t len) {
  std::uint32_t sum = 0;
  auto add = [&sum](const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n & 1) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
  };
  add(ip6 + 8, 32);
  sum += static_cast<std::uint32_t>(len) + 17;
  add(udp, len);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  const auto c = static_cast<std::uint16_t>(~sum);
  return c ? c : 0xFFFF;
}

constexpr std::uint8_t kSendFirst = 0x00, kSendMiddle = 0x01, kSendLast = 0x02, kSendOnly = 0x04;
constexpr std::uint8_t kWriteFirst = 0x06, kWriteMiddle = 0x07, kWriteLast = 0x08, kWriteOnly = 0x0A;
constexpr std::uint8_t kReadRequest = 0x0C, kReadRespFirst = 0x0D, kReadRespMiddle = 0x0E, kReadRespLast = 0x0F,
                       kReadRespOnly = 0x10, kAck = 0x11, kAtomicAck = 0x12, kFetchAdd = 0x14, kCnp = 0x81;
constexpr std::uint32_t kPsnMask = 0xFFFFFF;

// The extended headers after the BTH (IBA 9.3.4).
struct IbPacket {
  std::uint8_t opcode = 0;
  std::uint32_t dest_qp = 0, psn = 0;
  bool ack_req = false;
  bool reth = false;
  std::uint64_t va = 0;
  std::uint32_t rkey = 0, dma_len = 0;
  bool aeth = false;
  std::uint8_t syndrome = 0x1F;
  std::uint32_t msn = 0;
  bool atomic_eth = false, atomic_ack = false;
  std::uint32_t payload = 0;
  std::uint8_t ecn = 2;   // IP ECN / GRH traffic class low bits: ECT(0); 3 is CE; 0 not ECN-capable
  bool cnp = false;       // a CNP: 16 reserved (zero) bytes after the BTH
};

// One end of a connection at the network layer.
struct Host {
  std::array<std::uint8_t, 16> ip{};  // IPv4 in the first 4 bytes
  std::uint16_t lid = 0;
  std::array<std::uint8_t, 6> mac{};
};

class Generator {
 public:
  Generator(const FrameSink& out, const rdmadiag::bench::GenOptions& o)
      : out_(out), rng_(o.seed), loss_(o.loss), ce_(o.ce), min_pay_(o.min_payload), max_pay_(o.max_payload) {}
  std::uint64_t packets() const { return packets_; }
  std::uint64_t now_ns() const { return ts_ns_; }

  // ---------------------------------------------------------------- IB-family frames
  // An IPv4 header (DF, TTL 64, UDP) for a RoCEv2 packet of ib_len bytes from the BTH on.
  void put_ipv4(Frame& f, const Host& src, const Host& dst, std::uint8_t ecn, std::size_t ib_len) {
    std::uint8_t* h = f.put(20);
    h[0] = 0x45;
    h[1] = ecn;
    const std::uint16_t total = static_cast<std::uint16_t>(20 + 8 + ib_len);
    h[2] = static_cast<std::uint8_t>(total >> 8);
    h[3] = static_cast<std::uint8_t>(total);
    const std::uint16_t id = ip_id_++;
    h[4] = static_cast<std::uint8_t>(id >> 8);
    h[5] = static_cast<std::uint8_t>(id);
    h[6] = 0x40;  // DF
    h[8] = 64;
    h[9] = 17;
    std::memcpy(h + 12, src.ip.data(), 4);
    std::memcpy(h + 16, dst.ip.data(), 4);
    const std::uint16_t c = ipv4_checksum(h);
    h[10] = static_cast<std::uint8_t>(c >> 8);
    h[11] = static_cast<std::uint8_t>(c);
  }

  // The BTH and the extension headers the packet has.
  static void put_bth_and_extensions(Frame& f, const IbPacket& ip, std::uint32_t pad) {
    f.u8(ip.opcode);
    f.u8(static_cast<std::uint8_t>(pad << 4));
    f.u16(0xFFFF);  // default P_Key
    f.u8(0);
    f.u24(ip.dest_qp);
    f.u8(ip.ack_req ? 0x80 : 0);
    f.u24(ip.psn);
    if (ip.reth) {
      f.u64(ip.va);
      f.u32(ip.rkey);
      f.u32(ip.dma_len);
    }
    if (ip.aeth) {
      f.u8(ip.syndrome);
      f.u24(ip.msn);
    }
    if (ip.atomic_ack) f.u64(0x1122334455667788ull);
    if (ip.atomic_eth) {
      f.u64(ip.va);
      f.u32(ip.rkey);
      f.u64(1);  // add value
      f.u64(0);
    }
  }

  void emit_ib(Encap e, const Host& src, const Host& dst, std::uint16_t sport, const IbPacket& ip) {
    Frame f;
    const std::uint32_t pad = (4 - (ip.payload & 3)) & 3;
    std::size_t net_start = 0, udp_start = 0, lrh_start = 0;
    if (e != Encap::ib) {  // Ethernet
      std::memcpy(f.put(6), dst.mac.data(), 6);
      std::memcpy(f.put(6), src.mac.data(), 6);
      f.u16(e == Encap::roce_v2_ipv4 ? 0x0800 : e == Encap::roce_v2_ipv6 ? 0x86DD : 0x8915);
    } else {
      lrh_start = f.n;
      f.u8(0x00);          // VL 0, LVer 0
      f.u8(0x02);          // SL 0, LNH 2 (IBA local)
      f.u16(dst.lid);
      f.u16(0);            // packet length, set below
      f.u16(src.lid);
    }
    const std::size_t ext = (ip.reth ? 16 : 0) + (ip.aeth ? 4 : 0) + (ip.atomic_eth ? 28 : 0) + (ip.atomic_ack ? 8 : 0);
    const std::size_t ib_len = 12 + ext + ip.payload + pad + 4;  // BTH .. ICRC
    net_start = f.n;
    if (e == Encap::roce_v2_ipv4) {
      put_ipv4(f, src, dst, ip.ecn, ib_len);
    } else if (e == Encap::roce_v2_ipv6 || e == Encap::roce_v1) {
      // IPv6 header or GRH (same layout; next header UDP or IBA's 0x1B).
      f.u32(0x60000000u | std::uint32_t{ip.ecn} << 20 | (sport & 0xFFFFFu));
      f.u16(static_cast<std::uint16_t>(e == Encap::roce_v1 ? ib_len : 8 + ib_len));
      f.u8(e == Encap::roce_v1 ? 0x1B : 17);
      f.u8(64);
      std::memcpy(f.put(16), src.ip.data(), 16);
      std::memcpy(f.put(16), dst.ip.data(), 16);
    }
    if (e == Encap::roce_v2_ipv4 || e == Encap::roce_v2_ipv6) {
      udp_start = f.n;
      f.u16(sport);
      f.u16(4791);
      f.u16(static_cast<std::uint16_t>(8 + ib_len));
      f.u16(0);  // no UDP checksum, as RoCE NICs send
    }
    const std::size_t bth_start = f.n;
    put_bth_and_extensions(f, ip, pad);
    std::uint8_t* pay = f.put(ip.payload + pad);
    for (std::uint32_t i = 0; i < ip.payload; ++i) pay[i] = ip.cnp ? 0 : static_cast<std::uint8_t>(ip.psn + i);
    IcrcInput in{};
    switch (e) {
      case Encap::roce_v2_ipv4: in.kind = IcrcInput::Kind::roce_v2_ipv4; break;
      case Encap::roce_v2_ipv6: in.kind = IcrcInput::Kind::roce_v2_ipv6; break;
      case Encap::roce_v1: in.kind = IcrcInput::Kind::roce_v1; break;
      default: in.kind = IcrcInput::Kind::ib_local; break;
    }
    in.net = e == Encap::ib ? f.span(lrh_start, lrh_start + 8) : f.span(net_start, udp_start ? udp_start : bth_start);
    if (udp_start) in.udp = f.span(udp_start, udp_start + 8);
    in.bth = f.span(bth_start, bth_start + 12);
    in.rest = f.span(bth_start + 12, f.n);
    if (e == Encap::ib) f.set16(lrh_start + 4, static_cast<std::uint16_t>((8 + ib_len) / 4));
    if (e == Encap::ib) in.net = f.span(lrh_start, lrh_start + 8);
    f.le32(rdmadiag::decode::compute_icrc(in));
    // IPv6 forbids a zero UDP checksum (RFC 8200 section 8.1); the ICRC masks it, so it goes in last.
    if (e == Encap::roce_v2_ipv6) {
      const std::uint16_t c = udp6_checksum(f.b.data() + net_start, f.b.data() + udp_start, f.n - udp_start);
      f.set16(udp_start + 6, c);
    }
    if (e == Encap::ib) {
      const std::uint16_t v = rdmadiag::decode::vcrc16(f.span(lrh_start, f.n));
      f.u8(static_cast<std::uint8_t>(v));
      f.u8(static_cast<std::uint8_t>(v >> 8));
    }
    write(f);
  }

  // ---------------------------------------------------------------- iWARP frames
  void emit_tcp(const Host& src, const Host& dst, std::uint16_t sport, std::uint16_t dport, std::uint32_t seq,
                std::uint32_t ack, std::uint8_t flags, Bytes payload) {
    Frame f;
    std::memcpy(f.put(6), dst.mac.data(), 6);
    std::memcpy(f.put(6), src.mac.data(), 6);
    f.u16(0x0800);
    const std::size_t ip_start = f.n;
    std::uint8_t* h = f.put(20);
    h[0] = 0x45;
    const std::uint16_t total = static_cast<std::uint16_t>(20 + 20 + payload.size());
    h[2] = static_cast<std::uint8_t>(total >> 8);
    h[3] = static_cast<std::uint8_t>(total);
    const std::uint16_t id = ip_id_++;
    h[4] = static_cast<std::uint8_t>(id >> 8);
    h[5] = static_cast<std::uint8_t>(id);
    h[6] = 0x40;
    h[8] = 64;
    h[9] = 6;
    std::memcpy(h + 12, src.ip.data(), 4);
    std::memcpy(h + 16, dst.ip.data(), 4);
    const std::uint16_t c = ipv4_checksum(f.b.data() + ip_start);
    f.b[ip_start + 10] = static_cast<std::uint8_t>(c >> 8);
    f.b[ip_start + 11] = static_cast<std::uint8_t>(c);
    f.u16(sport);
    f.u16(dport);
    f.u32(seq);
    f.u32(ack);
    f.u8(0x50);
    f.u8(flags);
    f.u16(65535);
    f.u32(0);  // checksum (not computed, as with offload), urgent pointer
    if (!payload.empty()) std::memcpy(f.put(payload.size()), payload.data(), payload.size());
    write(f);
  }

  void write(const Frame& f) {
    ts_ns_ += 80 + (rng_() & 63);
    out_(ts_ns_, Bytes(f.b.data(), f.n));
    ++packets_;
  }

  std::mt19937_64& rng() { return rng_; }
  bool lose() { return loss_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < loss_; }
  // A switch on the path marks the packet Congestion Experienced.
  bool mark_ce() { return ce_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < ce_; }
  // Payload of a message's last (or only) packet; the others carry a full PMTU.
  std::uint32_t payload_size() {
    return std::min(pmtu(), std::uniform_int_distribution<std::uint32_t>(min_pay_, max_pay_)(rng_));
  }
  // The path MTU: the largest IBA MTU (256 .. 4096) within the largest payload.
  std::uint32_t pmtu() const {
    std::uint32_t m = 256;
    while (m * 2 <= max_pay_ && m < 4096) m *= 2;
    return m;
  }

 private:
  const FrameSink& out_;
  std::mt19937_64 rng_;
  double loss_, ce_;
  std::uint32_t min_pay_, max_pay_;
  std::uint64_t ts_ns_ = 1'700'000'000ull * 1'000'000'000ull;
  std::uint64_t packets_ = 0;
  std::uint16_t ip_id_ = 1;
};

// One RC connection: requester (client) -> responder (server) and back.
class RcConnection {
 public:
  RcConnection(Generator& g, Encap e, std::uint32_t index, std::uint32_t clients, std::uint32_t servers)
      : g_(g), e_(e), req_qp_(0x100 + index * 2), resp_qp_(0x101 + index * 2),
        psn_(static_cast<std::uint32_t>(g.rng()() & kPsnMask)), sport_(static_cast<std::uint16_t>(49152 + index)) {
    const bool v4 = e == Encap::roce_v2_ipv4;
    // `clients` client hosts and `servers` servers (16 and 4 by default): several QPs share each address pair.
    const auto c = static_cast<std::uint8_t>(1 + index % clients), sv = static_cast<std::uint8_t>(1 + index % servers);
    client_.ip = v4 ? std::array<std::uint8_t, 16>{10, 1, 0, c}
                    : std::array<std::uint8_t, 16>{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 1, c};
    server_.ip = v4 ? std::array<std::uint8_t, 16>{10, 2, 0, sv}
                    : std::array<std::uint8_t, 16>{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 2, sv};
    client_.lid = static_cast<std::uint16_t>(0x10 + c - 1);
    server_.lid = static_cast<std::uint16_t>(0x100 + sv - 1);
    client_.mac = {0x02, 0, 0, 0, 1, static_cast<std::uint8_t>(c - 1)};
    server_.mac = {0x02, 0, 0, 0, 2, static_cast<std::uint8_t>(sv - 1)};
  }

  // One operation and its answers; loss and recovery included.
  void operation() {
    const unsigned pick = static_cast<unsigned>(g_.rng()() % 100);
    if (pick < 50) message(kWriteFirst);
    else if (pick < 75) message(kSendFirst);
    else if (pick < 92) read();
    else atomic();
  }

 private:
  void request(IbPacket p, bool allow_loss = true) {
    if (allow_loss && g_.lose()) {
      lost_ = true;
      return;
    }
    const bool ce = e_ != Encap::ib && g_.mark_ce();  // native IB signals congestion in FECN/BECN, not ECN
    if (ce) p.ecn = 3;
    g_.emit_ib(e_, client_, server_, sport_, p);
    if (ce) congestion_notification();
  }
  // The receiver (DCQCN's notification point) answers a CE mark with a CNP to
  // the sender's QP, at most one per kCnpIntervalNs per QP (Annex A17.9).
  void congestion_notification() {
    constexpr std::uint64_t kCnpIntervalNs = 50'000;
    if (cnp_sent_ && g_.now_ns() - last_cnp_ns_ < kCnpIntervalNs) return;
    cnp_sent_ = true;
    last_cnp_ns_ = g_.now_ns();
    IbPacket c;
    c.opcode = kCnp;
    c.cnp = true;
    c.payload = 16;
    c.ecn = 0;
    response(c);
  }
  void response(IbPacket p) {
    p.dest_qp = req_qp_;
    g_.emit_ib(e_, server_, client_, sport_, p);
  }
  void ack(std::uint32_t psn) {
    IbPacket a;
    a.opcode = kAck;
    a.psn = psn;
    a.aeth = true;
    a.msn = ++msn_;
    response(a);
  }

  // WRITE or SEND of one message: PMTU-sized segments, last one asks for an ACK
  // every few messages (ACK coalescing); a lost segment is NAKed and resent.
  void message(std::uint8_t first_op) {
    const bool write = first_op == kWriteFirst;
    const std::uint32_t segments = 1 + static_cast<std::uint32_t>(g_.rng()() % 4);
    const std::uint32_t last_len = g_.payload_size();
    const std::uint32_t total = (segments - 1) * g_.pmtu() + last_len;
    std::vector<IbPacket> pkts;
    for (std::uint32_t i = 0; i < segments; ++i) {
      IbPacket p;
      const bool only = segments == 1, first = i == 0, last = i + 1 == segments;
      p.opcode = only ? (write ? kWriteOnly : kSendOnly)
                      : first ? first_op : last ? (write ? kWriteLast : kSendLast) : (write ? kWriteMiddle : kSendMiddle);
      p.dest_qp = resp_qp_;
      p.psn = psn_;
      psn_ = (psn_ + 1) & kPsnMask;
      p.payload = last ? last_len : g_.pmtu();
      if (write && first) {
        p.reth = true;
        p.va = 0x7f0000000000ull + psn_ * 64ull;
        p.rkey = 0x1234;
        p.dma_len = total;
      }
      p.ack_req = last && (++since_ack_ % 4 == 0);
      pkts.push_back(p);
    }
    send_with_recovery(pkts);
    if (pkts.back().ack_req) ack(pkts.back().psn);
  }

  // Emits request packets; on a loss, the responder NAKs at the first later
  // packet and the requester resends from the lost PSN (go-back-N). A message's
  // last packet lost has no later packet to draw a NAK (IBA 9.7.5.2: a
  // responder NAKs only a PSN beyond the expected one): the requester resends it
  // when its timer expires, so the capture point sees it once, late.
  void send_with_recovery(const std::vector<IbPacket>& pkts) {
    lost_ = false;
    std::size_t lost_at = pkts.size();
    for (std::size_t i = 0; i < pkts.size(); ++i) {
      const bool was = lost_;
      request(pkts[i], !was);
      if (!was && lost_) lost_at = i;
    }
    if (lost_at == pkts.size()) return;
    if (lost_at + 1 == pkts.size()) {
      request(pkts[lost_at], false);
      return;
    }
    IbPacket nak;
    nak.opcode = kAck;
    nak.psn = pkts[lost_at].psn;
    nak.aeth = true;
    nak.syndrome = 0x60;  // NAK, PSN sequence error
    nak.msn = msn_;
    response(nak);
    for (std::size_t i = lost_at; i < pkts.size(); ++i) request(pkts[i], false);
  }

  // A request to the responder's QP at the next PSN, addressing remote memory.
  IbPacket remote_request(std::uint8_t opcode, std::uint64_t va, std::uint32_t rkey) const {
    IbPacket r;
    r.opcode = opcode;
    r.dest_qp = resp_qp_;
    r.psn = psn_;
    r.va = va;
    r.rkey = rkey;
    return r;
  }

  void read() {
    IbPacket r = remote_request(kReadRequest, 0x7e0000000000ull, 0x4321);
    r.reth = true;
    const std::uint32_t segments = 1 + static_cast<std::uint32_t>(g_.rng()() % 4);
    const std::uint32_t last_len = g_.payload_size();
    const std::uint32_t pmtu = g_.pmtu();
    r.dma_len = (segments - 1) * pmtu + last_len;
    const std::uint32_t span = segments;
    psn_ = (psn_ + span) & kPsnMask;
    send_with_recovery({r});
    ++msn_;
    for (std::uint32_t i = 0; i < span; ++i) {
      IbPacket d;
      const bool only = span == 1, first = i == 0, last = i + 1 == span;
      d.opcode = only ? kReadRespOnly : first ? kReadRespFirst : last ? kReadRespLast : kReadRespMiddle;
      d.psn = (r.psn + i) & kPsnMask;
      d.aeth = first || last;
      d.msn = msn_;
      d.payload = last ? last_len : pmtu;
      response(d);
    }
  }

  void atomic() {
    IbPacket a = remote_request(kFetchAdd, 0x7d0000000000ull, 0x5678);
    a.atomic_eth = true;
    a.ack_req = true;
    psn_ = (psn_ + 1) & kPsnMask;
    send_with_recovery({a});
    IbPacket r;
    r.opcode = kAtomicAck;
    r.psn = a.psn;
    r.aeth = true;
    r.atomic_ack = true;
    r.msn = ++msn_;
    response(r);
  }

  Generator& g_;
  Encap e_;
  std::uint32_t req_qp_, resp_qp_;
  std::uint32_t psn_;
  std::uint16_t sport_;
  std::uint32_t msn_ = 0;
  std::uint32_t since_ack_ = 0;
  bool lost_ = false;
  bool cnp_sent_ = false;
  std::uint64_t last_cnp_ns_ = 0;
  Host client_, server_;
};

// One iWARP connection: TCP handshake, MPA Request/Reply (CRC on, no markers),
// then RDMA WRITEs (tagged DDP, one FPDU per segment) and bare TCP ACKs.
class IwarpConnection {
 public:
  IwarpConnection(Generator& g, std::uint32_t index) : g_(g), sport_(static_cast<std::uint16_t>(40000 + index)) {
    client_.ip = {10, 3, 0, static_cast<std::uint8_t>(1 + index % 16)};
    server_.ip = {10, 4, 0, static_cast<std::uint8_t>(1 + index % 4)};
    client_.mac = {0x02, 0, 0, 0, 3, static_cast<std::uint8_t>(index % 16)};
    server_.mac = {0x02, 0, 0, 0, 4, static_cast<std::uint8_t>(index % 4)};
    cseq_ = static_cast<std::uint32_t>(g.rng()());
    sseq_ = static_cast<std::uint32_t>(g.rng()());
  }

  void operation() {
    if (!open_) handshake();
    std::vector<std::uint8_t> seg;
    const std::uint32_t len = g_.payload_size();
    const std::uint16_t ulpdu = static_cast<std::uint16_t>(14 + len);
    seg.push_back(static_cast<std::uint8_t>(ulpdu >> 8));
    seg.push_back(static_cast<std::uint8_t>(ulpdu));
    seg.push_back(0xC1);  // DDP: tagged, last, DV 1
    seg.push_back(0x40);  // RDMAP: RV 1, RDMA Write
    for (int i = 3; i >= 0; --i) seg.push_back(static_cast<std::uint8_t>(0xAB00 >> (8 * i)));  // STag
    for (int i = 7; i >= 0; --i) seg.push_back(static_cast<std::uint8_t>(offset_ >> (8 * i)));  // TO
    for (std::uint32_t i = 0; i < len; ++i) seg.push_back(static_cast<std::uint8_t>(i));
    seg.resize(seg.size() + rdmadiag::decode::mpa_pad(ulpdu), 0);
    const std::uint32_t crc = rdmadiag::decode::crc32c(Bytes(seg.data(), seg.size()));
    for (int i = 0; i < 4; ++i) seg.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
    offset_ += len;
    g_.emit_tcp(client_, server_, sport_, 5201, cseq_, sseq_, 0x18, Bytes(seg.data(), seg.size()));
    cseq_ += static_cast<std::uint32_t>(seg.size());
    if (++since_ack_ % 2 == 0) g_.emit_tcp(server_, client_, 5201, sport_, sseq_, cseq_, 0x10, {});
  }

 private:
  void handshake() {
    open_ = true;
    g_.emit_tcp(client_, server_, sport_, 5201, cseq_++, 0, 0x02, {});
    g_.emit_tcp(server_, client_, 5201, sport_, sseq_++, cseq_, 0x12, {});
    g_.emit_tcp(client_, server_, sport_, 5201, cseq_, sseq_, 0x10, {});
    auto mpa = [](std::string_view key) {
      std::vector<std::uint8_t> m(key.begin(), key.end());
      m.push_back(0x40);  // C: CRC on, no markers
      m.push_back(1);     // revision 1
      m.push_back(0);
      m.push_back(0);     // no private data
      return m;
    };
    const auto req = mpa("MPA ID Req Frame"), rep = mpa("MPA ID Rep Frame");
    g_.emit_tcp(client_, server_, sport_, 5201, cseq_, sseq_, 0x18, Bytes(req.data(), req.size()));
    cseq_ += static_cast<std::uint32_t>(req.size());
    g_.emit_tcp(server_, client_, 5201, sport_, sseq_, cseq_, 0x18, Bytes(rep.data(), rep.size()));
    sseq_ += static_cast<std::uint32_t>(rep.size());
  }

  Generator& g_;
  std::uint16_t sport_;
  Host client_, server_;
  std::uint32_t cseq_ = 0, sseq_ = 0;
  std::uint64_t offset_ = 0;
  std::uint32_t since_ack_ = 0;
  bool open_ = false;
};

}  // namespace

namespace rdmadiag::bench {

bool parse_encap(const std::string& name, std::vector<Encap>& kinds) {
  if (name == "roce_v2") kinds = {Encap::roce_v2_ipv4};
  else if (name == "roce_v2_ipv6") kinds = {Encap::roce_v2_ipv6};
  else if (name == "roce_v1") kinds = {Encap::roce_v1};
  else if (name == "ib") kinds = {Encap::ib};
  else if (name == "iwarp") kinds = {Encap::iwarp};
  else if (name == "mix") kinds = {Encap::roce_v2_ipv4, Encap::roce_v2_ipv6, Encap::roce_v1, Encap::iwarp};
  else return false;
  return true;
}

std::uint32_t generate(const GenOptions& o, const FrameSink& sink) {
  std::vector<Encap> kinds;
  if (!parse_encap(o.encap, kinds) || o.clients == 0 || o.clients > 254 || o.servers == 0 || o.servers > 254) return 0;
  Generator g(sink, o);
  std::vector<std::unique_ptr<RcConnection>> rc;
  std::vector<std::unique_ptr<IwarpConnection>> iw;
  std::vector<std::pair<bool, std::size_t>> conns;  // (iWARP?, index)
  for (std::uint32_t i = 0; i < o.qps; ++i) {
    const Encap e = kinds[i % kinds.size()];
    if (e == Encap::iwarp) {
      conns.emplace_back(true, iw.size());
      iw.push_back(std::make_unique<IwarpConnection>(g, i));
    } else {
      conns.emplace_back(false, rc.size());
      rc.push_back(std::make_unique<RcConnection>(g, e, i, o.clients, o.servers));
    }
  }
  while (g.packets() < o.packets) {
    const auto& [is_iwarp, idx] = conns[g.rng()() % conns.size()];
    if (is_iwarp) iw[idx]->operation();
    else rc[idx]->operation();
  }
  return kinds.front() == Encap::ib ? 247 : 1;
}

}  // namespace rdmadiag::bench
