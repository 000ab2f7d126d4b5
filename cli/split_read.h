// `analyze -j N` over one file without any thread walking the
// others' records (issue 16). The file is mapped once (RDMADIAG_READ_COPY=1:
// read into a buffer per slot instead); its bytes are cut into parts of
// kMappedPartBytes (kPartBytes when copied), each walked by the thread that takes it next (in part order;
// a thread that has clearly more records to analyse than its share only walks
// a part it waits for, so that one busy shard is left to analyse):
//  - the walk starts at the first plausible record start in the part
//    (capture::plausible_record_chain), runs to the first record starting past
//    the part's end, and keeps each record's offset, shard key and verified
//    ICRC (decode/icrc_hint.h; 24 bytes a record, for the parts in flight only:
//    bounded, not growing with the file);
//  - a part is confirmed when the walk of the part before it (itself confirmed)
//    landed on its first record: a classic pcap file has no sync marker (a
//    pcapng block's length at both ends is not proof either), a walk from a
//    known record is the proof; otherwise it is walked again from there. A
//    record that is not plainly well-formed ends the split at that record;
//  - the thread that confirms a part assigns its records to shards there, in
//    frame order (FrameAssigner, once for all threads: it is sequential anyway),
//    marks each index entry with its shard
//    and lists, per shard, the records its thread must see;
//  - every thread goes over its list of every confirmed part in frame order and
//    reads only its own records, the pause frames and a header per sweep point.
// The threads meet only at parts not yet walked or confirmed (no lockstep: a
// thread descheduled on a busy machine holds the others up only when they run
// kSlots parts ahead). After damage every thread reads the rest of the file
// itself (capture::FileReader::seek_record, then libpcap's verdict).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "cli/parallel_analysis.h"

namespace rdmadiag::cli {

class SplitRead {
 public:
  SplitRead(std::vector<std::unique_ptr<ShardPass>>& passes, const std::string& path,
            const capture::PcapLayout& layout, std::uint32_t linktype);
  ~SplitRead();
  SplitRead(const SplitRead&) = delete;
  SplitRead& operator=(const SplitRead&) = delete;

  // Thread `t`'s share of the whole file (every thread of the team calls it);
  // returns what it read, as ParallelAnalysis' readers report it.
  ParallelAnalysis::Input run(unsigned t, bool progress);
  // Parts walked again because their first record was not confirmed.
  std::uint64_t rewalks() const { return rewalks_; }
  // Records of the confirmed parts whose ICRC the walk verified (decode/icrc_hint.h).
  std::uint64_t icrc_verified() const { return icrc_verified_; }
  // Files this size or larger are not split (the index packs offsets into kOffsetBits).
  static constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 54;

  // 256 KiB, with 2 parts in flight per thread and a look-ahead of N - 1
  // parts: a part is analysed soon after its walk read it, while it is in
  // the cache (-j 2: 5 % less CPU than 1 MiB and 4 in flight, once a part no
  // longer read 128 KiB past its end; docs/performance.md, session 27).
  static constexpr std::size_t kPartBytes = std::size_t{256} << 10;
  // Mapped (the default), parts of 2 MiB: fewer calls to populate and drop
  // them, and no copy to keep in the cache (-j 2 on the bench capture: 1 MiB
  // 193 ms, 2 MiB 188, 4 MiB 194; 256 KiB 207; docs/performance.md, session 37).
  static constexpr std::size_t kMappedPartBytes = std::size_t{2} << 20;

