#include "cli/split_read.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "decode/shard_key.h"
#include "exporters/progress.h"

namespace rdmadiag::cli {

namespace {
// Headers in a row that must look right before a position counts as a record start.
constexpr unsigned kChain = 16;
// A record start's timestamp lies within this of the segment's first record
// (plausibility only: a record outside it is found by the confirming walk).
constexpr std::int64_t kTsSlackBefore = 60, kTsSlackAfter = 30LL * 86400;
constexpr std::size_t kPrefetchAhead = 4096;
}  // namespace

SplitRead::SplitRead(std::vector<std::unique_ptr<ShardPass>>& passes, const std::string& path,
                     const capture::PcapLayout& layout, std::uint32_t linktype)
    : passes_(passes),
      path_(path),
      layout_(layout),
      linktype_(linktype),
      segment_ready_(static_cast<std::ptrdiff_t>(passes.size()), Step{this, &SplitRead::begin_segment}),
      walked_(static_cast<std::ptrdiff_t>(passes.size()), Step{this, &SplitRead::confirm}),
      parts_(passes.size()) {
  // For the tests: small segments, so that a small capture crosses many segment and part boundaries.
  if (const char* bytes = std::getenv("RDMADIAG_JOBS_SEGMENT_BYTES"))
    segment_bytes_ = std::max<std::size_t>(64, std::strtoull(bytes, nullptr, 10));
  next_start_ = 24;  // after the file header
}

SplitRead::~SplitRead() { unmap(); }

void SplitRead::unmap() {
  if (map_) ::munmap(const_cast<std::uint8_t*>(map_), map_len_);
  map_ = nullptr;
}

// Maps the next segment (from the record the last one's walk landed on) and
// divides its bytes among the threads.
void SplitRead::begin_segment() {
  unmap();
  for (const Part& p : parts_) frames_before_ += p.records.size();
  for (Part& p : parts_) p.records.clear();
  if (split_end_ != kNone || next_start_ >= layout_.file_size) {
    done_ = true;
    return;
  }
  seg_start_ = next_start_;
  seg_end_ = std::min(layout_.file_size, seg_start_ + segment_bytes_);
  // The last record that starts in the segment may end up to one record past it.
  const std::size_t map_end = std::min(layout_.file_size, seg_end_ + capture::kPcapRecordHeaderLen + layout_.max_caplen);
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  map_base_ = seg_start_ / page * page;
  map_len_ = map_end - map_base_;
  void* m = ::mmap(nullptr, map_len_, PROT_READ, MAP_SHARED, layout_.fd, static_cast<off_t>(map_base_));
  if (m == MAP_FAILED) {  // the rest as before: every thread reads it (FileReader)
    map_ = nullptr;
    split_end_ = seg_start_;
    done_ = true;
    return;
  }
  map_ = static_cast<const std::uint8_t*>(m);
  seg_first_ts_ = capture::plain_record(at(seg_start_), layout_.file_size - seg_start_, layout_)
                      ? capture::record_at(at(seg_start_), layout_).ts_sec
                      : 0;
  const std::size_t n = parts_.size(), share = (seg_end_ - seg_start_) / n;
  for (std::size_t i = 0; i < n; ++i) {
    parts_[i].begin = seg_start_ + i * share;
    parts_[i].end = i + 1 == n ? seg_end_ : seg_start_ + (i + 1) * share;
  }
}

// Thread t's part: its first plausible record start, then the walk.
void SplitRead::find_and_walk(unsigned t) {
  Part& part = parts_[t];
  // Page tables for the part's bytes in one call (a fault every few pages costs more).
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t from_page = part.begin / page * page;
  const std::size_t to = t + 1 == parts_.size() ? map_base_ + map_len_ : part.end;
  if (to > from_page) ::madvise(const_cast<std::uint8_t*>(at(from_page)), to - from_page, MADV_POPULATE_READ);
  std::size_t start = t == 0 ? seg_start_ : kNone;
  const std::size_t map_end = map_base_ + map_len_;
  for (std::size_t p = part.begin; start == kNone && p < part.end; ++p) {
    const capture::Record probe = capture::plain_record(at(p), layout_.file_size - p, layout_)
                                      ? capture::record_at(at(p), layout_)
                                      : capture::Record{};
    if (probe.caplen == 0 || probe.ts_sec < seg_first_ts_ - kTsSlackBefore ||
        probe.ts_sec > seg_first_ts_ + kTsSlackAfter)
      continue;
    if (capture::plausible_record_chain(at(p), map_end - p, layout_.file_size - p, layout_, kChain)) start = p;
  }
  if (start == kNone) {
    part.start = kNone;
    part.records.clear();
    return;
  }
  walk(part, start);
}

// The records from `from` (a record start) until the first one that starts at
// or past the part's end.
void SplitRead::walk(Part& part, std::size_t from) const {
  part.records.clear();
  part.start = from;
  part.landing = kNone;
  part.damage = kNone;
  std::size_t off = from, prefetched = from;
  const std::size_t map_end = map_base_ + map_len_;
  while (off < part.end && off < layout_.file_size) {
    // Each next header is where this one says: a chain of misses to memory
    // unless the bytes ahead are already on their way (each line once).
    for (const std::size_t until = std::min(off + kPrefetchAhead, map_end); prefetched < until; prefetched += 64)
      __builtin_prefetch(at(prefetched));
    const std::uint8_t* h = at(off);
    if (!capture::plain_record(h, layout_.file_size - off, layout_)) {
      part.damage = off;
      return;
    }
    const capture::Record rec = capture::record_at(h, layout_);
    const decode::ShardKey key = decode::shard_key(linktype_, rec.data);
    std::uint64_t flags = key.has_addresses ? kHasAddresses : 0;
    if (decode::is_pause_state_frame(linktype_, rec.data)) flags |= kPauseState;
    part.records.push_back(Indexed{off | flags, key.hash});
    off += capture::kPcapRecordHeaderLen + rec.caplen;
  }
  part.landing = off;
}

// One thread, all others waiting: each part must start where the one before it
// ended (or is walked again from there); damage ends the split at its record.
void SplitRead::confirm() {
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    Part& part = parts_[i];
    if (part.damage != kNone) {
      split_end_ = part.damage;
      for (std::size_t k = i + 1; k < parts_.size(); ++k) parts_[k].records.clear();
      return;
    }
    if (i + 1 == parts_.size()) {
      next_start_ = part.landing;
      return;
    }
    Part& next = parts_[i + 1];
    if (next.start != part.landing) {
      walk(next, part.landing);
      ++rewalks_;
    }
  }
}

