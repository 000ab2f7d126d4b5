// printf-style formatting into a std::string, for the report writers' fixed-width lines.
#pragma once
#include <cstdio>
#include <cstdint>
#include <string>

namespace rdmadiag::exporters {

// Lines longer than 511 characters are cut (no report line comes close).
template <typename... A>
std::string fmt(const char* f, A... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Names a flow's capture point in text, when the input holds several
// (decode::DecodedPacket::capture_point, 0: none): " [interface N]".
inline std::string point_label(std::uint16_t point) {
  return point ? fmt(" [interface %u]", static_cast<unsigned>(point - 1)) : std::string();
}

}  // namespace rdmadiag::exporters
