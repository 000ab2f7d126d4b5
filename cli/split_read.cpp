#include "cli/split_read.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "decode/icrc_hint.h"
#include "decode/prefetch.h"
#include "decode/shard_key.h"
#include "exporters/progress.h"

namespace rdmadiag::cli {

namespace {
// Headers in a row that must look right before a position counts as a record start.
constexpr unsigned kChain = 16;
// A record start's timestamp lies within this of the file's first record
// (plausibility only: a part whose start it misses is walked again).
constexpr std::int64_t kTsSlackBefore = 60, kTsSlackAfter = 365LL * 86400;
// Parts in flight per thread: how far a thread may walk ahead of the slowest one's analysis.
constexpr std::size_t kSlotsPerThread = 2;
// A part is read this much at a time, as its walk goes.
constexpr std::size_t kReadChunk = std::size_t{128} << 10;
// Past the part's end, where the next part's walker reads too, at least this
// much at a time: the rest of the part's last record (and a start probe's
// bytes); a whole chunk there added 12 % to the bytes copied (session 27).
constexpr std::size_t kPastEndRead = std::size_t{4} << 10;
// Bytes past a candidate first record that its chain check may see.
constexpr std::size_t kStartProbeBytes = std::size_t{64} << 10;
// How far ahead of each record a walk of mapped bytes prefetches them: a
// mapped page is not in the cache as a page just copied is.
constexpr std::size_t kWalkPrefetch = 4096;
}  // namespace

SplitRead::SplitRead(std::vector<std::unique_ptr<ShardPass>>& passes, const std::string& path,
                     const capture::PcapLayout& layout, std::uint32_t linktype)
    : passes_(passes),
      path_(path),
      layout_(layout),
      linktype_(linktype),
      slots_(passes.size() * kSlotsPerThread),
      visited_(std::make_unique<std::atomic<std::uint64_t>[]>(passes.size())),
      assigner_(passes.at(0)->assigner()) {
  map_file();
  part_bytes_ = file_map_ ? kMappedPartBytes : kPartBytes;
  // For the tests: small parts, so that a small capture crosses many part boundaries.
  if (const char* bytes = std::getenv("RDMADIAG_JOBS_PART_BYTES"))
    part_bytes_ = std::max<std::size_t>(64, std::strtoull(bytes, nullptr, 10));
  const std::size_t body = layout_.file_size > layout_.first_record ? layout_.file_size - layout_.first_record : 0;
  parts_ = (body + part_bytes_ - 1) / part_bytes_;
  last_landing_ = layout_.first_record;
  std::uint8_t head[capture::kEpbHeaderLen];
  const std::size_t hlen = capture::record_header_len(layout_);
  if (body >= hlen && capture::read_at(layout_.fd, head, hlen, layout_.first_record) == hlen &&
      capture::plain_record(head, body, layout_))
    first_ts_ = capture::record_at(head, layout_).ts_sec;
}

SplitRead::~SplitRead() {
  if (file_map_) capture::unmap_guarded(file_map_, layout_.file_size);
}

// The whole file, mapped once (no page tables yet: each part is populated as
// it is taken, and dropped when its slot is taken again), unless
// RDMADIAG_READ_COPY is set or it cannot be guarded (capture::guard_mapping).
void SplitRead::map_file() {
  if (capture::mapping_wanted() && layout_.file_size > 0)
    file_map_ = capture::map_guarded(layout_.fd, 0, layout_.file_size, false);
}

// A mapped part's bytes, up to one record past its end, into the page tables
// in one call (a page fault each would cost more).
void SplitRead::map_part(Part& part) const {
  const std::size_t first = part.begin - part.begin % capture::page_bytes();
  part.map = file_map_ + part.begin;
  part.map_base = part.begin;
  part.map_len = std::min(layout_.file_size, part.end + capture::max_record_len(layout_)) - part.begin;
  ::madvise(const_cast<std::uint8_t*>(file_map_) + first, part.begin + part.map_len - first, MADV_POPULATE_READ);
}

// The pages of a mapped part every thread is done with out of the page tables,
// so that resident memory stays at the parts in flight (one TLB flush a part).
// Its last page may hold the next part's first records: it stays. A page
// dropped that is read again is only faulted in again.
void SplitRead::drop_part(const Part& part) const {
  const std::size_t page = capture::page_bytes();
  const std::size_t from = part.map_base - part.map_base % page;
  const std::size_t to = part.end - part.end % page;
  if (to > from) ::madvise(const_cast<std::uint8_t*>(file_map_) + from, to - from, MADV_DONTNEED);
}

// Reads the part's bytes up to file offset `until` into its slot's buffer, a
// chunk at a time as the walk goes (a read costs a fraction
// of mapping the same pages: no page tables to build and tear down, no TLB
// shootdowns between the threads; and a chunk is still in the cache when the
// walk reads its headers). The last record that starts in the part may end up
// to one record past it. False when the file cannot be read that far.
bool SplitRead::read_more(Part& part, std::size_t until) const {
  std::size_t have = part.map_base + part.map_len;
  const std::size_t limit = std::min(layout_.file_size, part.end + capture::max_record_len(layout_));
  if (file_map_) return std::min(until, limit) <= have;  // mapped: map_part covered up to the limit
  const std::size_t step = have < part.end ? std::max(std::min(kReadChunk, part.end - have), kPastEndRead) : kPastEndRead;
  until = std::min(limit, std::max(until, have + step));
  const std::size_t n = capture::read_at(layout_.fd, part.buffer.get() + part.map_len, until - have, have);
  part.map_len += n;
  return have + n == until;  // short: an I/O error, or the file shrank
}

// The part's first plausible record start (kNone: none; `readable`: false
// when its bytes could not be read).
std::size_t SplitRead::find_start(Part& part, std::size_t index, bool& readable) const {
  readable = true;
  if (index == 0) return part.begin;
  for (std::size_t p = part.begin; p < part.end; ++p) {
    if (!load(part, p + kStartProbeBytes)) {
      readable = false;
      return kNone;
    }
    if (!capture::plain_record(part.at(p), layout_.file_size - p, layout_)) {
      // pcapng: a block passed over may start the part too (where the walk before lands)
      if (layout_.file_size - p < 12 || capture::passed_over_len(part.at(p), layout_.file_size - p, layout_) == 0)
        continue;
    } else {
      const capture::Record probe = capture::record_at(part.at(p), layout_);
      if (probe.caplen == 0 || probe.ts_sec < first_ts_ - kTsSlackBefore || probe.ts_sec > first_ts_ + kTsSlackAfter)
        continue;
    }
    const std::size_t avail = part.map_base + part.map_len - p;
    if (capture::plausible_record_chain(part.at(p), avail, layout_.file_size - p, layout_, kChain)) return p;
  }
  return kNone;
}

void SplitRead::notify() {
  progress_.fetch_add(1, std::memory_order_release);
  progress_.notify_all();
}

// Whether the slot of `part` holds nothing that a thread still reads: the
// part one ring before it, walked and analysed by every thread (or nothing
// yet). Checked by index, not by state alone: a thread that took the part
// before this one but has not yet marked the slot must not be overtaken.
bool SplitRead::slot_free(std::size_t part) const {
  const Part& slot = slots_[part % slots_.size()];
  const std::size_t before = part >= slots_.size() ? part - slots_.size() : kNone;
  if (slot.index.load(std::memory_order_acquire) != before) return false;
  return before == kNone || (slot.walked.load(std::memory_order_acquire) &&
                             slot.analysed.load(std::memory_order_acquire) == passes_.size());
}

// The next part not yet taken, read and walked from its first plausible
// record start, if its slot is free; false when there was nothing to do.
bool SplitRead::walk_next() {
  std::size_t index = next_walk_.load(std::memory_order_acquire);
  do {
    if (index >= parts_ || index > last_part_.load(std::memory_order_acquire) || !slot_free(index)) return false;
  } while (!next_walk_.compare_exchange_weak(index, index + 1, std::memory_order_acq_rel));
  Part& part = slots_[index % slots_.size()];
  part.walked.store(false, std::memory_order_relaxed);
  part.analysed.store(0, std::memory_order_relaxed);
  part.index.store(index, std::memory_order_release);  // a reader that sees it sees walked == false
  if (file_map_ && index >= slots_.size()) drop_part(part);  // the part the slot held before
  part.begin = layout_.first_record + index * part_bytes_;
  part.end = std::min(layout_.file_size, part.begin + part_bytes_);
  part.start = kNone;
  part.records.clear();
  if (file_map_) {
    map_part(part);
  } else {
    if (!part.buffer)  // room for the part and the longest record that can start at its end
      part.buffer = std::make_unique_for_overwrite<std::uint8_t[]>(part_bytes_ + capture::max_record_len(layout_));
    part.map = part.buffer.get();
    part.map_base = part.begin;
    part.map_len = 0;
  }
  bool readable = true;
  const std::size_t start = find_start(part, index, readable);
  if (!readable) part.map = nullptr;
  if (start != kNone) walk(part, start);
  // The file was cut while mapped (its lost pages read as zeros): from this
  // part on every thread reads the rest itself, as when a read comes up short.
  if (file_map_ && capture::mapping_cut()) part.map = nullptr;
  part.walked.store(true, std::memory_order_release);
  notify();
  return true;
}

// The records from `from` (a record start) until the first one that starts at
// or past the part's end (pcapng: the blocks libpcap passes over are passed over).
void SplitRead::walk(Part& part, std::size_t from) const {
  part.records.clear();
  part.icrc_verified = 0;
  part.start = from;
  part.landing = kNone;
  part.damage = kNone;
  const std::size_t hlen = capture::record_header_len(layout_);
  std::size_t off = from;
  std::size_t prefetched = from;
  while (off < part.end && off < layout_.file_size) {
    if (file_map_) prefetch_walk(part, off, prefetched);
    // (the bytes come in by chunks, each read right before the walk reads it: in the cache)
    const std::uint8_t* h = load(part, off + hlen) ? part.at(off) : nullptr;
    bool is_record = false;
    const std::size_t len = h ? walked_len(part, h, off, is_record) : 0;
    if (len == 0) {
      part.damage = off;  // every thread reads on from here itself (libpcap's verdict)
      return;
    }
    off += len;
    if (!is_record) continue;  // a block passed over
    const capture::Record rec = capture::record_at(h, layout_);
    const decode::ShardKey key = decode::shard_key(linktype_, rec.data);
    std::uint64_t flags = key.has_addresses ? kHasAddresses : 0;
    if (decode::is_pause_state_frame(linktype_, rec.data)) flags |= kPauseState;
    part.records.push_back(Indexed{(off - len) | flags, key.hash, decode::verified_icrc_hint(linktype_, rec.data)});
    part.icrc_verified += part.records.back().icrc ? 1 : 0;
  }
  part.landing = off;
}

// Mapped bytes: the kWalkPrefetch ahead of `off` into the cache, each line once.
void SplitRead::prefetch_walk(const Part& part, std::size_t off, std::size_t& prefetched) const {
  // (offsets from the part's map_base)
  std::size_t done = prefetched - part.map_base;
  decode::prefetch_ahead(part.map, off - part.map_base, std::min(off + kWalkPrefetch, part.map_base + part.map_len) - part.map_base, done);
  prefetched = part.map_base + done;
}

// The length of the record (or pcapng block libpcap passes over) whose header
// is at `h`, file offset `off`, with all its bytes read; 0 when it is not
// plainly well-formed. `is_record`: a record, not a block passed over.
std::size_t SplitRead::walked_len(Part& part, const std::uint8_t* h, std::size_t off, bool& is_record) const {
  const std::size_t left = layout_.file_size - off;
  is_record = capture::plain_record(h, left, layout_);
  const std::size_t len = is_record ? capture::record_len(h, layout_) : capture::passed_over_len(h, left, layout_);
  if (len == 0 || !load(part, off + len)) return 0;
  return capture::record_trailer_ok(part.at(off), layout_) ? len : 0;
}

// Confirms the parts up to `part` in order (each must start where the one
// before it landed, or is walked again from there); false while one of them is
// not walked yet. Damage in a confirmed part ends the split at its record.
bool SplitRead::confirmed(std::size_t part) {
  std::lock_guard<std::mutex> lock(confirm_mutex_);
  while (confirmed_ <= part && confirmed_ <= last_part_.load(std::memory_order_relaxed)) {
    Part& p = slots_[confirmed_ % slots_.size()];
    if (p.index.load(std::memory_order_acquire) != confirmed_ || !p.walked.load(std::memory_order_acquire))
      return false;
    if (!p.map) {  // could not be read: every thread reads the rest itself, as before
      p.records.clear();
      p.damage = last_landing_;
    } else if (p.start != last_landing_) {
      walk(p, last_landing_);
      ++rewalks_;
    }
    assign(p);
    frames_ += p.records.size();
    icrc_verified_ += p.icrc_verified;
    if (p.damage != kNone) {
      split_end_ = p.damage;
      last_part_.store(confirmed_, std::memory_order_release);
    }
    last_landing_ = p.landing;
    ++confirmed_;
    notify();  // threads waiting for this part
  }
  return true;
}

// Waits until `part` is confirmed (or the split ended before it), walking the
// next parts meanwhile: the part waited for may be one of them.
void SplitRead::wait_confirmed(std::size_t part) {
  for (;;) {
    const std::uint64_t seen = progress_.load(std::memory_order_acquire);
    if (confirmed(part)) return;
    if (walk_next()) continue;
    progress_.wait(seen, std::memory_order_acquire);
  }
}

// A confirmed part's records to shards, in frame order (under the mutex).
void SplitRead::assign(Part& part) {
  part.visits.resize(passes_.size());
  for (auto& v : part.visits) v.clear();
  part.first_frame = assigner_.frames() + 1;
  for (std::uint32_t i = 0; i < part.records.size(); ++i) {
    Indexed& r = part.records[i];
    decode::ShardKey key;
    key.has_addresses = (r.offset_flags & kHasAddresses) != 0;
    key.hash = r.key_hash;
    const std::uint64_t shard = assigner_.next(key);
    r.key_hash = key.hash;
    r.offset_flags |= shard << kShardShift;
    // (the record's bytes only for the copy detector's sample: the others' are
    // read only by the thread that analyses them, not here too)
    assigner_.copies().add_lazy([&] {
      const capture::Record rec = capture::record_at(part.at(r.offset_flags & kOffsetMask), layout_);
      return std::pair{rec.data, rec.ts_ns()};
    });
    if (ShardPass::needs_frame(assigner_.frames(), (r.offset_flags & kPauseState) != 0)) {
      for (auto& v : part.visits) v.push_back(i);
    } else {
      part.visits[shard].push_back(i);
    }
  }
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < passes_.size(); ++s) {
    visited_[s].fetch_add(part.visits[s].size(), std::memory_order_relaxed);
    total += part.visits[s].size();
  }
  visited_total_.fetch_add(total, std::memory_order_relaxed);
}

