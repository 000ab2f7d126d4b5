// Which NVMe command an RDMA READ or WRITE moves data for (NVMe-oF 1.1 section
// 7.3, RDMA transport binding; NVMe Base 1.4 section 4.4 keyed SGL data block):
// a command whose SGL is a keyed data block names host memory by (address,
// length, key); the controller moves the data with RDMA WRITE (a Read: into
// the host) or RDMA READ (a Write: from the host), whose RETH names the same
// key and an address inside that block (IBA 9.4.3 RDMA WRITE, 9.4.4 RDMA READ).
// Only the first packet of an RDMA WRITE and the READ request carry a RETH; the
// other packets of the operation are known by PSN: a WRITE's packets and a
// READ's responses take the PSNs from the first packet's (request's) onwards,
// one per path MTU of data (IBA 9.4.3, 9.4.4, 9.7.4.1.4). So every packet of an
// operation is credited, resends included, even when its first packet is lost.
// The path MTU is learnt from the first and middle packets (exactly one PMTU of
// payload); until one is seen, 256 bytes (the smallest) bounds the range.
//
// Over iWARP (RFC 5040 sections 4.3-4.4, RFC 5041 section 4.2) every segment
// of an RDMA Write names the STag and tagged offset it places (the keyed SGL's
// key and an address inside it); a Read Request names the source STag and
// offset (the SGL's) and the sink STag and offset its Read Responses carry, so
// each response segment is known by (sink STag, offset). A Write message's
// segments go one after the other on the TCP stream: its first segment is
// the first after a segment with the Last flag.
//
// One matcher per NVMe queue: fixed size (a ring of the last kSlots
// operations), whatever the traffic.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>

#include "decode/packet.h"

namespace rdmadiag::decode {

// The command a data packet belongs to: its CID and the key it was matched by
// (so a CID reused by a later command is not credited with stale data).
struct NvmeDataTarget {
  std::uint16_t cid = 0;
  std::uint32_t key = 0;
};

// What a data packet adds to its command.
struct NvmeDataPacket {
  NvmeDataTarget target;
  bool starts_operation = false;  // a READ request or the first packet of a WRITE
  bool names_range = false;       // address and length say where in the SGL it reaches
  std::uint64_t address = 0;      // RETH (iWARP: Read Request source, Write segment's tagged offset)
  std::uint32_t length = 0;
};

class NvmeDataMatcher {
 public:
  static constexpr std::size_t kSlots = 32;
  // The outstanding command whose keyed SGL holds (key, address), if any.
  using FindByKey = std::function<std::optional<std::uint16_t>(std::uint32_t key, std::uint64_t address)>;

  // A READ/WRITE request or READ response packet of this queue; nullopt when
  // no outstanding command is named (or the operation it continues did not name one).
  std::optional<NvmeDataPacket> on_packet(const DecodedPacket& p, const FindByKey& find);

 private:
  struct Operation {
    bool used = false;
    bool read = false;
    std::uint32_t psn = 0;       // of the first packet / the request
    std::uint32_t length = 0;    // RETH DMA length
    std::optional<NvmeDataTarget> target;
  };
  std::optional<NvmeDataPacket> start(const DecodedPacket& p, const FindByKey& find);
  const Operation* continued(std::uint32_t psn, bool read) const;
  void learn_pmtu(std::uint32_t payload_len);
  std::array<Operation, kSlots> ops_{};
  std::size_t next_ = 0;
  std::uint32_t pmtu_ = 0;  // learnt; 0 unknown
};

struct DdpSegment;

class NvmeIwarpDataMatcher {
 public:
  static constexpr std::size_t kSlots = 32;
  using FindByKey = NvmeDataMatcher::FindByKey;

  // An RDMA Write, Read Request or Read Response segment of this queue's connection.
  std::optional<NvmeDataPacket> on_segment(const DdpSegment& seg, const FindByKey& find);

 private:
  struct Read {
    bool used = false;
    std::uint32_t sink_stag = 0;
    std::uint64_t sink_to = 0;
    std::uint32_t size = 0;
    std::optional<NvmeDataTarget> target;
  };
  std::array<Read, kSlots> reads_{};
  std::size_t next_ = 0;
  bool write_open_ = false;  // the last Write segment seen did not end its message
};

}  // namespace rdmadiag::decode