 private:
  struct Indexed {  // a record of a part
    std::uint64_t offset_flags;  // file offset | shard << kShardShift | kHasAddresses | kPauseState
    std::uint64_t key_hash;      // as assigned (FrameAssigner::next)
    decode::IcrcHint icrc;       // its ICRC, verified by the walk (while its bytes are in the walker's cache)
  };
  static constexpr unsigned kShardShift = 54;  // shards 0-255 (analyze -j is at most 256) in bits 54-61
  static constexpr std::uint64_t kHasAddresses = std::uint64_t{1} << 62, kPauseState = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kOffsetMask = kMaxFileBytes - 1;
  static unsigned shard_of(const Indexed& r) { return static_cast<unsigned>((r.offset_flags >> kShardShift) & 0xff); }
  static constexpr std::size_t kNone = ~std::size_t{0};
  struct Part {  // one slot of the ring of parts in flight
    std::atomic<std::size_t> index{kNone};  // which part it holds (set before its fields, read before them)
    std::size_t begin = 0, end = 0;  // its bytes: the records that start here are its own
    std::unique_ptr<std::uint8_t[]> buffer;  // allocated at the slot's first use, reused (parts copied)
    const std::uint8_t* map = nullptr;       // its bytes (buffer or mapped), nullptr if they could not be read
    std::size_t map_base = 0, map_len = 0;   // their file offset, and how many are read so far
    std::size_t start = kNone;    // its first record (kNone: no plausible start found)
    std::size_t landing = kNone;  // the first record start at or past `end`
    std::size_t damage = kNone;   // a record that is not plainly well-formed
    std::vector<Indexed> records;
    std::size_t icrc_verified = 0;  // of them
    std::uint64_t first_frame = 0;  // the number of records[0] (once assigned)
    // Per shard, the records that go through its ShardPass (its own, the pause
    // frames, the sweep points, frame 1), by index in `records`, in frame order.
    std::vector<std::vector<std::uint32_t>> visits;
    std::atomic<bool> walked{false};
    std::atomic<unsigned> analysed{0};  // threads done with it
    const std::uint8_t* at(std::size_t offset) const { return map + (offset - map_base); }
  };

  bool slot_free(std::size_t part) const;
  bool walk_next();
  // Whether the part's bytes up to file offset `until` are read (reads them if not).
  bool load(Part& part, std::size_t until) const {
    return until <= part.map_base + part.map_len || read_more(part, until);
  }
  bool read_more(Part& part, std::size_t until) const;
  void map_file();
  void map_part(Part& part) const;
  void drop_part(const Part& part) const;
  void prefetch_walk(const Part& part, std::size_t off, std::size_t& prefetched) const;
  std::size_t find_start(Part& part, std::size_t index, bool& readable) const;
  void walk(Part& part, std::size_t from) const;
  std::size_t walked_len(Part& part, const std::uint8_t* h, std::size_t off, bool& is_record) const;
  bool confirmed(std::size_t part);
  void assign(Part& part);
  void wait_confirmed(std::size_t part);
  bool walks_ahead(unsigned t) const;
  void analyse(unsigned t, Part& part);
  void finish(Part& part);
  void notify();

  std::vector<std::unique_ptr<ShardPass>>& passes_;
  std::string path_;
  capture::PcapLayout layout_;
  std::uint32_t linktype_;
  std::size_t part_bytes_ = kPartBytes;
  const std::uint8_t* file_map_ = nullptr;  // the whole file, mapped (map_file), or nullptr: parts are copied
  std::size_t parts_ = 0;  // in the file
  std::int64_t first_ts_ = 0;
  std::vector<Part> slots_;
  // The next part to walk, taken by whichever thread walks next: a thread
  // with little of its own to analyse walks for the others (a capture of one
  // address pair puts every frame in one shard; its thread then only analyses).
  std::atomic<std::size_t> next_walk_{0};
  std::atomic<std::uint64_t> progress_{0};
  // Records each thread analysed or must (assign's visits), and all of them.
  std::unique_ptr<std::atomic<std::uint64_t>[]> visited_;
  std::atomic<std::uint64_t> visited_total_{0};
  // Confirmation, in part order, under the mutex:
  std::mutex confirm_mutex_;
  std::size_t confirmed_ = 0;             // parts [0, confirmed_) confirmed
  std::size_t last_landing_ = 0;          // where the last confirmed part's walk landed
  std::atomic<std::size_t> last_part_{kNone};  // damage in this part ends the split
  std::size_t split_end_ = kNone;         // that record
  std::uint64_t frames_ = 0;              // records of the confirmed parts
  std::uint64_t rewalks_ = 0;
  std::uint64_t icrc_verified_ = 0;
  FrameAssigner assigner_;                // the confirmed parts' records assigned so far
};

}  // namespace rdmadiag::cli
