// Typed diagnostics (Wireshark's expert info, as values): what a decode found
// wrong, how bad it is, and where in the frame. A decode never throws; it returns
// the decoded prefix plus these.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace rdmadiag::decode {

enum class Severity : std::uint8_t { note, warning, error };

enum class DiagCode : std::uint8_t {
  truncated,              // captured bytes end before the header/packet does (snap length)
  frame_too_short,        // the frame itself (not the capture) ends inside a header
  unsupported_linktype,
  bad_ip_version,
  bad_ip_header_length,
  ip_length_mismatch,     // IP/UDP/LRH length field disagrees with the bytes present
  ip_fragment,            // a fragment: the transport is not decoded
  bad_udp_length,
  bad_tcp_header_length,
  ipv6_ext_header_limit,
  bad_lrh,                // LRH LNH or packet length that cannot be right
  bad_grh_next_header,
  unknown_opcode,         // reserved or manufacturer-specific BTH opcode
  bad_tver,               // BTH transport header version is not 0
  pad_exceeds_payload,
  payload_length_mismatch,  // e.g. an ACK or READ request carrying a payload
  icrc_bad,
  vcrc_bad,
  bad_mad,
  erf_bad_record,
  roce_heuristic,         // RoCEv2 found on a non-standard UDP port (confirmed by ICRC)
  bad_mac_control,        // a MAC Control frame (PAUSE/PFC) too short for its opcode's fields
  pfc_reserved_bits,      // PFC priority-enable vector with its reserved upper octet set (802.3 Annex 31D)
  udp_port_bit_error,     // RoCEv2 whose UDP destination port is 4791 with one bit flipped (ICRC holds with 4791)
  ipv4_checksum_bad,      // an IPv4 header that says "fragment", or carries neither UDP nor TCP, whose checksum fails: a damaged header
  ipv4_header_bit_error,  // such a header with one bit flipped: checksum and ICRC hold with it put back, so a RoCEv2 packet
  wire_length_below_captured,  // the record's original length is less than its captured length: a damaged record header
  count_                  // keep last
};

std::string_view to_string(DiagCode code);
std::string_view to_string(Severity severity);

struct Diagnostic {
  DiagCode code;
  Severity severity;
  std::uint32_t offset;  // byte offset in the frame where the problem is
};

// Fixed capacity: no heap allocation per packet. Extra diagnostics are counted.
class DiagList {
 public:
  static constexpr std::size_t kCapacity = 8;
  void add(DiagCode code, Severity severity, std::size_t offset) {
    if (size_ < kCapacity)
      items_[size_++] = Diagnostic{code, severity, static_cast<std::uint32_t>(offset)};
    else
      ++dropped_;
  }
  std::size_t size() const { return size_; }
  std::size_t dropped() const { return dropped_; }
  bool empty() const { return size_ == 0; }
  const Diagnostic* begin() const { return items_.data(); }
  const Diagnostic* end() const { return items_.data() + size_; }
  bool contains(DiagCode code) const {
    for (const auto& d : *this)
      if (d.code == code) return true;
    return false;
  }
  void clear() { size_ = dropped_ = 0; }

 private:
  std::array<Diagnostic, kCapacity> items_{};
  std::size_t size_ = 0;
  std::size_t dropped_ = 0;
};

}  // namespace rdmadiag::decode
