// One frame, decoded from the link layer down to the InfiniBand transport
// headers: the entry point every other part of rdmadiag calls. A decode never
// throws and never reads past the captured bytes; it returns what it could
// decode (the prefix) plus typed diagnostics. No heap allocation.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/crc.h"
#include "decode/diagnostics.h"
#include "decode/erf.h"
#include "decode/ethernet.h"
#include "decode/ib_link.h"
#include "decode/ib_mad.h"
#include "decode/ib_transport.h"
#include "decode/icrc_hint.h"
#include "decode/ip.h"
#include "decode/mac_control.h"
#include "decode/l4.h"
#include "decode/sll.h"

namespace rdmadiag::decode {

// pcap LINKTYPE_* values (tcpdump.org link-layer header types).
namespace linktype {
inline constexpr std::uint32_t kEthernet = 1;
inline constexpr std::uint32_t kRawDlt12 = 12;   // DLT_RAW on most systems
inline constexpr std::uint32_t kRawDlt14 = 14;   // DLT_RAW on OpenBSD
inline constexpr std::uint32_t kRaw = 101;
inline constexpr std::uint32_t kLinuxSll = 113;
inline constexpr std::uint32_t kErf = 197;
inline constexpr std::uint32_t kIpv4 = 228;
inline constexpr std::uint32_t kIpv6 = 229;
inline constexpr std::uint32_t kInfiniband = 247;
inline constexpr std::uint32_t kLinuxSll2 = 276;
}  // namespace linktype

// Capture points from SLL2 interface indexes: 1 + ifindex below this bound
// (Linux's are small); a larger one keeps the input's point.
inline constexpr std::uint32_t kMaxSll2Point = 0xffff;
// The capture point an SLL2 record's ifindex names (0: none, past the bound).
inline std::uint16_t sll2_capture_point(std::uint32_t ifindex) {
  return ifindex < kMaxSll2Point ? static_cast<std::uint16_t>(ifindex + 1) : 0;
}

bool linktype_supported(std::uint32_t lt);
std::string_view linktype_name(std::uint32_t lt);

enum class Transport : std::uint8_t { other, ib, roce_v1, roce_v2, iwarp };
std::string_view to_string(Transport t);

struct DecodeOptions {
  // Extra UDP destination ports that carry RoCEv2 besides 4791.
  std::array<std::uint16_t, 8> extra_roce_ports{};
  std::uint8_t extra_roce_port_count = 0;
  // Try RoCEv2 on any UDP port; a valid ICRC confirms it.
  bool roce_heuristic = true;
  bool add_roce_port(std::uint16_t port) {
    if (extra_roce_port_count == extra_roce_ports.size()) return false;
    extra_roce_ports[extra_roce_port_count++] = port;
    return true;
  }
};

struct DecodedPacket {
  std::uint32_t linktype = 0;
  std::uint32_t caplen = 0;   // bytes captured
  std::uint32_t wirelen = 0;  // bytes on the wire
  Transport transport = Transport::other;
  bool truncated = false;     // the snap length cut the frame before the packet's end
  // Which capture point saw the frame, when one input holds several (a pcapng
  // file's interfaces: two hosts' captures merged): 1 + the interface's index;
  // 0 when the input has one. Set by the reader after decode_frame; the flow
  // keys include it, so a flow seen at two points is two flows. A LINUX_SLL2
  // record (`tcpdump -i any`) names its interface: decode_frame sets 1 + its
  // ifindex, which a reader's own point (pcapng interfaces) replaces.
  std::uint16_t capture_point = 0;

  std::optional<ErfHeader> erf;
  std::optional<EthernetHeader> eth;
  std::optional<SllHeader> sll;
  std::optional<MacControl> mac_control;  // Ethernet MAC Control (PAUSE, PFC), eth holds its addresses
  std::optional<Ipv4Header> ipv4;
  std::optional<Ipv6Header> ipv6;
  std::optional<UdpHeader> udp;
  std::optional<TcpHeader> tcp;
  std::optional<Lrh> lrh;
  std::optional<Grh> grh;
  bool has_bth = false;
  IbTransport ib;             // valid when has_bth (ib.present says which ext headers)
  std::optional<MadHeader> mad;
  std::optional<CmMessage> cm;

  std::uint32_t bth_offset = 0;     // in the frame
  std::uint32_t payload_offset = 0; // IB payload (after the extended headers)
  std::uint32_t payload_len = 0;    // IB payload bytes on the wire, pad excluded
  Bytes payload;                    // the captured part of that payload
  Bytes tcp_payload;                // captured TCP payload (for stream reassembly)
  Bytes tcp_segment;                // captured TCP header and payload (for its checksum)
  std::uint32_t tcp_payload_len = 0;  // its length on the wire

  CrcStatus icrc = CrcStatus::not_present;
  std::uint32_t icrc_offset = 0;    // of the ICRC in the frame, when it was captured (the VCRC follows it)
  std::uint32_t icrc_wire = 0;      // as the integer the CRC produces (wire bytes are little-endian)
  std::uint32_t icrc_computed = 0;
  IcrcInput icrc_input{};           // what the ICRC covers (spans into the frame: valid while the frame is)
  CrcStatus vcrc = CrcStatus::not_present;
  std::uint16_t vcrc_wire = 0;
  std::uint16_t vcrc_computed = 0;

  DiagList diags;

  const OpcodeInfo* opcode() const { return has_bth ? &opcode_info(ib.bth.opcode) : nullptr; }
  bool is_rdma() const { return transport == Transport::ib || transport == Transport::roce_v1 || transport == Transport::roce_v2; }
};

// Whether a TCP segment's checksum (RFC 9293 section 3.1: the ones' complement sum over
// the IP pseudo-header and the segment) holds with these ports in place of its own: a
// segment whose port took a bit error names another connection, and only the checksum
// ties it back to its own. False when the segment was not captured whole.
bool tcp_checksum_holds_with_ports(const DecodedPacket& p, std::uint16_t src_port, std::uint16_t dst_port);

// Decodes one frame. `wirelen` is the original length (>= frame.size() normally).
// `hint`: the frame's ICRC already verified over the same bytes (icrc_hint.h).
void decode_frame(std::uint32_t linktype, Bytes frame, std::uint32_t wirelen, const DecodeOptions& opts,
                  DecodedPacket& out, const IcrcHint& hint = {});
// The reader's capture point for the frame just decoded (a pcapng interface:
// 1 + its index; 0: the input has one): it takes precedence over the one an
// SLL2 record names.
inline void take_reader_point(DecodedPacket& p, std::uint16_t reader_point) {
  if (reader_point) p.capture_point = reader_point;
}
// The reader point of a record when only its interface index is known, not
// how many interfaces the file has (Wireshark's plugin): interface k > 0 is
// 1 + k, as capture::FileReader::record_point numbers it; interface 0 keeps
// the frame's own (an SLL2 ifindex, or none), as in a file of one interface.
// A file of several interfaces then splits into the same capture points as
// `analyze` splits it, only interface 0's label differs (unless it is SLL2).
inline std::uint16_t interface_point(std::uint32_t interface) {
  return interface == 0 ? 0 : static_cast<std::uint16_t>((interface < 0xfffe ? interface : 0xfffe) + 1);
}

}  // namespace rdmadiag::decode
