// `analyze -j N`: the analysis spread over N threads by connection.
// A classic pcap file is split between the threads (cli/split_read.h: each
// part read and walked by one, each record's shard assigned once, every thread
// reads only its own records); any other input every thread reads whole itself
// (its own FileReader), finding each record's shard with a light header parse
// (decode/shard_key.h). Each thread decodes (ICRC included, unless the split's
// walk verified it: decode/icrc_hint.h) and analyses only the records of its
// own shard, in frame order with their original numbers and times, in its own
// decode::Analyzer; every shard also keeps the pause state
// of every MAC Control frame (decode/shard_key.h is_pause_state_frame).
// Which shard an address pair belongs to is decided when the pair first
// appears, by a rule of the input alone (ShardAssigner, FrameAssigner), so the
// result does not depend on timing. At the end the shards are merged
// (decode/analyzer_merge.h) into the results one thread would have produced.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/file_reader.h"
#include "decode/analyzer.h"
#include "decode/packet.h"
#include "decode/shard_key.h"
#include "exporters/flow_tally.h"

namespace rdmadiag::cli {

// The shard of each frame: an address pair's shard is the one given the fewest
// pairs so far (then the fewest frames, then the lowest index), chosen when the
// pair first appears; frames between no two endpoints take the shards in turn.
// A function of the frames seen so far, so every thread computes the same.
// Bounded: beyond kMaxPairs, new pairs go by their hash.
class ShardAssigner {
 public:
  explicit ShardAssigner(unsigned shards) : pairs_(shards), frames_(shards) {}
  std::size_t shard(std::uint64_t frame, const decode::ShardKey& key);

 private:
  std::size_t assign(std::uint64_t key);
  static constexpr std::size_t kMaxPairs = std::size_t{1} << 18;
  std::vector<std::uint64_t> pairs_, frames_;
  std::unordered_map<std::uint64_t, std::uint32_t> shard_of_pair_;
  struct RecentPair {  // in front of the map: a capture's busy pairs are few
    std::uint64_t key = 0;
    std::uint32_t shard = 0;
    bool valid = false;
  };
  std::array<RecentPair, 256> recent_{};
};

// The assignment of frames in input order (numbered from 1 across all inputs):
// what every ShardPass computes for itself, or a reader computes once for all
// of them (SplitRead) and hands back at the end of the input (ShardPass::adopt).
class FrameAssigner {
 public:
  explicit FrameAssigner(unsigned shards);
  // The next frame's shard; `key` becomes what the analysis checks it against.
  std::size_t next(decode::ShardKey& key) {
    ++assigned_;
    if (assigned_ == bad_key_frame_) key.hash ^= 1;
    return assigner_.shard(assigned_, key);
  }
  std::uint64_t frames() const { return assigned_; }  // frames assigned so far (the last one's number)
  // Exact copies among all frames, in frame order (whoever assigns feeds it):
  // the same count as -j 1's, whatever the shards.
  decode::CopyDetector& copies() { return copies_; }
  const decode::CopyDetector& copies() const { return copies_; }

 private:
  ShardAssigner assigner_;
  std::uint64_t assigned_ = 0;       // frames assigned
  std::uint64_t bad_key_frame_ = 0;  // RDMADIAG_JOBS_TEST_BAD_KEY
  decode::CopyDetector copies_;
};

// One shard's pass over the whole input: every frame goes through frame(), the
// shard's own are analysed.
class ShardPass {
 public:
  // `tally`: also keep the per-frame tally (timeline, histograms) of the JSON/HTML/metrics reports.
  // `pfc`: the pause analysis' options (link speed, storm threshold, DSCP map).
  ShardPass(unsigned index, unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override, bool tally,
            const decode::PfcOptions& pfc = {});

  // The next record of the input (frames are numbered from 1 across all inputs),
  // seen at capture point `point` (decode::DecodedPacket::capture_point).
  void frame(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point = 0);
  // The same, its shard key already read: `read()` gives the record and is
  // called only when this shard needs its bytes or its time.
  template <class ReadRecord>
  void frame_keyed(decode::ShardKey key, std::uint32_t linktype, ReadRecord&& read, bool pause_state) {
    const bool own = assign(key);
    if (index_ == 0) {  // every shard assigns every frame here; one counts the copies
      const capture::Record& rec = read();
      assigner_.copies().add(rec.data, rec.ts_ns());
    }
    frame_assigned(own, key, linktype, read, pause_state);
  }
  // The two halves of frame_keyed: whether the next frame to be assigned is this
  // shard's (`key` becomes what the analysis checks it against), then the next
  // frame to be analysed. SplitRead assigns once for every shard instead, with
  // a copy of assigner(), and hands the state back after the input (adopt).
  bool assign(decode::ShardKey& key) { return assigner_.next(key) == index_; }
  const FrameAssigner& assigner() const { return assigner_; }
  void adopt(const FrameAssigner& assigner) { assigner_ = assigner; }
  // `icrc`: the frame's ICRC as the reader verified it, if it did (decode/icrc_hint.h).
  template <class ReadRecord>
  void frame_assigned(bool own, const decode::ShardKey& key, std::uint32_t linktype, ReadRecord&& read,
                      bool pause_state, const decode::IcrcHint& icrc = {});
  // The frames up to `frame` passed without this shard (none of them its own, a
  // pause frame, a sweep point or the first; see needs_frame): the next one
  // frame_assigned() sees is frame + 1.
  void skip_to(std::uint64_t frame) { frame_ = frame; }
  // Whether a frame that is not this shard's still has to go through frame_assigned().
  static bool needs_frame(std::uint64_t frame, bool pause_state) {
    return pause_state || frame % decode::Analyzer::kSweepFrames == 0 || frame == 1;
  }

