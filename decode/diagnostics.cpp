#include "decode/diagnostics.h"

namespace rdmadiag::decode {

std::string_view to_string(DiagCode code) {
  switch (code) {
    case DiagCode::truncated: return "truncated";
    case DiagCode::frame_too_short: return "frame_too_short";
    case DiagCode::unsupported_linktype: return "unsupported_linktype";
    case DiagCode::bad_ip_version: return "bad_ip_version";
    case DiagCode::bad_ip_header_length: return "bad_ip_header_length";
    case DiagCode::ip_length_mismatch: return "ip_length_mismatch";
    case DiagCode::ip_fragment: return "ip_fragment";
    case DiagCode::bad_udp_length: return "bad_udp_length";
    case DiagCode::bad_tcp_header_length: return "bad_tcp_header_length";
    case DiagCode::ipv6_ext_header_limit: return "bad_ipv6_header";
    case DiagCode::bad_lrh: return "bad_lrh";
    case DiagCode::bad_grh_next_header: return "bad_grh_next_header";
    case DiagCode::unknown_opcode: return "unknown_opcode";
    case DiagCode::bad_tver: return "bad_tver";
    case DiagCode::pad_exceeds_payload: return "pad_exceeds_payload";
    case DiagCode::payload_length_mismatch: return "payload_length_mismatch";
    case DiagCode::icrc_bad: return "icrc_bad";
    case DiagCode::vcrc_bad: return "vcrc_bad";
    case DiagCode::bad_mad: return "bad_mad";
    case DiagCode::erf_bad_record: return "erf_bad_record";
    case DiagCode::roce_heuristic: return "roce_v2_heuristic_port";
    case DiagCode::bad_mac_control: return "bad_mac_control";
    case DiagCode::pfc_reserved_bits: return "pfc_reserved_bits";
    case DiagCode::udp_port_bit_error: return "udp_port_bit_error";
    case DiagCode::ipv4_checksum_bad: return "ipv4_checksum_bad";
    case DiagCode::ipv4_header_bit_error: return "ipv4_header_bit_error";
    case DiagCode::wire_length_below_captured: return "wire_length_below_captured";
    case DiagCode::count_: break;
  }
  return "?";
}

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::note: return "note";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "?";
}

}  // namespace rdmadiag::decode
