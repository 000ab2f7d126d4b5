// Bytes from the wire or a peer (an NVMe NQN, a perftest peer's message) for a
// terminal or a log line: printable ASCII as it is, every other byte (and the
// backslash and double quote, so the result can be quoted) as \xNN, as
// tcpdump shows them: such bytes cannot send control sequences to a terminal.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace rdmadiag::exporters {

inline std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char hex[8];
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && b != '\\' && b != '"') {
      out += c;
    } else {
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

}  // namespace rdmadiag::exporters
