// CRC32c (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), as used by
// the MPA FPDU CRC (RFC 5044 section 6.2, which takes it from iSCSI, RFC 3720
// section 12.1 and appendix B.4). Computed by ISA-L (Intel's storage
// acceleration library, Debian's libisal: the CPU's CRC32 instruction and
// carry-less multiply), as the ICRC's CRC-32 is (crc.h).
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"

namespace rdmadiag::decode {

// Continues a CRC32c over `b`. `state` is the running register: start with
// kCrc32cInit, finish with crc32c_final. crc32c() does both for one buffer.
inline constexpr std::uint32_t kCrc32cInit = 0xFFFFFFFFu;
std::uint32_t crc32c_update(std::uint32_t state, Bytes b);
constexpr std::uint32_t crc32c_final(std::uint32_t state) { return state ^ 0xFFFFFFFFu; }
inline std::uint32_t crc32c(Bytes b) { return crc32c_final(crc32c_update(kCrc32cInit, b)); }

}  // namespace rdmadiag::decode