  decode::Analyzer& analyzer() { return *analyzer_; }
  exporters::FlowTally* tally() { return tally_.get(); }
  std::uint64_t frames() const { return frames_; }       // analysed by this shard
  std::uint64_t misrouted() const { return misrouted_; }  // see ParallelAnalysis::Result::exact
  double origin() const { return origin_; }

 private:
  void own_frame(const capture::Record& rec, std::uint32_t linktype, const decode::ShardKey& key, double ts,
                 const decode::IcrcHint& icrc);
  void other_frame(const capture::Record& rec, std::uint32_t linktype, bool pause_state, bool sweep_point, double ts);

  unsigned index_;
  FrameAssigner assigner_;
  decode::DecodeOptions opts_;
  std::unique_ptr<decode::Analyzer> analyzer_;
  std::unique_ptr<exporters::FlowTally> tally_;
  std::unique_ptr<decode::DecodedPacket> pkt_;
  std::unique_ptr<decode::PacketAnalysis> pa_;  // ~12 KB, reused
  std::uint64_t frame_ = 0, frames_ = 0, misrouted_ = 0;
  double origin_ = 0;
  bool sweep_pending_ = false;
  double sweep_now_ = 0;
  std::uint16_t point_ = 0;  // the capture point of the frame being read (frame())
};

template <class ReadRecord>
void ShardPass::frame_assigned(bool own, const decode::ShardKey& key, std::uint32_t linktype, ReadRecord&& read,
                               bool pause_state, const decode::IcrcHint& icrc) {
  ++frame_;
  const bool sweep_point = frame_ % decode::Analyzer::kSweepFrames == 0;
  if (!own && !needs_frame(frame_, pause_state)) return;  // none of its bytes touched
  const capture::Record rec = read();
  const double ts = static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9;  // as AnalysisSession::frame
  if (frame_ == 1) origin_ = ts;
  if (own)
    own_frame(rec, linktype, key, ts, icrc);
  else
    other_frame(rec, linktype, pause_state, sweep_point, ts);
}

class ParallelAnalysis {
 public:
  ParallelAnalysis(unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override, bool tally,
                   const decode::PfcOptions& pfc = {});

  struct Input {  // what the first shard's reader found in each input
    std::string path, error;
    std::uint32_t linktype = 0, snaplen = 0;
    std::vector<std::string> point_names;  // capture::FileReader::point_names
    std::uint64_t records = 0;
    std::string stop_reason;
  };
  struct Result {
    // Merged, finished. Its flows are the shards' summaries where they are
    // (TransportAnalyzer::merge): this ParallelAnalysis (or keep_shards_until_exit)
    // must outlive it.
    std::unique_ptr<decode::Analyzer> analyzer;
    std::unique_ptr<exporters::FlowTally> tally;  // merged (when asked for)
    std::vector<Input> inputs;
    // False when a frame's decoded endpoint addresses put it in another shard
    // than the light parse did, a CM REP answered a REQ of another shard, the
    // shards' pause states differ, or
    // the readers did not all read the same records: the merge would not be
    // exact (run one thread).
    bool exact = true;
    bool bounds_reached = false;  // a shard reached a flow-table bound (docs/analysis.md)
    std::vector<std::uint64_t> frames_per_shard;
    std::uint64_t split_rewalks = 0;  // SplitRead::rewalks() over all inputs
    std::uint64_t split_icrc_verified = 0;  // SplitRead::icrc_verified() over all inputs
  };

  // Reads `paths` in order on every shard's thread (the calling thread is shard
  // 0's and shows the progress bar when `progress`), then merges.
  Result run(const std::vector<std::string>& paths, bool progress);

  // After a merge whose results the process reports before it exits: the
  // shards' analyses are left to the kernel, as AnalysisSession's own
  // (keep_analysis_until_exit), instead of freed flow by flow on the main
  // thread (1M connections, -j 2: ~5 % of the CPU); the merged analysis lists
  // their flows' summaries in place. Reachable, for leak checkers.
  void keep_shards_until_exit();

  // The merge of finished passes over the same input (also for tests that feed ShardPass directly).
  static Result merge(std::vector<std::unique_ptr<ShardPass>>& passes, bool tally);

 private:
  std::vector<std::unique_ptr<ShardPass>> passes_;
  bool tally_ = false;
  std::uint64_t split_rewalks_ = 0, split_icrc_verified_ = 0;
};

}  // namespace rdmadiag::cli