// Whether thread t walks parts ahead of its need: not when it has had clearly
// more records to analyse than its share (1/8 over it), so that the lighter
// threads walk for it. A capture of one address pair puts every record in one
// shard: that thread then only analyses (-j 2 on it was slower than -j 1,
// docs/performance.md, session 28). It still walks a part it waits for.
bool SplitRead::walks_ahead(unsigned t) const {
  const std::uint64_t mine = visited_[t].load(std::memory_order_relaxed);
  const std::uint64_t total = visited_total_.load(std::memory_order_relaxed);
  return mine * passes_.size() <= total + total / 8;
}

// Thread t's records of a confirmed part (and those it must see) through its
// ShardPass, in frame order: the others' bytes are not touched. The headers of
// the record 4 ahead are prefetched: since the walk verifies the ICRC
// (decode/icrc_hint.h), a shard reads only the first lines of a record, each a
// miss (the walk read it on the other core). Session 15 had measured the same
// prefetch 1-4 % worse, when the shard's own CRC streamed through every record
// (docs/performance.md, session 33).
void SplitRead::analyse(unsigned t, Part& part) {
  ShardPass& pass = *passes_[t];
  const std::vector<std::uint32_t>& visits = part.visits[t];
  constexpr std::size_t kAhead = 4;
  for (std::size_t k = 0; k < visits.size(); ++k) {
    if (k + kAhead < visits.size()) {  // its record header and the frame's headers, 2 lines
      const std::uint8_t* next = part.at(part.records[visits[k + kAhead]].offset_flags & kOffsetMask);
      decode::prefetch_line(next);
      decode::prefetch_line(next + 64);
    }
    const std::uint32_t i = visits[k];
    const Indexed& r = part.records[i];
    const std::size_t offset = r.offset_flags & kOffsetMask;
    decode::ShardKey key;
    key.has_addresses = (r.offset_flags & kHasAddresses) != 0;
    key.hash = r.key_hash;
    pass.skip_to(part.first_frame + i - 1);
    pass.frame_assigned(
        shard_of(r) == t, key, linktype_, [&] { return capture::record_at(part.at(offset), layout_); },
        (r.offset_flags & kPauseState) != 0, r.icrc);
  }
  pass.skip_to(part.first_frame + part.records.size() - 1);
}

