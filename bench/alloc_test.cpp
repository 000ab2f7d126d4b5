// No heap allocation per packet in decode + analysis (the project rule): a
// counting global operator new, and the decode + Analyzer loop over generated
// traffic (many QPs, every operation kind, loss and go-back-N recovery, and
// the other encapsulations). After a warm-up that lets every per-flow
// structure reach its high-water mark (flow slots, request rings, latency
// reservoirs), the next packets must allocate nothing at all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "bench/capture_gen.h"
#include "bench/counting_new.h"
#include "decode/analyzer.h"
#include "decode/packet.h"

using rdmadiag::bench::g_allocations;

namespace {

using rdmadiag::decode::Bytes;
namespace decode = rdmadiag::decode;

// Generates `packets` frames of `encap` traffic and decodes + analyses each as it
// comes; returns the allocations made by decode + analysis (the generator's own
// excluded) during the frames after the first `warmup`.
std::uint64_t allocations_after_warmup(const std::string& encap, double loss, std::uint64_t packets,
                                       std::uint64_t warmup) {
  rdmadiag::bench::GenOptions o;
  o.encap = encap;
  o.packets = packets;
  o.qps = 4;
  o.loss = loss;
  decode::DecodeOptions opts;
  auto analyzer = std::make_unique<decode::Analyzer>();
  auto pkt = std::make_unique<decode::DecodedPacket>();
  auto pa = std::make_unique<decode::PacketAnalysis>();
  std::uint64_t frame = 0, counted = 0;
  std::uint32_t linktype = encap == "ib" ? decode::linktype::kInfiniband : decode::linktype::kEthernet;
  rdmadiag::bench::generate(o, [&](std::uint64_t ts_ns, Bytes b) {
    const std::uint64_t before = g_allocations.load();
    decode::decode_frame(linktype, b, static_cast<std::uint32_t>(b.size()), opts, *pkt);
    analyzer->add(*pkt, ++frame, static_cast<double>(ts_ns) * 1e-9, *pa);
    if (frame > warmup) counted += g_allocations.load() - before;
  });
  return counted;
}

TEST(ZeroAllocations, CounterCounts) {
  const std::uint64_t before = g_allocations.load();
  auto p = std::make_unique<int>(1);
  EXPECT_EQ(g_allocations.load() - before, 1u);
}

// 4 connections, 2,000,000 packets of warm-up (500,000 per connection, so that
// every latency reservoir of 8,192 samples per operation class is full), then
// 1,000,000 packets that must allocate nothing at all.
TEST(ZeroAllocations, RoceV2SteadyState) { EXPECT_EQ(allocations_after_warmup("roce_v2", 0, 3'000'000, 2'000'000), 0u); }
TEST(ZeroAllocations, MixedSteadyState) { EXPECT_EQ(allocations_after_warmup("mix", 0, 3'000'000, 2'000'000), 0u); }
TEST(ZeroAllocations, NativeIbSteadyState) { EXPECT_EQ(allocations_after_warmup("ib", 0, 3'000'000, 2'000'000), 0u); }

// With loss (NAKs, go-back-N resends, gaps): the anomaly log records every
// event in a vector that grows geometrically, and rare-event reservoirs
// (recovery times) grow the same way; so a few growths over a million packets,
// never one per packet.
TEST(ZeroAllocations, WithLossOnlyGeometricGrowth) {
  EXPECT_LE(allocations_after_warmup("roce_v2", 0.0005, 3'000'000, 2'000'000), 4u);
  EXPECT_LE(allocations_after_warmup("mix", 0.0005, 3'000'000, 2'000'000), 4u);
}

}  // namespace
