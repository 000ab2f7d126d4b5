// DDP (RFC 5041 section 4: tagged and untagged buffer model headers) and
// RDMAP (RFC 5040 section 4: control field, Read Request, Terminate; RFC 7306
// section 5-6: Immediate Data and Atomic operations), decoded from one ULPDU
// (the bytes an MPA FPDU carries, markers removed). Value structs only.
#pragma once
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::size_t kDdpTaggedHeaderLen = 14;    // control(2) STag(4) TO(8)
inline constexpr std::size_t kDdpUntaggedHeaderLen = 18;  // control(2) ULP(4) QN(4) MSN(4) MO(4)

// RDMAP untagged queues (RFC 5040 section 5.1; RFC 7306 section 8.1 for queue 3).
inline constexpr std::uint32_t kQueueSend = 0;
inline constexpr std::uint32_t kQueueReadRequest = 1;
inline constexpr std::uint32_t kQueueTerminate = 2;
inline constexpr std::uint32_t kQueueAtomic = 3;

enum class RdmapOpcode : std::uint8_t {
  rdma_write = 0,
  read_request = 1,
  read_response = 2,
  send = 3,
  send_invalidate = 4,
  send_se = 5,
  send_se_invalidate = 6,
  terminate = 7,
  immediate_data = 8,     // RFC 7306
  immediate_data_se = 9,  // RFC 7306
  atomic_request = 10,    // RFC 7306
  atomic_response = 11,   // RFC 7306
};
std::string_view rdmap_opcode_name(std::uint8_t opcode);
// What an untagged queue carries ("Send", "RDMA Read Request", ...; "unknown" past queue 3).
std::string_view ddp_queue_name(std::uint32_t qn);
bool rdmap_opcode_known(std::uint8_t opcode);
// The DDP model and queue each opcode uses (RFC 5040 table 4 / RFC 7306 table 1); -1: tagged.
int rdmap_expected_queue(std::uint8_t opcode);

struct DdpHeader {
  bool tagged = false;
  bool last = false;
  std::uint8_t reserved = 0;   // the 4 reserved bits of the control field
  std::uint8_t version = 0;    // DV, 1 for RFC 5041
  std::uint8_t rdmap_control = 0;  // the second octet: RDMAP RV (2 bits), reserved (2), opcode (4)
  std::uint32_t stag = 0;      // tagged
  std::uint64_t to = 0;        // tagged offset
  std::uint32_t ulp = 0;       // untagged: the 32 bits reserved for the ULP (RDMAP: invalidate STag)
  std::uint32_t qn = 0, msn = 0, mo = 0;  // untagged
  std::uint8_t rdmap_version() const { return rdmap_control >> 6; }
  std::uint8_t opcode() const { return rdmap_control & 0x0F; }
  std::size_t length() const { return tagged ? kDdpTaggedHeaderLen : kDdpUntaggedHeaderLen; }
};
ParseStatus parse_ddp_header(Bytes b, DdpHeader& out);

struct RdmaReadRequest {  // RFC 5040 section 4.4
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t read_size = 0;
  std::uint32_t src_stag = 0;
  std::uint64_t src_to = 0;
};
inline constexpr std::size_t kReadRequestLen = 28;

struct RdmapTerminate {  // RFC 5040 section 4.8
  std::uint8_t layer = 0;       // 0 RDMAP, 1 DDP, 2 LLP (MPA)
  std::uint8_t error_type = 0;
  std::uint8_t error_code = 0;
  bool hdr_m = false, hdr_d = false, hdr_r = false;
  std::uint16_t ddp_segment_length = 0;  // present with D
  bool has_ddp = false;
  DdpHeader ddp;                         // the terminated DDP header
  bool has_rdma = false;
  RdmaReadRequest rdma;                  // the terminated RDMAP (Read Request) header
};
std::string_view terminate_layer_name(std::uint8_t layer);
std::string_view terminate_error_name(std::uint8_t layer, std::uint8_t etype, std::uint8_t code);

struct AtomicRequest {  // RFC 7306 section 5.1
  std::uint8_t aopcode = 0;  // 0 fetch-and-add, 1 compare-and-swap, 2 masked fetch-and-add, 3 masked compare-and-swap
  std::uint32_t request_id = 0;
  std::uint32_t remote_stag = 0;
  std::uint64_t remote_to = 0;
  std::uint64_t add_swap = 0, add_swap_mask = 0, compare = 0, compare_mask = 0;
};
inline constexpr std::size_t kAtomicRequestLen = 52;
struct AtomicResponse {  // RFC 7306 section 5.2
  std::uint32_t request_id = 0;
  std::uint64_t original_value = 0;
};
inline constexpr std::size_t kAtomicResponseLen = 12;

// One DDP segment with its RDMAP message header.
struct DdpSegment {
  DdpHeader ddp;
  bool has_read_request = false;
  RdmaReadRequest read;
  bool has_terminate = false;
  RdmapTerminate term;
  bool has_atomic_request = false;
  AtomicRequest atomic;
  bool has_atomic_response = false;
  AtomicResponse atomic_resp;
  bool has_immediate = false;
  std::uint64_t immediate = 0;       // RFC 7306: 8 bytes of Immediate Data
  std::uint32_t header_len = 0;      // DDP + RDMAP headers
  std::uint32_t payload_len = 0;     // ULP payload after the headers
};
// Decodes `ulpdu` (a whole ULPDU). Truncated: the captured bytes end inside the
// headers; malformed: a header that cannot be right (DV != 1 is reported by the
// caller, the fields are still decoded).
ParseStatus decode_ddp_segment(Bytes ulpdu, DdpSegment& out);

}  // namespace rdmadiag::decode
