#include "exporters/report.h"

#include <arpa/inet.h>

#include <cstdio>

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

std::string src_address(const decode::DecodedPacket& p) {
  if (p.ipv4) return ntop(AF_INET, p.ipv4->src.data());
  if (p.ipv6) return ntop(AF_INET6, p.ipv6->src.data());
  if (p.grh) return ntop(AF_INET6, p.grh->sgid.data());
  if (p.lrh) return lid(p.lrh->slid);
  return "";
}

std::string dst_address(const decode::DecodedPacket& p) {
  if (p.ipv4) return ntop(AF_INET, p.ipv4->dst.data());
  if (p.ipv6) return ntop(AF_INET6, p.ipv6->dst.data());
  if (p.grh) return ntop(AF_INET6, p.grh->dgid.data());
  if (p.lrh) return lid(p.lrh->dlid);
  return "";
}

}  // namespace rdmadiag::exporters
