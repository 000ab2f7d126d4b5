// NVMe over Fabrics capsules (NVMe-oF 1.1 section 2 "Capsules", section 3
// "Fabrics Command Set"; NVM Express Base 1.4 section 4.2 "Submission Queue
// Entry", 4.6 "Completion Queue Entry", 4.4 "Scatter Gather List"):
//  - a command capsule starts with the 64-byte submission queue entry (SQE),
//    optionally followed by in-capsule data;
//  - a response capsule starts with the 16-byte completion queue entry (CQE).
// NVMe structures are little-endian (unlike the network headers below them).
// The Fabrics commands (opcode 7Fh, type in byte 4): Connect (QID, SQSIZE,
// KATO; its 1024-byte data holds the host ID, controller ID, subsystem and host
// NQN), Property Get/Set (offset, size, value), Authentication Send/Receive and
// Disconnect. Data pointers in fabrics are SGL descriptors: a keyed data block
// (address, 24-bit length, 32-bit key; subtype Fh asks the target to invalidate
// the key) names host memory the target reaches with RDMA READ/WRITE, an offset
// data block names in-capsule data. Which RDMA messages carry capsules is the
// transport binding's business (nvme_rdma.h).
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::size_t kNvmeSqeLength = 64;
inline constexpr std::size_t kNvmeCqeLength = 16;
inline constexpr std::size_t kNvmeConnectDataLength = 1024;
inline constexpr std::uint8_t kNvmeFabricsOpcode = 0x7F;

// SGL descriptor type (NVMe Base 1.4 figure 114) in bits 7:4 of byte 15.
enum class SglType : std::uint8_t {
  data_block = 0,
  bit_bucket = 1,
  segment = 2,
  last_segment = 3,
  keyed_data_block = 4,
  transport_data_block = 5,
};
inline constexpr std::uint8_t kSglSubtypeAddress = 0x0;
inline constexpr std::uint8_t kSglSubtypeOffset = 0x1;
inline constexpr std::uint8_t kSglSubtypeInvalidateKey = 0xF;

struct SglDescriptor {
  std::uint8_t type = 0;      // SglType value (bits 7:4 of the identifier)
  std::uint8_t subtype = 0;   // bits 3:0
  std::uint64_t address = 0;  // address, or offset into the capsule's data
  std::uint32_t length = 0;   // keyed: 24 bits
  std::uint32_t key = 0;      // keyed only
  bool keyed() const { return type == static_cast<std::uint8_t>(SglType::keyed_data_block); }
  bool invalidate() const { return keyed() && subtype == kSglSubtypeInvalidateKey; }
  bool in_capsule() const { return type == static_cast<std::uint8_t>(SglType::data_block) && subtype == kSglSubtypeOffset; }
};

// Fabrics command types (NVMe-oF 1.1 figure 12).
enum class FabricsType : std::uint8_t {
  property_set = 0x00,
  connect = 0x01,
  property_get = 0x04,
  auth_send = 0x05,
  auth_receive = 0x06,
  disconnect = 0x08,
};

// What the queue a command was sent on is: admin (QID 0), I/O, or unknown (no
// Connect seen for it). Opcodes mean different things on admin and I/O queues.
enum class NvmeQueueKind : std::uint8_t { unknown, admin, io };

struct NvmeCommand {
  std::uint8_t opcode = 0;
  std::uint8_t fuse = 0;     // byte 1 bits 1:0
  std::uint8_t psdt = 0;     // byte 1 bits 7:6 (fabrics: SGLs)
  std::uint16_t cid = 0;
  std::uint32_t nsid = 0;    // not in Fabrics commands (byte 4 is their type)
  SglDescriptor sgl;         // SGL1 (bytes 24-39)
  std::array<std::uint32_t, 6> cdw{};  // command dwords 10-15 (bytes 40-63)
  // Fabrics (opcode 7Fh)
  std::uint8_t fctype = 0;
  // Connect (NVMe-oF 1.1 figure 19)
  std::uint16_t recfmt = 0, qid = 0, sqsize = 0;  // SQSIZE is 0's based
  std::uint8_t cattr = 0;
  std::uint32_t kato = 0;    // ms
  // Property Get/Set (figures 23, 26): size 4 or 8 bytes
  std::uint8_t property_size = 0;
  std::uint32_t property_offset = 0;
  std::uint64_t property_value = 0;  // Set only
  std::uint32_t in_capsule_bytes = 0; // bytes of the capsule after the SQE (captured or not)

  bool fabrics() const { return opcode == kNvmeFabricsOpcode; }
  bool is(FabricsType t) const { return fabrics() && fctype == static_cast<std::uint8_t>(t); }
  // NVM command set Read/Write/Compare/Write Zeroes (Base 1.4 section 6):
  // starting LBA in CDW10-11, number of logical blocks (0's based) in CDW12 15:0.
  std::uint64_t slba() const { return std::uint64_t{cdw[1]} << 32 | cdw[0]; }
  std::uint32_t blocks() const { return (cdw[2] & 0xFFFF) + 1; }
};

struct NvmeConnectData {
  std::array<std::uint8_t, 16> host_id{};
  std::uint16_t cntlid = 0;
  std::array<char, 256> subnqn{};  // NUL-terminated as on the wire (at most 255 bytes used)
  std::array<char, 256> hostnqn{};
  std::string_view subsystem() const;
  std::string_view host() const;
};

struct NvmeCompletion {
  std::uint32_t dw0 = 0, dw1 = 0;
  std::uint16_t sqhd = 0, sqid = 0, cid = 0;
  std::uint16_t status = 0;  // bytes 14-15 as on the wire: P in bit 0, the status field in 15:1
  bool phase() const { return status & 1; }
  std::uint8_t sc() const { return static_cast<std::uint8_t>(status >> 1); }       // status code
  std::uint8_t sct() const { return (status >> 9) & 7; }                           // status code type
  std::uint8_t crd() const { return (status >> 12) & 3; }
  bool more() const { return status & 0x4000; }
  bool dnr() const { return status & 0x8000; }
  bool success() const { return sc() == 0 && sct() == 0; }
};

// `capsule` is the whole capsule as captured; `capsule_len` its length on the
// wire (in-capsule data may be longer than what was captured). truncated: fewer
// than 64 bytes captured; malformed: shorter than an SQE on the wire.
ParseStatus parse_nvme_command(Bytes capsule, std::uint32_t capsule_len, NvmeCommand& out);
// The Connect command's data (in-capsule, or an RDMA READ of the host's buffer).
ParseStatus parse_nvme_connect_data(Bytes data, NvmeConnectData& out);
// truncated: fewer than 16 bytes captured.
ParseStatus parse_nvme_completion(Bytes capsule, NvmeCompletion& out);

std::string_view nvme_opcode_name(const NvmeCommand& c, NvmeQueueKind queue);
std::string_view fabrics_type_name(std::uint8_t fctype);
// SCT 1 (command specific) is named only for Connect (NVMe-oF 1.1 figure 21): other
// commands give the same codes other meanings.
std::string_view nvme_status_name(std::uint8_t sct, std::uint8_t sc, bool connect_command);
std::string_view nvme_property_name(std::uint32_t offset);
std::string_view sgl_type_name(std::uint8_t type);
// Read, Write, Compare, Write Zeroes, Write Uncorrectable, Verify: commands that name an LBA range.
bool nvme_io_has_lba(std::uint8_t opcode);

}  // namespace rdmadiag::decode
