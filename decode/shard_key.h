// Which shard of a multi-threaded analysis (`analyze -j N`) a frame belongs to.
// Everything the stateful analysis relates travels between the same two
// endpoint addresses: both directions of a queue pair, its CM MADs (IBA 12.6,
// sent between the same ports), an iWARP TCP connection (RFC 5044 over RFC 793).
// So the key is the unordered pair of those addresses, taken exactly where the
// analysis takes them (transport_analysis.cpp, iwarp_analysis.cpp): the IPv4 or
// IPv6 header (RoCEv2, iWARP), else the LRH's LIDs (native IB, IBA 7.7), else
// the GRH's GIDs (RoCEv1, IBA Annex A16). A light parse of the link and network
// headers only, run by the reader thread; the full decode runs in the shards.
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/packet.h"

namespace rdmadiag::decode {

struct ShardKey {
  bool has_addresses = false;  // false: no endpoint addresses (the frame relates to nothing)
  std::uint64_t hash = 0;      // of the unordered address pair; equal for both directions
  bool operator==(const ShardKey&) const = default;
};

// From the captured bytes, following the same headers decode_frame() follows.
ShardKey shard_key(std::uint32_t linktype, Bytes frame);
// From a decoded frame: what the analysis keyed it by. The shards compare this
// with the reader's key for every frame the analysis keeps state for.
ShardKey shard_key(const DecodedPacket& p);
// Whether the frame is an Ethernet MAC Control frame (PAUSE/PFC, mac_control.h):
// it has no endpoint addresses, but every shard keeps the pause state it sets,
// since the RoCE frames of every shard are checked against it (pfc_analysis.h).
// Like the key, a light parse: it accepts every frame decode_frame() decodes as one.
bool is_pause_state_frame(std::uint32_t linktype, Bytes frame);
// Whether the analysis keeps state for this frame (so its shard matters).
inline bool analysis_keyed(const DecodedPacket& p) { return (p.is_rdma() && p.has_bth) || p.tcp.has_value(); }

}  // namespace rdmadiag::decode
