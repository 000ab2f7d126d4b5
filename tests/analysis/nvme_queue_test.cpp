// NVMe queue bookkeeping (decode/nvme_analysis.h) on hand-built capsules.
// Expected values by hand from NVMe Base 1.4 section 4.2 (a CID names one
// outstanding command of its submission queue): every command a queue saw is
// completed or left unanswered, none vanishes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "decode/nvme_analysis.h"
#include "tests/analysis/nvme_capsules.h"

using namespace rdmadiag::decode;

namespace {

constexpr std::uint32_t kControllerQp = 0x11, kHostQp = 0x12;

struct Feed {
  NvmeAnalyzer nvme;
  std::uint64_t frame = 0;
  Feed() { nvme.set_assume_all(true); }
  void send(bool to_controller, const std::vector<std::uint8_t>& capsule) {
    ++frame;
    nvme.add(test::capsule_packet(to_controller, to_controller ? kControllerQp : kHostQp, capsule), frame,
             static_cast<std::int64_t>(frame) * 1000, nullptr);
  }
};

}  // namespace

// Command 3 (CID 5) never completes in the capture; command 4 reuses CID 5
// (its completion was not captured) and completes. Command 3 is unanswered.
TEST(NvmeQueue, ACidReusedWhileOutstandingLeavesTheEarlierCommandUnanswered) {
  Feed f;
  f.send(true, test::connect(0, 1));
  f.send(false, test::completion(1, 0));
  f.send(true, test::command(5, 0x02, 100));
  f.send(true, test::command(5, 0x02, 900));
  f.send(false, test::completion(1, 5));
  f.nvme.finish();
  const NvmeTotals& t = f.nvme.totals();
  EXPECT_EQ(t.commands, 3u);
  EXPECT_EQ(t.duplicate_cids, 1u);
  EXPECT_EQ(t.completed, 2u);
  EXPECT_EQ(t.unanswered, 1u);
  ASSERT_EQ(f.nvme.unanswered().size(), 1u);
  EXPECT_EQ(f.nvme.unanswered()[0].command_frame, 3u);
  EXPECT_EQ(f.nvme.unanswered()[0].slba, 100u);
  ASSERT_EQ(f.nvme.queues().size(), 1u);
  const NvmeQueueStats& q = f.nvme.queues()[0];
  EXPECT_EQ(q.commands, 3u);
  EXPECT_EQ(q.completed, 2u);
  EXPECT_EQ(q.unanswered, 1u);
}
