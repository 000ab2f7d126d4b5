#include "decode/crc32c.h"

#include <array>

namespace rdmadiag::decode {

namespace {
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[0][i] = c;
  }
  // t[k][i]: the CRC of byte i followed by k zero bytes, so 8 bytes fold in one step.
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  return t;
}
constexpr Tables kTables = make_tables();
}  // namespace

std::uint32_t crc32c_update(std::uint32_t c, Bytes b) {
  std::size_t i = 0;
  const std::size_t n = b.size();
  for (; i + 8 <= n; i += 8) {
    const std::uint32_t lo = c ^ (std::uint32_t{b[i]} | std::uint32_t{b[i + 1]} << 8 | std::uint32_t{b[i + 2]} << 16 |
                                  std::uint32_t{b[i + 3]} << 24);
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][b[i + 4]] ^ kTables[2][b[i + 5]] ^ kTables[1][b[i + 6]] ^ kTables[0][b[i + 7]];
  }
  for (; i < n; ++i) c = (c >> 8) ^ kTables[0][(c ^ b[i]) & 0xFF];
  return c;
}

}  // namespace rdmadiag::decode
