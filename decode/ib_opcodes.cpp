#include "decode/ib_opcodes.h"

namespace rdmadiag::decode {
namespace {

struct OpTemplate {
  std::string_view suffix;
  OpKind kind;
  std::uint16_t ext;
  bool imm;
  bool inval;
};

// The RC/RD/XRC operation codes (low 5 bits), IBA table 38; UC and UD use subsets.
constexpr std::array<OpTemplate, 32> kOps = [] {
  std::array<OpTemplate, 32> t{};
  t[0x00] = {"SEND_FIRST", OpKind::send_first, 0, false, false};
  t[0x01] = {"SEND_MIDDLE", OpKind::send_middle, 0, false, false};
  t[0x02] = {"SEND_LAST", OpKind::send_last, 0, false, false};
  t[0x03] = {"SEND_LAST_WITH_IMMEDIATE", OpKind::send_last, kImmDt, true, false};
  t[0x04] = {"SEND_ONLY", OpKind::send_only, 0, false, false};
  t[0x05] = {"SEND_ONLY_WITH_IMMEDIATE", OpKind::send_only, kImmDt, true, false};
  t[0x06] = {"RDMA_WRITE_FIRST", OpKind::write_first, kReth, false, false};
  t[0x07] = {"RDMA_WRITE_MIDDLE", OpKind::write_middle, 0, false, false};
  t[0x08] = {"RDMA_WRITE_LAST", OpKind::write_last, 0, false, false};
  t[0x09] = {"RDMA_WRITE_LAST_WITH_IMMEDIATE", OpKind::write_last, kImmDt, true, false};
  t[0x0A] = {"RDMA_WRITE_ONLY", OpKind::write_only, kReth, false, false};
  t[0x0B] = {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", OpKind::write_only, kReth | kImmDt, true, false};
  t[0x0C] = {"RDMA_READ_REQUEST", OpKind::read_request, kReth, false, false};
  t[0x0D] = {"RDMA_READ_RESPONSE_FIRST", OpKind::read_response_first, kAeth, false, false};
  t[0x0E] = {"RDMA_READ_RESPONSE_MIDDLE", OpKind::read_response_middle, 0, false, false};
  t[0x0F] = {"RDMA_READ_RESPONSE_LAST", OpKind::read_response_last, kAeth, false, false};
  t[0x10] = {"RDMA_READ_RESPONSE_ONLY", OpKind::read_response_only, kAeth, false, false};
  t[0x11] = {"ACKNOWLEDGE", OpKind::acknowledge, kAeth, false, false};
  t[0x12] = {"ATOMIC_ACKNOWLEDGE", OpKind::atomic_acknowledge, kAeth | kAtomicAckEth, false, false};
  t[0x13] = {"COMPARE_SWAP", OpKind::compare_swap, kAtomicEth, false, false};
  t[0x14] = {"FETCH_ADD", OpKind::fetch_add, kAtomicEth, false, false};
  t[0x15] = {"RESYNC", OpKind::resync, 0, false, false};  // RD only
  t[0x16] = {"SEND_LAST_WITH_INVALIDATE", OpKind::send_last, kIeth, false, true};
  t[0x17] = {"SEND_ONLY_WITH_INVALIDATE", OpKind::send_only, kIeth, false, true};
  t[0x1C] = {"FLUSH", OpKind::flush, kFeth | kReth, false, false};
  t[0x1D] = {"ATOMIC_WRITE", OpKind::atomic_write, kReth, false, false};
  return t;
}();

constexpr std::array<std::string_view, 8> kServicePrefix = {"RC_", "UC_", "RD_", "UD_", "CNP", "XRC_", "", ""};

// Which operation codes each service defines (IBA table 38).
constexpr bool service_has_op(TransportService s, unsigned op) {
  switch (s) {
    case TransportService::rc:
    case TransportService::xrc:
      return op <= 0x14 || op == 0x16 || op == 0x17 || op == 0x1C || op == 0x1D;
    case TransportService::rd:
      return op <= 0x15;
    case TransportService::uc:
      return op <= 0x0B && op != 0x0C;
    case TransportService::ud:
      return op == 0x04 || op == 0x05;
    default:
      return false;
  }
}

using OpcodeNames = std::array<std::array<char, 48>, 256>;

// The kernel's IB_OPCODE_* spelling of each defined opcode ("RC_" + "SEND_FIRST").
constexpr OpcodeNames build_names() {
  OpcodeNames names{};
  for (unsigned code = 0; code < 256; ++code) {
    const auto service = static_cast<TransportService>(code >> 5);
    if (code == kOpcodeCnp || !service_has_op(service, code & 0x1F)) continue;
    std::size_t n = 0;
    for (char c : kServicePrefix[code >> 5]) names[code][n++] = c;
    for (char c : kOps[code & 0x1F].suffix) names[code][n++] = c;
  }
  return names;
}
constexpr OpcodeNames kNames = build_names();

constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> info{};
  for (unsigned code = 0; code < 256; ++code) {
    const auto service = static_cast<TransportService>(code >> 5);
    const unsigned op = code & 0x1F;
    OpcodeInfo& oi = info[code];
    oi.service = service;
    oi.kind = OpKind::invalid;
    oi.name = "RESERVED";
    if (code == kOpcodeCnp) {
      oi = OpcodeInfo{"CNP", TransportService::cnp, OpKind::cnp, 0, false, false, true};
      continue;
    }
    if (service == TransportService::vendor || service == TransportService::reserved) {
      oi.name = "VENDOR_SPECIFIC";
      continue;
    }
    if (!service_has_op(service, op)) continue;
    const OpTemplate& tpl = kOps[op];
    std::uint16_t ext = tpl.ext;
    if (service == TransportService::rd) {
      ext |= kRdeth;
      if (OpcodeInfo{tpl.suffix, service, tpl.kind, 0, false, false, true}.is_request()) ext |= kDeth;
    } else if (service == TransportService::ud) {
      ext |= kDeth;
    } else if (service == TransportService::xrc) {
      if (OpcodeInfo{tpl.suffix, service, tpl.kind, 0, false, false, true}.is_request()) ext |= kXrceth;
    }
    const std::size_t n = kServicePrefix[code >> 5].size() + tpl.suffix.size();
    oi = OpcodeInfo{std::string_view(kNames[code].data(), n), service, tpl.kind, ext, tpl.imm, tpl.inval, true};
  }
  return info;
}

}  // namespace

constexpr std::array<OpcodeInfo, 256> kOpcodeInfo = build_table();

std::string_view to_string(TransportService s) {
  switch (s) {
    case TransportService::rc: return "RC";
    case TransportService::uc: return "UC";
    case TransportService::rd: return "RD";
    case TransportService::ud: return "UD";
    case TransportService::cnp: return "CNP";
    case TransportService::xrc: return "XRC";
    case TransportService::vendor: return "VENDOR";
    case TransportService::reserved: return "RESERVED";
  }
  return "?";
}

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::invalid: return "invalid";
    case OpKind::send_first: return "send_first";
    case OpKind::send_middle: return "send_middle";
    case OpKind::send_last: return "send_last";
    case OpKind::send_only: return "send_only";
    case OpKind::write_first: return "write_first";
    case OpKind::write_middle: return "write_middle";
    case OpKind::write_last: return "write_last";
    case OpKind::write_only: return "write_only";
    case OpKind::read_request: return "read_request";
    case OpKind::read_response_first: return "read_response_first";
    case OpKind::read_response_middle: return "read_response_middle";
    case OpKind::read_response_last: return "read_response_last";
    case OpKind::read_response_only: return "read_response_only";
    case OpKind::acknowledge: return "acknowledge";
    case OpKind::atomic_acknowledge: return "atomic_acknowledge";
    case OpKind::compare_swap: return "compare_swap";
    case OpKind::fetch_add: return "fetch_add";
    case OpKind::resync: return "resync";
    case OpKind::flush: return "flush";
    case OpKind::atomic_write: return "atomic_write";
    case OpKind::cnp: return "cnp";
  }
  return "?";
}

std::size_t ext_header_length(ExtHeader h) {
  switch (h) {
    case kRdeth: case kXrceth: case kFeth: case kAeth: case kImmDt: case kIeth: return 4;
    case kDeth: case kAtomicAckEth: return 8;
    case kReth: return 16;
    case kAtomicEth: return 28;
  }
  return 0;
}

}  // namespace rdmadiag::decode
