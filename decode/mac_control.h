// MAC Control frames (IEEE 802.3 clause 31, Ethertype 0x8808): the link-level
// flow control that lossless Ethernet (RoCE) runs on.
//   - PAUSE (IEEE 802.3 Annex 31B, opcode 0x0001): one pause_time, in pause
//     quanta of 512 bit times; 0 resumes at once (XON).
//   - Priority-based Flow Control (IEEE 802.1Qbb clause 36, frame format in
//     IEEE 802.3 Annex 31D, opcode 0x0101): a priority-enable vector (upper
//     octet reserved, bit n of the lower octet enables priority n) and eight
//     time[n] fields in the same quanta; time[n] is meaningful only when bit n
//     is set, and 0 resumes priority n.
// Both go to the reserved multicast 01-80-C2-00-00-01 (Annexes 31B, 31D;
// a PAUSE may also go to the partner's unicast address). Other opcodes (EPON
// MPCP, clause 64/77) are decoded to the opcode only.
#pragma once
#include <array>
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::uint16_t kEthertypeMacControl = 0x8808;
inline constexpr std::uint16_t kMacControlPause = 0x0001;
inline constexpr std::uint16_t kMacControlPfc = 0x0101;
inline constexpr std::size_t kPriorities = 8;
// Bit times per pause quantum (Annexes 31B, 31D).
inline constexpr std::uint32_t kBitTimesPerQuantum = 512;
inline constexpr std::array<std::uint8_t, 6> kMacControlMulticast{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};

struct MacControl {
  std::uint16_t opcode = 0;
  // PAUSE: pause_time. PFC: the priority-enable vector as on the wire and time[0..7].
  std::uint16_t pause_quanta = 0;
  std::uint16_t enable_vector = 0;
  std::array<std::uint16_t, kPriorities> quanta{};
  bool reserved_bits = false;  // PFC: the vector's reserved upper octet is not 0
  std::uint16_t length = 0;    // bytes of the opcode and its fields (2, 4 or 20)

  bool is_pause() const { return opcode == kMacControlPause; }
  bool is_pfc() const { return opcode == kMacControlPfc; }
  // Whether this frame speaks for priority n: PFC with bit n set; PAUSE speaks for every priority.
  bool enables(std::size_t n) const {
    return is_pause() || (is_pfc() && n < kPriorities && (enable_vector >> n & 1) != 0);
  }
  std::uint16_t quanta_for(std::size_t n) const { return is_pause() ? pause_quanta : quanta[n]; }
};

// `data` starts at the opcode (just after the Ethertype). Truncated when the
// bytes end inside the opcode's fields: the caller tells a cut capture from a
// frame too short by the wire length, as for every header.
ParseStatus parse_mac_control(Bytes data, MacControl& out);

}  // namespace rdmadiag::decode
