#include "decode/ib_mad.h"

namespace rdmadiag::decode {

std::string_view mgmt_class_name(std::uint8_t c) {
  switch (c) {
    case 0x01: return "SubnMgt (LID routed)";
    case 0x81: return "SubnMgt (directed route)";
    case 0x03: return "SubnAdm";
    case 0x04: return "Performance";
    case 0x05: return "BaseboardMgt";
    case 0x06: return "DevMgt";
    case 0x07: return "ComMgt";
    case 0x08: return "SNMP";
    case 0x09: return "VendorSpecific";
    case 0x10: return "BIS";
    case 0x21: return "CongestionMgt";
    default: return (c >= 0x30 && c <= 0x4F) ? "VendorSpecific" : "Unknown";
  }
}

std::string_view to_string(CmMessageType t) {
  switch (t) {
    case CmMessageType::none: return "none";
    case CmMessageType::req: return "REQ";
    case CmMessageType::mra: return "MRA";
    case CmMessageType::rej: return "REJ";
    case CmMessageType::rep: return "REP";
    case CmMessageType::rtu: return "RTU";
    case CmMessageType::dreq: return "DREQ";
    case CmMessageType::drep: return "DREP";
    case CmMessageType::sidr_req: return "SIDR_REQ";
    case CmMessageType::sidr_rep: return "SIDR_REP";
    case CmMessageType::lap: return "LAP";
    case CmMessageType::apr: return "APR";
    case CmMessageType::class_port_info: return "ClassPortInfo";
  }
  return "?";
}

static CmMessageType cm_type(std::uint16_t attr) {
  switch (attr) {
    case 0x0001: return CmMessageType::class_port_info;
    case 0x0010: return CmMessageType::req;
    case 0x0011: return CmMessageType::mra;
    case 0x0012: return CmMessageType::rej;
    case 0x0013: return CmMessageType::rep;
    case 0x0014: return CmMessageType::rtu;
    case 0x0015: return CmMessageType::dreq;
    case 0x0016: return CmMessageType::drep;
    case 0x0017: return CmMessageType::sidr_req;
    case 0x0018: return CmMessageType::sidr_rep;
    case 0x0019: return CmMessageType::lap;
    case 0x001A: return CmMessageType::apr;
    default: return CmMessageType::none;
  }
}

std::string_view attribute_name(std::uint8_t mgmt_class, std::uint16_t attr) {
  if (mgmt_class == kMgmtClassCm) {
    const auto t = cm_type(attr);
    return t == CmMessageType::none ? "Unknown" : to_string(t);
  }
  if (mgmt_class == 0x01 || mgmt_class == 0x81) {
    switch (attr) {
      case 0x0002: return "Notice";
      case 0x0010: return "NodeDescription";
      case 0x0011: return "NodeInfo";
      case 0x0012: return "SwitchInfo";
      case 0x0014: return "GUIDInfo";
      case 0x0015: return "PortInfo";
      case 0x0016: return "P_KeyTable";
      case 0x0017: return "SLtoVLMappingTable";
      case 0x0018: return "VLArbitrationTable";
      case 0x0019: return "LinearForwardingTable";
      case 0x0020: return "SMInfo";
      default: break;
    }
  }
  if (attr == 0x0001) return "ClassPortInfo";
  return "Unknown";
}

ParseStatus parse_mad_header(Bytes b, MadHeader& out) {
  ByteReader r(b);
  out = MadHeader{};
  if (!r.has(0, kMadHeaderLength)) return ParseStatus::truncated;
  out.base_version = r.u8(0);
  out.mgmt_class = r.u8(1);
  out.class_version = r.u8(2);
  out.response = r.u8(3) & 0x80;
  out.method = r.u8(3) & 0x7F;
  out.status = r.be16(4);
  out.class_specific = r.be16(6);
  out.transaction_id = r.be64(8);
  out.attribute_id = r.be16(16);
  out.attribute_modifier = r.be32(20);
  if (out.base_version != 1) return ParseStatus::malformed;
  return ParseStatus::ok;
}

ParseStatus parse_cm(Bytes b, const MadHeader& mad, CmMessage& out) {
  ByteReader r(b);
  out = CmMessage{};
  if (mad.mgmt_class != kMgmtClassCm) return ParseStatus::malformed;
  out.type = cm_type(mad.attribute_id);
  const std::size_t d = kMadHeaderLength;  // CM message data follows the common header
  // Field offsets: IBA section 12.6.5 (REQ), 12.6.8 (REP) etc.
  std::size_t need = d + 8;
  if (out.type == CmMessageType::req) need = d + 52;
  if (out.type == CmMessageType::rep) need = d + 24;
  if (out.type == CmMessageType::rej || out.type == CmMessageType::dreq) need = d + 12;
  if (out.type == CmMessageType::none || out.type == CmMessageType::class_port_info ||
      out.type == CmMessageType::sidr_req || out.type == CmMessageType::sidr_rep)
    need = d + 4;
  if (!r.has(0, need)) return ParseStatus::truncated;
  out.local_comm_id = r.be32(d);
  switch (out.type) {
    case CmMessageType::req:
      out.service_id = r.be64(d + 8);
      out.local_qpn = r.be24(d + 32);
      out.transport_service = static_cast<std::uint8_t>((r.u8(d + 43) >> 1) & 3);
      out.starting_psn = r.be24(d + 44);
      out.pkey = r.be16(d + 48);
      out.path_mtu = r.u8(d + 50) >> 4;
      break;
    case CmMessageType::rep:
      out.remote_comm_id = r.be32(d + 4);
      out.local_qpn = r.be24(d + 12);
      out.starting_psn = r.be24(d + 20);
      break;
    case CmMessageType::rej:
      out.remote_comm_id = r.be32(d + 4);
      out.reject_reason = r.be16(d + 10);
      break;
    case CmMessageType::dreq:
      out.remote_comm_id = r.be32(d + 4);
      out.local_qpn = r.be24(d + 8);  // the remote QPN/EECN the DREQ tears down
      break;
    case CmMessageType::mra:
    case CmMessageType::rtu:
    case CmMessageType::drep:
    case CmMessageType::lap:
    case CmMessageType::apr:
      out.remote_comm_id = r.be32(d + 4);
      break;
    default:
      break;
  }
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
