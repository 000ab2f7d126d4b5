// analyze -j: no heap allocation per packet in the sharded pipeline either (the
// project rule): every shard's pass over every frame (shard key, assignment,
// and for its own frames decode + analysis + tally + address check). A counting
// global operator new; after a warm-up that lets every per-flow structure reach
// its high-water mark, a million more frames through every ShardPass must
// allocate nothing at all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "bench/capture_gen.h"
#include "bench/counting_new.h"
#include "cli/parallel_analysis.h"

using rdmadiag::bench::g_allocations;

namespace {

namespace decode = rdmadiag::decode;

// Allocations by the shards' passes (fed here one after the other, as their
// threads would each read the file); the generator's own, between frames, excluded.
std::uint64_t allocations_after_warmup(const std::string& encap, unsigned shards, bool tally, std::uint64_t packets,
                                       std::uint64_t warmup) {
  rdmadiag::bench::GenOptions o;
  o.encap = encap;
  o.packets = packets;
  o.qps = 4;
  o.loss = 0;  // no anomalies: the anomaly list, which grows geometrically with them, stays empty
  decode::DecodeOptions opts;
  std::vector<std::unique_ptr<rdmadiag::cli::ShardPass>> passes;
  for (unsigned i = 0; i < shards; ++i) passes.push_back(std::make_unique<rdmadiag::cli::ShardPass>(i, shards, opts, 0, tally));
  const std::uint32_t linktype = encap == "ib" ? decode::linktype::kInfiniband : decode::linktype::kEthernet;
  std::uint64_t frame = 0, counted = 0, before = 0;
  rdmadiag::capture::Record rec;
  rdmadiag::bench::t_not_counted = true;
  rdmadiag::bench::generate(o, [&](std::uint64_t ts_ns, decode::Bytes b) {
    rdmadiag::bench::t_not_counted = false;
    if (++frame == warmup + 1) before = g_allocations.load();
    rec.ts_sec = static_cast<std::int64_t>(ts_ns / 1'000'000'000);
    rec.ts_nsec = static_cast<std::uint32_t>(ts_ns % 1'000'000'000);
    rec.caplen = rec.wirelen = static_cast<std::uint32_t>(b.size());
    rec.data = b;
    for (auto& p : passes) p->frame(rec, linktype);
    rdmadiag::bench::t_not_counted = true;
  });
  rdmadiag::bench::t_not_counted = false;
  counted = g_allocations.load() - before;
  EXPECT_GE(frame, packets);
  for (auto& p : passes) EXPECT_GT(p->frames(), 0u);
  auto result = rdmadiag::cli::ParallelAnalysis::merge(passes, tally);
  EXPECT_TRUE(result.exact);
  EXPECT_GT(result.analyzer->summary().packets, 0u);
  return counted;
}

// 4 connections, 2,000,000 frames of warm-up (the latency reservoirs fill up at
// 8,192 samples per operation class and flow), then 1,000,000 frames.
TEST(JobsZeroAllocations, RoceV2TwoShards) {
  EXPECT_EQ(allocations_after_warmup("roce_v2", 2, false, 3'000'000, 2'000'000), 0u);
}
TEST(JobsZeroAllocations, MixedThreeShards) {
  EXPECT_EQ(allocations_after_warmup("mix", 3, false, 3'000'000, 2'000'000), 0u);
}
// With the tally of the JSON report: each flow's timeline events grow a vector
// geometrically up to FlowTally::kMaxEvents (as with one thread); never one
// allocation per packet.
TEST(JobsZeroAllocations, WithTallyOnlyGeometricGrowth) {
  EXPECT_LE(allocations_after_warmup("roce_v2", 2, true, 3'000'000, 2'000'000), 4u * 10u);
}

}  // namespace
