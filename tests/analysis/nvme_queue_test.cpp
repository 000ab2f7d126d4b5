// NVMe queue bookkeeping (decode/nvme_analysis.h) on hand-built capsules.
// Expected values by hand from NVMe Base 1.4 section 4.2 (a CID names one
// outstanding command of its submission queue): every command a queue saw is
// completed or left unanswered, none vanishes.
#include <gtest/gtest.h>

#include <algorithm>
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
  // Each capsule its own PSN, unless `psn` names the one of a copy.
  void send(bool to_controller, const std::vector<std::uint8_t>& capsule, std::int64_t psn = -1) {
    ++frame;
    const auto at = static_cast<std::uint32_t>(psn >= 0 ? psn : static_cast<std::int64_t>(frame));
    nvme.add(test::capsule_packet(to_controller, to_controller ? kControllerQp : kHostQp, capsule, at), frame,
             static_cast<std::int64_t>(frame) * 1000, nullptr);
  }
};

// What the totals must say, by hand.
struct Counts {
  std::uint64_t commands, responses, completed, unanswered, duplicate_cids, resent_commands, resent_responses;
};

void expect_counts(const NvmeTotals& t, const Counts& want) {
  EXPECT_EQ(t.commands, want.commands);
  EXPECT_EQ(t.responses, want.responses);
  EXPECT_EQ(t.completed, want.completed);
  EXPECT_EQ(t.unanswered, want.unanswered);
  EXPECT_EQ(t.duplicate_cids, want.duplicate_cids);
  EXPECT_EQ(t.resent_commands, want.resent_commands);
  EXPECT_EQ(t.resent_responses, want.resent_responses);
  EXPECT_EQ(t.unmatched_responses, 0u);
}

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
  expect_counts(f.nvme.totals(), {.commands = 3, .responses = 2, .completed = 2, .unanswered = 1, .duplicate_cids = 1,
                                  .resent_commands = 0, .resent_responses = 0});
  ASSERT_EQ(f.nvme.unanswered().size(), 1u);
  EXPECT_EQ(f.nvme.unanswered()[0].command_frame, 3u);
  EXPECT_EQ(f.nvme.unanswered()[0].slba, 100u);
  ASSERT_EQ(f.nvme.queues().size(), 1u);
  const NvmeQueueStats& q = f.nvme.queues()[0];
  EXPECT_EQ(q.commands, 3u);
  EXPECT_EQ(q.completed, 2u);
  EXPECT_EQ(q.unanswered, 1u);
}

// IBA 9.7.4.1: an RC resend keeps its PSN. A command capsule resent after its
// completion (the ACK was lost) and a completion resent after the host reused
// the CID are copies: one command, completed once, by the first copy of its
// completion; the next command with that CID waits for its own completion.
TEST(NvmeQueue, ALateCopyOfACapsuleIsNeitherANewCommandNorAnotherCompletion) {
  Feed f;
  f.send(true, test::connect(0, 1));
  f.send(false, test::completion(1, 0));
  f.send(true, test::command(7, 0x02, 100));  // frame 3, PSN 3
  f.send(false, test::completion(1, 7));      // frame 4, PSN 4
  f.send(true, test::command(7, 0x02, 100), 3);
  f.send(true, test::command(7, 0x01, 200));  // frame 6: CID 7 again, a new command
  f.send(false, test::completion(1, 7), 4);   // a copy of frame 4
  f.send(false, test::completion(1, 7));      // frame 8: completes frame 6
  f.nvme.finish();
  expect_counts(f.nvme.totals(), {.commands = 3, .responses = 3, .completed = 3, .unanswered = 0, .duplicate_cids = 0,
                                  .resent_commands = 1, .resent_responses = 1});
  const auto& done = f.nvme.slowest();
  const auto sixth = std::find_if(done.begin(), done.end(), [](const NvmeCommandResult& r) { return r.command_frame == 6; });
  ASSERT_NE(sixth, done.end());
  EXPECT_EQ(sixth->response_frame, 8u);
}

// A host that gets no answer to a Connect reconnects on new queue pairs with a
// new Connect for the same QID, here with the same CID (a host that numbers
// its commands from 0 on each queue pair): a new queue, completed by the
// answer on the new queue pairs; the first Connect stays unanswered.
TEST(NvmeQueue, AReconnectWithTheSameCidStartsTheQueueAfresh) {
  Feed f;
  f.send(true, test::connect(0, 1));  // frame 1, queue pair 0x11: never answered
  const auto on = [&f](bool to_controller, std::uint32_t qp, const std::vector<std::uint8_t>& capsule, std::uint32_t psn) {
    ++f.frame;
    f.nvme.add(test::capsule_packet(to_controller, qp, capsule, psn), f.frame, static_cast<std::int64_t>(f.frame) * 1000,
               nullptr);
  };
  on(true, 0x21, test::connect(0, 1), 500);     // frame 2, new queue pairs 0x21 / 0x22
  on(false, 0x22, test::completion(1, 0), 600);  // frame 3
  f.nvme.finish();
  ASSERT_EQ(f.nvme.unanswered().size(), 1u);
  EXPECT_EQ(f.nvme.unanswered()[0].command_frame, 1u);
  ASSERT_EQ(f.nvme.slowest().size(), 1u);
  EXPECT_EQ(f.nvme.slowest()[0].command_frame, 2u);
  expect_counts(f.nvme.totals(), {.commands = 2, .responses = 1, .completed = 1, .unanswered = 1, .duplicate_cids = 0,
                                  .resent_commands = 0, .resent_responses = 0});
}
