// Linux cooked capture headers: SLL (LINKTYPE_LINUX_SLL, 113, 16 bytes) and SLL2
// (LINKTYPE_LINUX_SLL2, 276, 20 bytes), what `tcpdump -i any` writes
// (see the pcap-linktype(7) / tcpdump.org link-layer header descriptions).
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

struct SllHeader {
  std::uint16_t packet_type;  // 0 to us, 1 broadcast, 2 multicast, 3 other host, 4 sent by us
  std::uint16_t arphrd_type;
  std::uint32_t ifindex;      // SLL2 only
  std::uint16_t protocol;     // ethertype
  std::uint16_t header_len;
};

ParseStatus parse_sll(Bytes frame, SllHeader& out);
ParseStatus parse_sll2(Bytes frame, SllHeader& out);

}  // namespace rdmadiag::decode
