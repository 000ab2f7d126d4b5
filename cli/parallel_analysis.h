// `analyze -j N`: the analysis spread over N worker threads by connection.
// The reader (the caller's thread) reads records, finds each one's shard with a
// light header parse (decode/shard_key.h) and copies it into that shard's batch
// (the reader's bytes last only until its next record); each of N - 1 workers
// decodes (ICRC included) and analyses its shard's frames in frame order with
// their original numbers and times, in its own decode::Analyzer; the reader
// analyses shard 0 itself, in place. At the end the shards are merged
// (decode/analyzer_merge.h) into the results one thread would have produced.
// Memory: (N - 1) x kPoolBatches batches of ~kBatchBytes, whatever the length
// of the input.
#pragma once
#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "capture/file_reader.h"
#include "decode/analyzer.h"
#include "decode/packet.h"
#include "decode/shard_key.h"
#include "exporters/flow_tally.h"

namespace rdmadiag::cli {

class ParallelAnalysis {
 public:
  static constexpr std::size_t kBatchBytes = 256 * 1024;
  static constexpr std::size_t kBatchFrames = 2048;
  // Per worker: being filled, queued, being analysed; deep enough to ride out a
  // few milliseconds of either thread being descheduled on a busy machine.
  static constexpr std::size_t kPoolBatches = 16;
  // Shard 0 is analysed by the reader thread itself, from the reader's own
  // bytes (no copy): with N shards, N - 1 worker threads. As the reader also
  // reads and copies everything else, its shard takes a smaller share of the
  // address pairs: kInlineWeight against kWorkerWeight for each worker shard
  // (measured on 2 cores: -j 2 balances at about a sixth).
  static constexpr std::size_t kInline = 0;
  static constexpr std::uint64_t kInlineWeight = 1, kWorkerWeight = 6;

  // `tally`: also keep the per-frame tally (timeline, histograms) of the JSON/HTML/metrics reports.
  ParallelAnalysis(unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override, bool tally);
  ~ParallelAnalysis();
  ParallelAnalysis(const ParallelAnalysis&) = delete;
  ParallelAnalysis& operator=(const ParallelAnalysis&) = delete;

  // The next record of the input (frames are numbered from 1 across all inputs).
  void frame(const capture::Record& rec, std::uint32_t linktype);

  // Waits until every frame given so far has been analysed (for tests).
  void wait_idle();

  struct Result {
    std::unique_ptr<decode::Analyzer> analyzer;  // merged, finished
    std::unique_ptr<exporters::FlowTally> tally;  // merged (when asked for)
    // False when a frame's decoded endpoint addresses put it in another shard
    // than the reader's parse did, or a CM REP answered a REQ of another shard:
    // the merge would not be exact (run one thread).
    bool exact = true;
    bool bounds_reached = false;  // a shard reached a flow-table bound (docs/analysis.md)
    std::vector<std::uint64_t> frames_per_shard;
  };
  // End of input: analyses what is queued, stops the workers, merges.
  Result finish();

 private:
  struct FrameRef {
    std::uint64_t frame;
    double ts;
    double sweep_now;        // sweep before this frame (a sweep point passed in another shard)
    std::uint64_t key;       // the reader's shard key (decode::ShardKey::hash)
    std::uint32_t offset, caplen, wirelen, linktype;
    bool has_key;
    bool sweep;
  };
  struct Batch {
    std::vector<std::uint8_t> bytes;
    std::vector<FrameRef> frames;
  };
  struct Shard {
    std::unique_ptr<decode::Analyzer> analyzer;
    std::unique_ptr<exporters::FlowTally> tally;
    std::unique_ptr<decode::DecodedPacket> pkt;
    std::unique_ptr<decode::PacketAnalysis> pa;  // ~12 KB, reused
    std::mutex mu;
    std::condition_variable has_full, has_free;
    // Batches for the worker, in order: a ring as large as the pool (a deque
    // would allocate a block every few dozen batches).
    std::array<Batch*, kPoolBatches> full{};
    std::size_t full_head = 0, full_count = 0;
    std::vector<Batch*> free;  // back to the reader
    bool done = false;
    std::vector<std::unique_ptr<Batch>> pool;
    Batch* filling = nullptr;
    bool sweep_pending = false;
    double sweep_now = 0;
    std::uint64_t misrouted = 0;
    std::uint64_t frames = 0;  // given to this shard (reader side)
    std::uint64_t pairs = 0;   // address pairs given to this shard
    std::thread worker;
  };

  void flush(Shard& s);
  void note_sweep_point(std::size_t index, double ts);
  void analyse(Shard& s, decode::Bytes data, std::uint32_t wirelen, std::uint32_t linktype, std::uint64_t frame, double ts,
               const decode::ShardKey& reader_key);
  Batch* take_free(Shard& s);
  void run(std::size_t index);

  std::size_t shard_for(std::uint64_t key);
  std::size_t assign_shard(std::uint64_t key);

  std::vector<std::unique_ptr<Shard>> shards_;
  // Each address pair's shard, chosen when the pair first appears: the shard
  // given the fewest pairs so far (a function of the input alone). Bounded:
  // beyond kMaxPairs, new pairs go by their hash.
  static constexpr std::size_t kMaxPairs = std::size_t{1} << 18;
  std::unordered_map<std::uint64_t, std::uint32_t> shard_of_pair_;
  struct RecentPair {  // in front of the map: a capture's busy pairs are few
    std::uint64_t key = 0;
    std::uint32_t shard = 0;
    bool valid = false;
  };
  std::array<RecentPair, 256> recent_pairs_{};
  decode::DecodeOptions opts_;
  bool tally_ = false;
  std::uint64_t frame_ = 0;
  std::uint64_t bad_key_frame_ = 0;  // RDMADIAG_JOBS_TEST_BAD_KEY
  double origin_ = 0;
  bool finished_ = false;
};

}  // namespace rdmadiag::cli
