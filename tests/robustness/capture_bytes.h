// Capture files built byte by byte from the formats' text, for the reader
// tests: fields in either byte order, pcapng blocks, and a temporary file.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmadiag::testing {

struct CaptureBytes {
  bool big = false;  // big-endian fields (this machine is little-endian)
  std::vector<std::uint8_t> out;
  void u8(std::uint8_t v) { out.push_back(v); }
  void u16(std::uint16_t v) {
    for (int i = 0; i < 2; ++i) u8(static_cast<std::uint8_t>(v >> (8 * (big ? 1 - i : i))));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<std::uint8_t>(v >> (8 * (big ? 3 - i : i))));
  }
  void u64(std::uint64_t v) {  // a pcapng option value in the section's byte order
    for (int i = 0; i < 8; ++i) u8(static_cast<std::uint8_t>(v >> (8 * (big ? 7 - i : i))));
  }
  void bytes(const std::vector<std::uint8_t>& b) { out.insert(out.end(), b.begin(), b.end()); }
  // A pcapng block of `type` around the body `fill` writes: type, length, body
  // padded to 4, length again.
  template <typename F>
  void block(std::uint32_t type, F fill) {
    const std::size_t start = out.size();
    u32(type), u32(0);
    fill();
    while (out.size() % 4) u8(0);
    const std::uint32_t len = static_cast<std::uint32_t>(out.size() - start + 4);
    u32(len);
    CaptureBytes patch{big, {}};
    patch.u32(len);
    std::copy(patch.out.begin(), patch.out.end(), out.begin() + static_cast<std::ptrdiff_t>(start + 4));
  }
};

// The bytes in a file under /tmp for as long as it lives.
struct TempFile {
  std::string path;
  explicit TempFile(const std::vector<std::uint8_t>& bytes) {
    char name[] = "/tmp/rdmadiag_capture_XXXXXX";
    const int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    path = name;
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { ::unlink(path.c_str()); }
};

}  // namespace rdmadiag::testing
