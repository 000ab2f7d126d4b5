#include "decode/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace rdmadiag::decode {

// ISA-L's crc32_iscsi continues the raw register (no inversion in or out), as
// crc32c_update does; its length is an int, so very long spans go in pieces.
std::uint32_t crc32c_update(std::uint32_t c, Bytes b) {
  const std::uint8_t* p = b.data();
  std::size_t n = b.size();
  while (n) {
    const std::size_t k = std::min<std::size_t>(n, INT_MAX);
    c = crc32_iscsi(const_cast<std::uint8_t*>(p), static_cast<int>(k), c);
    p += k;
    n -= k;
  }
  return c;
}

}  // namespace rdmadiag::decode
