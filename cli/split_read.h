// `analyze -j N` over one classic pcap file without any thread walking the
// others' records (issue 16). The file is read a segment (kSegmentBytes) at a time:
//  1. thread i walks the i-th N-th of the segment's bytes, from the first
//     plausible record start in it (capture::plausible_record_chain) to the first
//     record starting past its part, and keeps each record's offset and shard
//     key (16 bytes a record: bounded by the segment, not the file);
//  2. at the barrier one thread confirms the split: thread i's first record must
//     be the one thread i-1's walk landed on (a pcap file has no sync marker; a
//     walk from a known record is the proof), otherwise the part is walked again
//     from that record; a record that is not plainly well-formed ends the split;
//  3. every thread goes over the keys of the whole segment in frame order (its
//     ShardPass decides which are its own, as when it read every record) and
//     reads only its own records, the pause frames and one header per sweep point.
// After a record that is not plainly well-formed every thread reads the rest of
// the file itself (capture::FileReader::seek_record, then libpcap's verdict).
#pragma once
#include <barrier>
#include <cstdint>
#include <memory>
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
  // Parts of segments walked again because their first record was not confirmed.
  std::uint64_t rewalks() const { return rewalks_; }

  static constexpr std::size_t kSegmentBytes = std::size_t{8} << 20;

 private:
  struct Indexed {  // a record of the segment
    std::uint64_t offset_flags;  // file offset | kHasAddresses | kPauseState
    std::uint64_t key_hash;
  };
  static constexpr std::uint64_t kHasAddresses = std::uint64_t{1} << 62, kPauseState = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kOffsetMask = kHasAddresses - 1;
  static constexpr std::size_t kNone = ~std::size_t{0};
  struct Part {
    std::size_t begin = 0, end = 0;  // its bytes: records that start here are its own
    std::size_t start = kNone;      // its first record (kNone: no plausible start found)
    std::size_t landing = kNone;    // the first record start at or past `end`
    std::size_t damage = kNone;     // a record that is not plainly well-formed
    std::vector<Indexed> records;
  };

  void begin_segment();
  void unmap();
  void find_and_walk(unsigned t);
  void walk(Part& part, std::size_t from) const;
  void confirm();
  void analyse_segment(unsigned t);
  const std::uint8_t* at(std::size_t offset) const { return map_ + (offset - map_base_); }

  std::vector<std::unique_ptr<ShardPass>>& passes_;
  std::string path_;
  capture::PcapLayout layout_;
  std::uint32_t linktype_;
  std::size_t segment_bytes_ = kSegmentBytes;
  struct Step {  // what one thread does when all have arrived at a barrier
    SplitRead* read;
    void (SplitRead::*what)();
    void operator()() noexcept { (read->*what)(); }
  };
  std::barrier<Step> segment_ready_;  // begin_segment(): the next segment mapped (or the end)
  std::barrier<Step> walked_;         // confirm()
  // The segment being read, written only between barriers by one thread.
  std::size_t seg_start_ = 0, seg_end_ = 0;
  std::int64_t seg_first_ts_ = 0;
  const std::uint8_t* map_ = nullptr;
  std::size_t map_base_ = 0, map_len_ = 0;
  std::vector<Part> parts_;
  std::size_t next_start_ = 0;   // of the next segment
  std::size_t split_end_ = kNone;  // where damage ended the split
  std::uint64_t frames_before_ = 0;  // records of the segments before this one
  std::uint64_t rewalks_ = 0;
  bool done_ = false;  // no segment left
};

}  // namespace rdmadiag::cli
