#include "exporters/report.h"

#include <arpa/inet.h>

#include <cstdio>

#include "decode/endpoints.h"

namespace rdmadiag::exporters {

namespace {
std::string ntop(int af, const void* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  return inet_ntop(af, a, buf, sizeof buf) ? std::string(buf) : std::string("?");
}
std::string lid(std::uint16_t l) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "LID %u", l);
  return buf;
}
}  // namespace

std::string hex(std::uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

// The ends the analyses key flows by (decode/endpoints.h: one rule), as text.
std::string address(const decode::DecodedPacket& p, bool source) {
  const decode::Endpoints e = decode::endpoints_of(p);
  const auto& a = source ? e.src : e.dst;
  switch (e.addr_len) {
    case 2: return lid(static_cast<std::uint16_t>(a[0] << 8 | a[1]));
    case 4: return ntop(AF_INET, a.data());
    case 16: return ntop(AF_INET6, a.data());
    default: return "";
  }
}

std::string src_address(const decode::DecodedPacket& p) { return address(p, true); }
std::string dst_address(const decode::DecodedPacket& p) { return address(p, false); }

}  // namespace rdmadiag::exporters
