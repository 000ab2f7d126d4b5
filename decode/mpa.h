// MPA, Marker PDU Aligned framing for TCP (RFC 5044): the connection setup
// frames (section 7.1: MPA Request / Reply, with RFC 6581 section 9's enhanced
// IRD/ORD private data) and the FPDU layout (section 4: ULPDU_Length, pad to a
// 4-octet boundary, CRC32c; section 4.3: a Marker every 512 octets of TCP
// sequence space, counted from the first FPDU, holding the distance back to the
// header of the FPDU it is in).
#pragma once
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::size_t kMpaKeyLen = 16;
inline constexpr std::size_t kMpaReqRepHeaderLen = 20;  // key, flags, revision, PD length
inline constexpr std::size_t kMpaMaxPrivateData = 512;  // RFC 5044 section 7.1
inline constexpr std::uint32_t kMpaMarkerInterval = 512;
inline constexpr std::uint32_t kMpaMarkerLen = 4;
inline constexpr std::uint32_t kMpaLengthLen = 2;  // the ULPDU Length field before each ULPDU
inline constexpr std::uint32_t kMpaCrcLen = 4;
inline constexpr std::string_view kMpaRequestKey = "MPA ID Req Frame";
inline constexpr std::string_view kMpaReplyKey = "MPA ID Rep Frame";

enum class MpaFrameType : std::uint8_t { request, reply };

struct MpaNegotiation {
  MpaFrameType type = MpaFrameType::request;
  bool marker = false;    // M: the sender wants Markers in what it receives
  bool crc = false;       // C
  bool reject = false;    // R (Reply only)
  std::uint8_t res = 0;   // the 5 remaining bits (siw sets 0x10 for enhanced mode)
  std::uint8_t revision = 0;
  std::uint16_t pd_length = 0;
  // RFC 6581 (revision 2): the first 4 private-data octets.
  bool enhanced = false;
  std::uint16_t ird = 0, ord = 0;   // 14 bits each
  bool peer_to_peer = false;        // IRD bit 15 ("P")
  bool zero_length_rtr = false;     // IRD bit 14
  bool rtr_write = false;           // ORD bit 15: zero-length RDMA Write as RTR
  bool rtr_read = false;            // ORD bit 14: zero-length RDMA Read as RTR
  std::uint32_t total_length() const { return static_cast<std::uint32_t>(kMpaReqRepHeaderLen + pd_length); }
};

// Which key, if any, `b` starts with (needs 16 bytes).
bool mpa_key_is(Bytes b, std::string_view key);
// Parses a Request/Reply at the start of `b`. ok: the whole frame (header and
// private data) is in `b`; truncated: more bytes are needed; malformed: no key
// or a private data length over 512.
ParseStatus parse_mpa_negotiation(Bytes b, MpaNegotiation& out);

// RFC 5044 section 7.1.5: what the Reply settles for both directions. CRC is
// used if either side asked for it; Markers go towards each side that asked to
// receive them (M in its own frame). Without the Request (the capture started
// after it), the initiator's wishes are unknown: taken as none.
struct MpaSettlement {
  bool rejected = false;
  bool crc = false;
  bool markers_from_initiator = false;  // the responder set M
  bool markers_from_responder = false;  // the initiator set M
};
MpaSettlement mpa_settle(const MpaNegotiation* request, const MpaNegotiation& reply);

// RFC 5044 section 7.1: what a direction's first bytes make of its stream. A
// stream seen from its SYN either starts with an MPA key or is not MPA; one
// seen mid-way is searched for FPDU boundaries.
enum class MpaStreamStart : std::uint8_t { need_more, negotiation, hunt, not_mpa };
MpaStreamStart mpa_classify_start(Bytes first, bool from_syn);

// Pad octets after a ULPDU of `ulpdu_len` so that the FPDU (2 + ULPDU + pad) is a multiple of 4.
constexpr std::uint32_t mpa_pad(std::uint32_t ulpdu_len) { return (4 - ((2 + ulpdu_len) & 3)) & 3; }
// FPDU length without markers: header, ULPDU, pad, CRC.
constexpr std::uint32_t mpa_fpdu_len(std::uint32_t ulpdu_len) { return 2 + ulpdu_len + mpa_pad(ulpdu_len) + kMpaCrcLen; }
// True if a marker sits at TCP sequence number `seq` when the first FPDU starts
// at `base`. `stride` is 512 in RFC 5044; another one is what a non-conforming
// sender was found to use (the analysis says so once).
constexpr bool mpa_marker_at(std::uint32_t seq, std::uint32_t base, std::uint32_t stride = kMpaMarkerInterval) {
  return (seq - base) % stride == 0;
}
// The first marker position at or after `seq`.
constexpr std::uint32_t mpa_next_marker(std::uint32_t seq, std::uint32_t base, std::uint32_t stride = kMpaMarkerInterval) {
  const std::uint32_t rem = (seq - base) % stride;
  return rem == 0 ? seq : seq + (stride - rem);
}

}  // namespace rdmadiag::decode