// This thread is done with `part`: the last one to be frees its slot.
void SplitRead::finish(Part& part) {
  if (part.analysed.fetch_add(1, std::memory_order_acq_rel) + 1 == passes_.size()) notify();
}

ParallelAnalysis::Input SplitRead::run(unsigned t, bool progress) {
  exporters::ProgressBar bar(progress);
  std::uint64_t frames = 0;
  for (std::size_t j = 0; j < parts_; ++j) {
    // The parts up to a round ahead (the next N - 1 parts), those no other
    // thread took yet: walked while the others analyse, and the part after
    // those not yet, so that the part read last is still in the cache when its
    // turn comes. A thread that analyses more than the others reaches this
    // later and finds them taken: it walks less.
    while (next_walk_.load(std::memory_order_relaxed) < j + passes_.size() && walks_ahead(t) && walk_next()) {
    }
    wait_confirmed(j);
    if (j > last_part_.load(std::memory_order_acquire)) break;
    Part& part = slots_[j % slots_.size()];
    analyse(t, part);
    frames += part.records.size();
    finish(part);
    if (bar.on()) bar.update(path_, part.end, layout_.file_size, frames);
  }
  bar.clear();
  ParallelAnalysis::Input in;
  in.path = path_;
  in.linktype = linktype_;
  std::size_t split_end = kNone;
  {
    std::lock_guard<std::mutex> lock(confirm_mutex_);
    in.records = frames_;
    split_end = split_end_;
    // Every part is confirmed: the assignment so far is final, and the rest of
    // this input (after damage) and the next inputs go on from it.
    passes_[t]->adopt(assigner_);
  }
  if (split_end == kNone) return in;
  // The rest (from a record that is not plainly well-formed) as a lone reader would read it.
  capture::FileReader reader;
  if (!reader.open(path_) || !reader.seek_record(split_end, in.records)) {
    in.stop_reason = "stopped after record " + std::to_string(in.records) + ": cannot read on";
    return in;
  }
  capture::Record rec;
  // (a pcapng file may describe another interface, of another link type, further on)
  while (reader.next(rec)) passes_[t]->frame(rec, reader.record_linktype(), reader.record_point());
  in.records = reader.records_read();
  in.stop_reason = reader.stop_reason();
  return in;
}

}  // namespace rdmadiag::cli
