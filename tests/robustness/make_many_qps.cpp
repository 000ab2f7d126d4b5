// Writes a pcap of N RoCEv2 SEND-only frames, each to a different destination
// QP (1, 2, ... N) with a valid ICRC: the capture that checks the analysis keeps
// its memory bounded however many flows a capture holds.
// usage: make_many_qps OUTPUT.pcap N
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "decode/crc.h"

using namespace rdmadiag::decode;

namespace {

void put16(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, v >> 16);
  put16(p + 2, v & 0xffff);
}
void put32le(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_many_qps OUTPUT.pcap N\n");
    return 2;
  }
  const unsigned long count = std::strtoul(argv[2], nullptr, 10);
  if (count == 0 || count > 0xffffff) {
    std::fprintf(stderr, "make_many_qps: N must be 1..16777215 (24-bit QP numbers)\n");
    return 2;
  }
  std::FILE* out = std::fopen(argv[1], "wb");
  if (!out) {
    std::perror(argv[1]);
    return 1;
  }
  std::array<std::uint8_t, 24> file_header{};
  put32le(&file_header[0], 0xa1b2c3d4);
  file_header[4] = 2;
  file_header[6] = 4;
  put32le(&file_header[16], 65535);
  put32le(&file_header[20], 1);  // Ethernet
  std::fwrite(file_header.data(), 1, file_header.size(), out);

  // Ethernet + IPv4 + UDP(4791) + BTH + ICRC, 58 bytes.
  constexpr std::size_t kLen = 14 + 20 + 8 + 12 + 4;
  std::array<std::uint8_t, kLen> f{};
  f[0] = 0x02, f[5] = 0x01, f[6] = 0x02, f[11] = 0x02;
  put16(&f[12], 0x0800);
  std::uint8_t* ip = &f[14];
  ip[0] = 0x45;
  put16(ip + 2, 20 + 8 + 12 + 4);
  ip[6] = 0x40;  // DF
  ip[8] = 64;
  ip[9] = 17;
  put32(ip + 12, 0x0a4d0002);
  put32(ip + 16, 0x0a4d0001);
  std::uint8_t* udp = ip + 20;
  put16(udp, 49152);
  put16(udp + 2, 4791);
  put16(udp + 4, 8 + 12 + 4);
  std::uint8_t* bth = udp + 8;
  bth[0] = 0x04;  // RC SEND Only
  put16(bth + 2, 0xffff);

  std::vector<std::uint8_t> buf;
  buf.reserve(1 << 20);
  for (unsigned long i = 1; i <= count; ++i) {
    put32(bth + 4, static_cast<std::uint32_t>(i));        // dest QP (the top byte is reserved)
    put32(bth + 8, static_cast<std::uint32_t>(i * 7) & 0xffffff);  // PSN, AckReq clear
    put16(ip + 10, 0);
    std::uint32_t sum = 0;
    for (int k = 0; k < 20; k += 2) sum += ip[k] << 8 | ip[k + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    put16(ip + 10, ~sum & 0xffff);
    const std::uint32_t icrc = compute_icrc({IcrcInput::Kind::roce_v2_ipv4, Bytes(ip, 20), Bytes(udp, 8),
                                             Bytes(bth, 12), Bytes(), Bytes()});
    put32le(&f[kLen - 4], icrc);  // the ICRC goes on the wire least significant byte first
    std::array<std::uint8_t, 16> rec{};
    put32le(&rec[0], static_cast<std::uint32_t>(1700000000 + i / 1000000));
    put32le(&rec[4], static_cast<std::uint32_t>(i % 1000000));
    put32le(&rec[8], kLen);
    put32le(&rec[12], kLen);
    buf.insert(buf.end(), rec.begin(), rec.end());
    buf.insert(buf.end(), f.begin(), f.end());
    if (buf.size() > (1 << 20) - 128) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), out);
  if (std::fclose(out) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  return 0;
}
