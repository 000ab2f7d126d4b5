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
#include "tests/analysis/two_hosts_packet.h"

using namespace rdmadiag::decode;

namespace {

constexpr std::uint8_t kSendOnly = 0x04;

// A RoCE SEND carrying `capsule`: host A -> controller B (a command), or back.
DecodedPacket capsule_packet(bool to_controller, std::uint32_t dest_qp, const std::vector<std::uint8_t>& capsule) {
  DecodedPacket p = test::two_hosts_packet(to_controller, kSendOnly, 0);
  p.ib.bth.dest_qp = dest_qp;
  p.payload = Bytes(capsule.data(), capsule.size());
  p.payload_len = static_cast<std::uint32_t>(capsule.size());
  return p;
}

std::vector<std::uint8_t> command(std::uint16_t cid) {  // an NVM Read SQE (NVMe Base 1.4 figure 104)
  std::vector<std::uint8_t> sqe(kNvmeSqeLength, 0);
  sqe[0] = 0x02;
  sqe[2] = static_cast<std::uint8_t>(cid);
  sqe[3] = static_cast<std::uint8_t>(cid >> 8);
  return sqe;
}

std::vector<std::uint8_t> completion(std::uint16_t sqid, std::uint16_t cid) {  // a CQE (figure 124), success
  std::vector<std::uint8_t> cqe(kNvmeCqeLength, 0);
  cqe[10] = static_cast<std::uint8_t>(sqid);
  cqe[11] = static_cast<std::uint8_t>(sqid >> 8);
  cqe[12] = static_cast<std::uint8_t>(cid);
  cqe[13] = static_cast<std::uint8_t>(cid >> 8);
  return cqe;
}

}  // namespace

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
