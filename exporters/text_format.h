// printf-style formatting into a std::string, for the report writers' fixed-width lines.
#pragma once
#include <cstdio>
#include <string>

namespace rdmadiag::exporters {

// Lines longer than 511 characters are cut (no report line comes close).
template <typename... A>
std::string fmt(const char* f, A... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace rdmadiag::exporters