// Every record of the segment through thread t's ShardPass, in frame order:
// only its own are read.
void SplitRead::analyse_segment(unsigned t) {
  ShardPass& pass = *passes_[t];
  constexpr std::size_t kAhead = 8;  // records: their headers are on their way when this thread needs them
  for (const Part& part : parts_)
    for (std::size_t i = 0; i < part.records.size(); ++i) {
      if (i + kAhead < part.records.size()) __builtin_prefetch(at(part.records[i + kAhead].offset_flags & kOffsetMask));
      const Indexed& r = part.records[i];
      const std::size_t offset = r.offset_flags & kOffsetMask;
      decode::ShardKey key;
      key.has_addresses = (r.offset_flags & kHasAddresses) != 0;
      key.hash = r.key_hash;
      pass.frame_keyed(
          key, linktype_, [&] { return capture::record_at(at(offset), layout_); },
          (r.offset_flags & kPauseState) != 0);
    }
}

ParallelAnalysis::Input SplitRead::run(unsigned t, bool progress) {
  exporters::ProgressBar bar(progress);
  for (;;) {
    segment_ready_.arrive_and_wait();
    if (done_) break;
    find_and_walk(t);
    walked_.arrive_and_wait();
    analyse_segment(t);
    if (bar.on()) bar.update(path_, seg_end_, layout_.file_size, frames_before_);
  }
  bar.clear();
  ParallelAnalysis::Input in;
  in.path = path_;
  in.linktype = linktype_;
  in.records = frames_before_;
  if (split_end_ == kNone) return in;
  // The rest (from a record that is not plainly well-formed) as a lone reader would read it.
  capture::FileReader reader;
  if (!reader.open(path_) || !reader.seek_record(split_end_, frames_before_)) {
    in.stop_reason = "stopped after record " + std::to_string(frames_before_) + ": cannot read on";
    return in;
  }
  capture::Record rec;
  while (reader.next(rec)) passes_[t]->frame(rec, linktype_);
  in.records = reader.records_read();
  in.stop_reason = reader.stop_reason();
  return in;
}

}  // namespace rdmadiag::cli
