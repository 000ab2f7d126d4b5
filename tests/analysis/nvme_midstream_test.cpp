// Mid-stream NVMe-oF on RoCE without rdma_cm (decode/nvme_analysis.h): a host
// queue pair's first unmatched completion names its queue, and the controller's
// queue pair is the one whose latest unbound commands hold the completion's
// CID. Expected values by construction: queue pair i (controller QPN 0x1000+i,
// host QPN 0x2000+i) carries CID i, so each host queue pair has exactly one
// candidate, and after pairing every later command completes on its queue.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "decode/nvme_analysis.h"
#include "decode/packet.h"
#include "tests/analysis/nvme_capsules.h"

using namespace rdmadiag::decode;

using test::capsule_packet;
using test::command;
using test::completion;

TEST(NvmeMidstream, PairsEachHostQueuePairWithAFewLooksWhateverTheirNumber) {
  NvmeAnalyzer nvme;
  nvme.set_assume_all(true);
  constexpr std::uint32_t kQps = 4000;  // under kMaxQueuePairs / 2: none retired
  std::uint64_t frame = 0;
  const auto send = [&](bool to_controller, std::uint32_t qp, const std::vector<std::uint8_t>& c) {
    ++frame;
    nvme.add(capsule_packet(to_controller, qp, c), frame, static_cast<std::int64_t>(frame) * 1000, nullptr);
  };
  for (std::uint32_t i = 0; i < kQps; ++i) send(true, 0x1000 + i, command(static_cast<std::uint16_t>(i)));
  for (std::uint32_t i = 0; i < kQps; ++i) send(false, 0x2000 + i, completion(static_cast<std::uint16_t>(i + 1), static_cast<std::uint16_t>(i)));
  EXPECT_EQ(nvme.totals().unmatched_responses, kQps);
  // One candidate looked at per host queue pair (the scan it replaced: every queue pair).
  EXPECT_LE(nvme.peer_probes(), 2u * kQps);
  for (std::uint32_t i = 0; i < kQps; ++i) send(true, 0x1000 + i, command(static_cast<std::uint16_t>(i + 50000)));
  for (std::uint32_t i = 0; i < kQps; ++i)
    send(false, 0x2000 + i, completion(static_cast<std::uint16_t>(i + 1), static_cast<std::uint16_t>(i + 50000)));
  nvme.finish();
  EXPECT_EQ(nvme.totals().completed, kQps);  // every controller queue pair was bound to its host's queue
  EXPECT_EQ(nvme.totals().unbound_commands, kQps);
}

// A CID held by two controller queue pairs between the same hosts cannot say
// which one a completion's host queue pair talks to: no pairing, no guess.
TEST(NvmeMidstream, ACidHeldByTwoQueuePairsDoesNotPair) {
  NvmeAnalyzer nvme;
  nvme.set_assume_all(true);
  std::uint64_t frame = 0;
  const auto send = [&](bool to_controller, std::uint32_t qp, const std::vector<std::uint8_t>& c) {
    ++frame;
    nvme.add(capsule_packet(to_controller, qp, c), frame, static_cast<std::int64_t>(frame) * 1000, nullptr);
  };
  send(true, 0x1000, command(7));
  send(true, 0x1001, command(7));
  send(false, 0x2000, completion(1, 7));
  send(true, 0x1000, command(8));  // neither controller queue pair is bound: unpaired again
  send(false, 0x2000, completion(1, 8));
  nvme.finish();
  EXPECT_EQ(nvme.totals().completed, 0u);
}
