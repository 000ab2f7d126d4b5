// Synthetic RDMA traffic for the benchmarks and the allocation test: see
// capture_gen.cpp for the traffic model. Frames go to a sink, so a caller can
// write a file (gen_capture) or keep them in memory (micro-benchmarks).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "decode/byte_reader.h"

namespace rdmadiag::bench {

enum class Encap { roce_v2_ipv4, roce_v2_ipv6, roce_v1, ib, iwarp };

struct GenOptions {
  std::string encap = "roce_v2";  // roce_v2 (IPv4), roce_v2_ipv6, roce_v1, ib, iwarp, mix
  std::uint64_t packets = 1'000'000;
  std::uint32_t qps = 64;          // connections
  std::uint32_t clients = 16;      // RC connections' client hosts (1..254), connection i on client i % clients
  std::uint32_t servers = 4;       // and servers: 1 and 1 put every connection between the same two ends
  double loss = 0.0005;            // fraction of requests lost before the capture point
  double ce = 0;                   // fraction of requests marked CE (each answered by a CNP, DCQCN-paced)
  std::uint32_t min_payload = 64;  // of a message's last packet; the others carry the PMTU
  std::uint32_t max_payload = 1024;
  std::uint64_t seed = 1;
};

// A frame and its timestamp (nanoseconds since the epoch).
using FrameSink = std::function<void(std::uint64_t ts_ns, decode::Bytes frame)>;

bool parse_encap(const std::string& name, std::vector<Encap>& kinds);
// Generates at least o.packets frames (whole operations); returns the pcap link
// type (1 Ethernet, 247 InfiniBand), 0 for an unknown encapsulation.
std::uint32_t generate(const GenOptions& o, const FrameSink& sink);

}  // namespace rdmadiag::bench
