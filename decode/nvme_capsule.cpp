// NVMe over Fabrics capsules: see nvme_capsule.h for the specification sections.
#include "decode/nvme_capsule.h"

#include <algorithm>
#include <cstring>

namespace rdmadiag::decode {

namespace {

// SGL descriptor (NVMe Base 1.4 figures 115-120): 16 bytes, identifier in byte 15.
SglDescriptor read_sgl(const ByteReader& r, std::size_t off) {
  SglDescriptor d;
  const std::uint8_t id = r.u8(off + 15);
  d.type = id >> 4;
  d.subtype = id & 0x0F;
  d.address = r.le64(off);
  if (d.keyed()) {
    // Keyed data block: 24-bit length in bytes 8-10, key in bytes 11-14.
    d.length = r.u8(off + 8) | std::uint32_t{r.u8(off + 9)} << 8 | std::uint32_t{r.u8(off + 10)} << 16;
    d.key = r.le32(off + 11);
  } else {
    d.length = r.le32(off + 8);
  }
  return d;
}

// Connect (NVMe-oF 1.1 figure 19) and Property Get/Set (figures 23, 26) fields.
void read_fabrics_fields(const ByteReader& r, NvmeCommand& c) {
  c.fctype = r.u8(4);
  if (c.is(FabricsType::connect)) {
    c.recfmt = r.le16(40);
    c.qid = r.le16(42);
    c.sqsize = r.le16(44);
    c.cattr = r.u8(46);
    c.kato = r.le32(48);
  } else if (c.is(FabricsType::property_get) || c.is(FabricsType::property_set)) {
    // ATTRIB bits 2:0: 0 = 4 bytes, 1 = 8 bytes.
    c.property_size = (r.u8(40) & 7) == 1 ? 8 : 4;
    c.property_offset = r.le32(44);
    if (c.is(FabricsType::property_set))
      c.property_value = c.property_size == 8 ? r.le64(48) : r.le32(48);
  }
}

std::string_view nqn_view(const std::array<char, 256>& a) {
  const auto end = std::find(a.begin(), a.end(), '\0');
  return {a.data(), static_cast<std::size_t>(end - a.begin())};
}

void copy_nqn(const ByteReader& r, std::size_t off, std::array<char, 256>& out) {
  // The NQN field is 256 bytes, NUL-terminated UTF-8; the last byte stays NUL here.
  for (std::size_t i = 0; i + 1 < out.size(); ++i) out[i] = static_cast<char>(r.u8(off + i));
}

}  // namespace

ParseStatus parse_nvme_command(Bytes capsule, std::uint32_t capsule_len, NvmeCommand& out) {
  out = NvmeCommand{};
  if (capsule_len < kNvmeSqeLength) return ParseStatus::malformed;
  ByteReader r(capsule);
  if (!r.has(0, kNvmeSqeLength)) return ParseStatus::truncated;
  out.opcode = r.u8(0);
  out.fuse = r.u8(1) & 3;
  out.psdt = r.u8(1) >> 6;
  out.cid = r.le16(2);
  out.sgl = read_sgl(r, 24);
  for (std::size_t i = 0; i < out.cdw.size(); ++i) out.cdw[i] = r.le32(40 + 4 * i);
  out.in_capsule_bytes = capsule_len - static_cast<std::uint32_t>(kNvmeSqeLength);
  if (out.fabrics())
    read_fabrics_fields(r, out);
  else
    out.nsid = r.le32(4);
  return ParseStatus::ok;
}

ParseStatus parse_nvme_connect_data(Bytes data, NvmeConnectData& out) {
  out = NvmeConnectData{};
  ByteReader r(data);
  // HOSTID 0-15, CNTLID 16-17, SUBNQN 256-511, HOSTNQN 512-767 (NVMe-oF 1.1 figure 20).
  if (!r.has(0, 768)) return ParseStatus::truncated;
  for (std::size_t i = 0; i < out.host_id.size(); ++i) out.host_id[i] = r.u8(i);
  out.cntlid = r.le16(16);
  copy_nqn(r, 256, out.subnqn);
  copy_nqn(r, 512, out.hostnqn);
  return ParseStatus::ok;
}

std::string_view NvmeConnectData::subsystem() const { return nqn_view(subnqn); }
std::string_view NvmeConnectData::host() const { return nqn_view(hostnqn); }

ParseStatus parse_nvme_completion(Bytes capsule, NvmeCompletion& out) {
  out = NvmeCompletion{};
  ByteReader r(capsule);
  if (!r.has(0, kNvmeCqeLength)) return ParseStatus::truncated;
  out.dw0 = r.le32(0);
  out.dw1 = r.le32(4);
  out.sqhd = r.le16(8);
  out.sqid = r.le16(10);
  out.cid = r.le16(12);
  out.status = r.le16(14);
  return ParseStatus::ok;
}

namespace {

// Admin command set (NVMe Base 1.4 figure 139).
std::string_view admin_opcode_name(std::uint8_t op) {
  switch (op) {
    case 0x00: return "delete_io_sq";
    case 0x01: return "create_io_sq";
    case 0x02: return "get_log_page";
    case 0x04: return "delete_io_cq";
    case 0x05: return "create_io_cq";
    case 0x06: return "identify";
    case 0x08: return "abort";
    case 0x09: return "set_features";
    case 0x0A: return "get_features";
    case 0x0C: return "async_event_request";
    case 0x0D: return "namespace_management";
    case 0x10: return "firmware_commit";
    case 0x11: return "firmware_image_download";
    case 0x14: return "device_self_test";
    case 0x15: return "namespace_attachment";
    case 0x18: return "keep_alive";
    case 0x19: return "directive_send";
    case 0x1A: return "directive_receive";
    case 0x80: return "format_nvm";
    case 0x81: return "security_send";
    case 0x82: return "security_receive";
    case 0x84: return "sanitize";
    case 0x86: return "get_lba_status";
    default: return "admin_other";
  }
}

// NVM command set (NVMe Base 1.4 figure 346).
std::string_view io_opcode_name(std::uint8_t op) {
  switch (op) {
    case 0x00: return "flush";
    case 0x01: return "write";
    case 0x02: return "read";
    case 0x04: return "write_uncorrectable";
    case 0x05: return "compare";
    case 0x08: return "write_zeroes";
    case 0x09: return "dataset_management";
    case 0x0C: return "verify";
    case 0x0D: return "reservation_register";
    case 0x0E: return "reservation_report";
    case 0x11: return "reservation_acquire";
    case 0x15: return "reservation_release";
    default: return "io_other";
  }
}

}  // namespace

std::string_view nvme_opcode_name(const NvmeCommand& c, NvmeQueueKind queue) {
  if (c.fabrics()) return fabrics_type_name(c.fctype);
  switch (queue) {
    case NvmeQueueKind::admin: return admin_opcode_name(c.opcode);
    case NvmeQueueKind::io: return io_opcode_name(c.opcode);
    case NvmeQueueKind::unknown: break;
  }
  return "unknown_queue";
}

std::string_view fabrics_type_name(std::uint8_t fctype) {
  switch (static_cast<FabricsType>(fctype)) {
    case FabricsType::property_set: return "property_set";
    case FabricsType::connect: return "connect";
    case FabricsType::property_get: return "property_get";
    case FabricsType::auth_send: return "authentication_send";
    case FabricsType::auth_receive: return "authentication_receive";
    case FabricsType::disconnect: return "disconnect";
  }
  return "fabrics_other";
}

namespace {

// Generic command status (NVMe Base 1.4 figures 128-129; 17h from NVMe 1.3), SCT 0.
std::string_view generic_status_name(std::uint8_t sc) {
  switch (sc) {
    case 0x00: return "success";
    case 0x01: return "invalid_command_opcode";
    case 0x02: return "invalid_field_in_command";
    case 0x03: return "command_id_conflict";
    case 0x04: return "data_transfer_error";
    case 0x05: return "aborted_power_loss";
    case 0x06: return "internal_error";
    case 0x07: return "abort_requested";
    case 0x08: return "aborted_sq_deletion";
    case 0x09: return "aborted_failed_fused";
    case 0x0A: return "aborted_missing_fused";
    case 0x0B: return "invalid_namespace_or_format";
    case 0x0C: return "command_sequence_error";
    case 0x0D: return "invalid_sgl_segment_descriptor";
    case 0x0E: return "invalid_number_of_sgl_descriptors";
    case 0x0F: return "data_sgl_length_invalid";
    case 0x10: return "metadata_sgl_length_invalid";
    case 0x11: return "sgl_descriptor_type_invalid";
    case 0x12: return "invalid_use_of_controller_memory_buffer";
    case 0x13: return "prp_offset_invalid";
    case 0x14: return "atomic_write_unit_exceeded";
    case 0x15: return "operation_denied";
    case 0x16: return "sgl_offset_invalid";
    case 0x17: return "sgl_subtype_invalid";  // NVMe 1.3; what Linux nvmet-rdma answers a keyed SGL subtype it rejects
    case 0x18: return "host_identifier_inconsistent_format";
    case 0x19: return "keep_alive_timer_expired";
    case 0x1A: return "keep_alive_timeout_invalid";
    case 0x1B: return "aborted_preempt_and_abort";
    case 0x1C: return "sanitize_failed";
    case 0x1D: return "sanitize_in_progress";
    case 0x1E: return "sgl_data_block_granularity_invalid";
    case 0x1F: return "command_not_supported_for_queue_in_cmb";
    case 0x20: return "namespace_write_protected";
    case 0x21: return "command_interrupted";
    case 0x22: return "transient_transport_error";
    case 0x80: return "lba_out_of_range";
    case 0x81: return "capacity_exceeded";
    case 0x82: return "namespace_not_ready";
    case 0x83: return "reservation_conflict";
    default: return "generic_other";
  }
}

// Connect command specific status (NVMe-oF 1.1 figure 21), SCT 1.
std::string_view connect_status_name(std::uint8_t sc) {
  switch (sc) {
    case 0x80: return "connect_incompatible_format";
    case 0x81: return "connect_controller_busy";
    case 0x82: return "connect_invalid_parameters";
    case 0x83: return "connect_restart_discovery";
    case 0x84: return "connect_invalid_host";
    case 0x85: return "invalid_queue_type";
    default: return "command_specific_other";
  }
}

}  // namespace

std::string_view nvme_status_name(std::uint8_t sct, std::uint8_t sc, bool connect_command) {
  switch (sct) {
    case 0: return generic_status_name(sc);
    case 1: return connect_command ? connect_status_name(sc) : "command_specific";
    case 2: return "media_error";
    case 3: return "path_error";
    case 7: return "vendor_specific";
    default: return "reserved_status_type";
  }
}

std::string_view nvme_property_name(std::uint32_t offset) {
  // Controller properties (NVMe-oF 1.1 figure 8).
  switch (offset) {
    case 0x00: return "CAP";
    case 0x08: return "VS";
    case 0x14: return "CC";
    case 0x1C: return "CSTS";
    case 0x20: return "NSSR";
    default: return "other";
  }
}

std::string_view sgl_type_name(std::uint8_t type) {
  switch (static_cast<SglType>(type)) {
    case SglType::data_block: return "data_block";
    case SglType::bit_bucket: return "bit_bucket";
    case SglType::segment: return "segment";
    case SglType::last_segment: return "last_segment";
    case SglType::keyed_data_block: return "keyed_data_block";
    case SglType::transport_data_block: return "transport_data_block";
  }
  return "reserved";
}

bool nvme_io_has_lba(std::uint8_t opcode) {
  return opcode == 0x01 || opcode == 0x02 || opcode == 0x04 || opcode == 0x05 || opcode == 0x08 || opcode == 0x0C;
}

}  // namespace rdmadiag::decode
