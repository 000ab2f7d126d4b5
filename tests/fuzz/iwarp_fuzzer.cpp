// Fuzz target: one TCP connection carrying iWARP (MPA negotiation, FPDUs with
// markers and CRC32c, DDP/RDMAP) through TCP reassembly and the iWARP pass of
// the Analyzer. The fuzzer controls segment boundaries, sequence numbers
// (holes, overlaps, retransmissions with different bytes, wrap-around), flags
// and payload bytes; the Ethernet/IPv4/TCP headers around them are built here,
// so mutations reach the stream code instead of breaking the IP header.
// Input: [isn A be32][isn B be32] then segments:
//   [control][seq offset be32][ack offset be32][payload length be16][payload]
// control: bit0 direction (0 A->B, 1 B->A), bit1 SYN, bit2 FIN, bit3 RST,
// bit4 ACK, bit5 the snap length cut the payload (wire length 1448 bytes more).
#include <cstdint>
#include <vector>

#include "decode/analyzer.h"
#include "decode/packet.h"
#include "exporters/iwarp_json.h"
#include "tests/fuzz/fuzz_input.h"

using namespace rdmadiag;

namespace {

void put16(std::vector<std::uint8_t>& f, std::size_t at, std::uint32_t v) {
  f[at] = static_cast<std::uint8_t>(v >> 8);
  f[at + 1] = static_cast<std::uint8_t>(v);
}
void put32(std::vector<std::uint8_t>& f, std::size_t at, std::uint32_t v) {
  put16(f, at, v >> 16);
  put16(f, at + 2, v & 0xffff);
}

// Ethernet + IPv4 + TCP (no options) around `payload`.
void build_frame(std::vector<std::uint8_t>& f, bool b_to_a, std::uint8_t tcp_flags, std::uint32_t seq,
                 std::uint32_t ack, std::span<const std::uint8_t> payload, std::uint32_t wire_payload) {
  constexpr std::size_t kHeaders = 14 + 20 + 20;
  f.assign(kHeaders, 0);
  f.insert(f.end(), payload.begin(), payload.end());
  const std::uint8_t mac_a = 0x0a, mac_b = 0x0b;
  f[5] = b_to_a ? mac_b : mac_a;
  f[11] = b_to_a ? mac_a : mac_b;
  put16(f, 12, 0x0800);
  f[14] = 0x45;
  put16(f, 16, 40 + wire_payload);
  f[22] = 64;
  f[23] = 6;
  put32(f, 26, b_to_a ? 0x0a4d0002 : 0x0a4d0001);  // 10.77.0.1 <-> 10.77.0.2, as in the lab captures
  put32(f, 30, b_to_a ? 0x0a4d0001 : 0x0a4d0002);
  put16(f, 34, b_to_a ? 21791 : 41000);  // server port / client port
  put16(f, 36, b_to_a ? 41000 : 21791);
  put32(f, 38, seq);
  put32(f, 42, ack);
  f[46] = 5 << 4;
  f[47] = tcp_flags;
  put16(f, 48, 65535);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::InputCursor in(data, size);
  const std::uint32_t isn[2] = {in.be32(), in.be32()};
  decode::Analyzer analyzer;
  decode::DecodedPacket p;
  decode::PacketAnalysis a;
  std::vector<std::uint8_t> frame;
  frame.reserve(2048);
  double ts = 1.7e9;
  std::uint64_t frame_no = 0;
  while (!in.empty() && frame_no < 4096) {
    const std::uint8_t control = in.u8();
    const int dir = control & 1;
    const std::uint32_t seq = isn[dir] + in.be32();
    const std::uint32_t ack = isn[dir ^ 1] + in.be32();
    const auto payload = in.take(in.be16() & 0x0fff);
    std::uint8_t tcp_flags = 0;
    if (control & 2) tcp_flags |= 0x02;
    if (control & 4) tcp_flags |= 0x01;
    if (control & 8) tcp_flags |= 0x04;
    if (control & 16) tcp_flags |= 0x10;
    const auto captured = static_cast<std::uint32_t>(payload.size());
    const std::uint32_t wire_payload = (control & 32) ? captured + 1448 : captured;
    build_frame(frame, dir == 1, tcp_flags, seq, ack, payload, wire_payload);
    p = decode::DecodedPacket{};
    const auto caplen = static_cast<std::uint32_t>(frame.size());
    decode::decode_frame(decode::linktype::kEthernet, frame, caplen + (wire_payload - captured), {}, p);
    ts += 1e-5;
    analyzer.add(p, ++frame_no, ts, a);
    for (const auto& u : a.iwarp) (void)exporters::iwarp_pdu_json(u, frame_no).dump();
  }
  analyzer.finish();
  (void)exporters::iwarp_report_json(analyzer.iwarp()).dump();
  return 0;
}
