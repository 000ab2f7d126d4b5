#include "cli/parallel_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <pthread.h>

#include "decode/analyzer_merge.h"
#include "decode/shard_key.h"
#include "decode/transport_analysis.h"

namespace rdmadiag::cli {

ParallelAnalysis::ParallelAnalysis(unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override,
                                   bool tally)
    : opts_(opts), tally_(tally) {
  // For the tests: the reader gets this frame's shard key wrong, as a parse that
  // disagreed with the full decode would (the run must then be repeated on one thread).
  if (const char* bad = std::getenv("RDMADIAG_JOBS_TEST_BAD_KEY")) bad_key_frame_ = std::strtoull(bad, nullptr, 10);
  for (unsigned i = 0; i < shards; ++i) {
    auto s = std::make_unique<Shard>();
    s->analyzer = std::make_unique<decode::Analyzer>();
    s->analyzer->keep_merge_order();
    s->analyzer->transport().set_pmtu_override(pmtu_override);
    if (tally) s->tally = std::make_unique<exporters::FlowTally>();
    s->pkt = std::make_unique<decode::DecodedPacket>();
    s->pa = std::make_unique<decode::PacketAnalysis>();
    for (std::size_t b = 0; i != kInline && b < kPoolBatches; ++b) {
      auto batch = std::make_unique<Batch>();
      batch->bytes.reserve(kBatchBytes);
      batch->frames.reserve(kBatchFrames);
      s->free.push_back(batch.get());
      s->pool.push_back(std::move(batch));
    }
    shards_.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < shards_.size(); ++i)
    if (i != kInline) shards_[i]->worker = std::thread([this, i] { run(i); });
}

ParallelAnalysis::~ParallelAnalysis() {
  for (auto& s : shards_) {
    {
      std::lock_guard lk(s->mu);
      s->done = true;
    }
    s->has_full.notify_one();
  }
  for (auto& s : shards_)
    if (s->worker.joinable()) s->worker.join();
}

ParallelAnalysis::Batch* ParallelAnalysis::take_free(Shard& s) {
  Batch* b;
  {
    std::unique_lock lk(s.mu);
    s.has_free.wait(lk, [&] { return !s.free.empty(); });
    b = s.free.back();
    s.free.pop_back();
  }
  b->bytes.clear();
  b->frames.clear();
  return b;
}

void ParallelAnalysis::flush(Shard& s) {
  if (!s.filling) return;
  {
    std::lock_guard lk(s.mu);
    s.full[(s.full_head + s.full_count++) % s.full.size()] = s.filling;  // never more than the pool
  }
  s.has_full.notify_one();
  s.filling = nullptr;
}

std::size_t ParallelAnalysis::shard_for(std::uint64_t key) {
  RecentPair& recent = recent_pairs_[key % recent_pairs_.size()];
  if (recent.valid && recent.key == key) return recent.shard;
  const std::size_t shard = assign_shard(key);
  recent = RecentPair{key, static_cast<std::uint32_t>(shard), true};
  return shard;
}

std::size_t ParallelAnalysis::assign_shard(std::uint64_t key) {
  if (const auto it = shard_of_pair_.find(key); it != shard_of_pair_.end()) return it->second;
  if (shard_of_pair_.size() >= kMaxPairs) return key % shards_.size();
  // The shard with the fewest pairs for its weight (then the fewest frames, then
  // a worker's): connections start close together, when frame counts say little
  // about the load to come. The reader's own shard weighs kInlineWeight / kWorkerWeight.
  auto load = [](const Shard& x, std::size_t i) { return x.pairs * (i == kInline ? kWorkerWeight : kInlineWeight); };
  std::size_t least = shards_.size() - 1;
  for (std::size_t i = shards_.size() - 1; i-- > 0;) {
    const Shard& a = *shards_[i];
    const Shard& b = *shards_[least];
    if (load(a, i) < load(b, least) || (load(a, i) == load(b, least) && a.frames < b.frames)) least = i;
  }
  ++shards_[least]->pairs;
  shard_of_pair_.emplace(key, static_cast<std::uint32_t>(least));
  return least;
}

void ParallelAnalysis::frame(const capture::Record& rec, std::uint32_t linktype) {
  ++frame_;
  const double ts = static_cast<double>(rec.ts_sec) + rec.ts_nsec * 1e-9;  // as AnalysisSession::frame
  if (frame_ == 1) origin_ = ts;
  const std::size_t n = shards_.size();
  decode::ShardKey key = decode::shard_key(linktype, rec.data);
  if (frame_ == bad_key_frame_) key.hash ^= 1;
  // Frames between no two endpoints relate to nothing: any worker will do, in turn.
  const std::size_t index = key.has_addresses ? shard_for(key.hash) : 1 + frame_ % (n - 1);
  Shard& s = *shards_[index];
  ++s.frames;
  if (index == kInline) {
    // Analysed here and now, from the reader's own bytes (no copy).
    if (s.sweep_pending) {
      s.analyzer->sweep(s.sweep_now);
      s.sweep_pending = false;
    }
    if (s.tally && s.frames == 1) s.tally->set_origin(origin_);  // its first frame
    analyse(s, rec.data, rec.wirelen, linktype, frame_, ts, key);
    note_sweep_point(index, ts);
    return;
  }
  if (s.filling && (s.filling->frames.size() >= kBatchFrames || s.filling->bytes.size() + rec.data.size() > kBatchBytes))
    flush(s);
  if (!s.filling) s.filling = take_free(s);
  Batch& b = *s.filling;
  b.frames.push_back(FrameRef{frame_, ts, s.sweep_now, key.hash, static_cast<std::uint32_t>(b.bytes.size()),
                              static_cast<std::uint32_t>(rec.data.size()), rec.wirelen, linktype, key.has_addresses,
                              s.sweep_pending});
  s.sweep_pending = false;
  // Records follow one another in the file: start fetching the next ones (a
  // prefetch of an address outside the reader's window is dropped, never faults).
  for (std::size_t ahead = 0; ahead < 1536; ahead += 64) __builtin_prefetch(rec.data.data() + rec.data.size() + ahead);
  b.bytes.insert(b.bytes.end(), rec.data.begin(), rec.data.end());
  note_sweep_point(index, ts);
}

// One analyzer sweeps idle flows after every kSweepFrames-th frame (Analyzer::add):
// the shard that has this frame does so itself, the others before their next frame.
// Several sweep points passed without a frame are one sweep at the latest time.
void ParallelAnalysis::note_sweep_point(std::size_t index, double ts) {
  if (frame_ % decode::Analyzer::kSweepFrames != 0) return;
  for (std::size_t j = 0; j < shards_.size(); ++j) {
    if (j == index) continue;
    Shard& o = *shards_[j];
    o.sweep_now = o.sweep_pending ? std::max(o.sweep_now, ts) : ts;
    o.sweep_pending = true;
  }
}

void ParallelAnalysis::analyse(Shard& s, decode::Bytes data, std::uint32_t wirelen, std::uint32_t linktype,
                               std::uint64_t frame, double ts, const decode::ShardKey& reader_key) {
  decode::decode_frame(linktype, data, wirelen, opts_, *s.pkt);
  s.analyzer->add(*s.pkt, frame, ts, *s.pa);
  if (s.tally) s.tally->add(*s.pkt, *s.pa, frame, ts);
  // The analysis keys this frame by the addresses the reader read: every frame
  // of the pair is in this shard.
  if (decode::analysis_keyed(*s.pkt) && !(decode::shard_key(*s.pkt) == reader_key && reader_key.has_addresses))
    ++s.misrouted;
}

void ParallelAnalysis::run(std::size_t index) {
  ::pthread_setname_np(::pthread_self(), ("shard " + std::to_string(index)).c_str());  // for top and perf
  Shard& s = *shards_[index];
  bool origin_set = false;
  for (;;) {
    Batch* b;
    {
      std::unique_lock lk(s.mu);
      s.has_full.wait(lk, [&] { return s.full_count != 0 || s.done; });
      if (s.full_count == 0) return;
      b = s.full[s.full_head];
      s.full_head = (s.full_head + 1) % s.full.size();
      --s.full_count;
    }
    if (s.tally && !origin_set) {
      s.tally->set_origin(origin_);  // written before the first batch was queued
      origin_set = true;
    }
    for (const FrameRef& f : b->frames) {
      if (f.sweep) s.analyzer->sweep(f.sweep_now);
      analyse(s, decode::Bytes(b->bytes.data() + f.offset, f.caplen), f.wirelen, f.linktype, f.frame, f.ts,
              decode::ShardKey{f.has_key, f.key});
    }
    {
      std::lock_guard lk(s.mu);
      s.free.push_back(b);
    }
    s.has_free.notify_one();
  }
}

void ParallelAnalysis::wait_idle() {
  for (auto& s : shards_) {
    flush(*s);
    std::unique_lock lk(s->mu);
    s->has_free.wait(lk, [&] { return s->free.size() == s->pool.size(); });
  }
}

ParallelAnalysis::Result ParallelAnalysis::finish() {
  Result r;
  if (finished_) return r;
  finished_ = true;
  for (auto& s : shards_) {
    flush(*s);
    {
      std::lock_guard lk(s->mu);
      s->done = true;
    }
    s->has_full.notify_one();
  }
  for (auto& s : shards_)
    if (s->worker.joinable()) s->worker.join();

  std::vector<decode::Analyzer*> analyzers;
  for (auto& s : shards_) {
    analyzers.push_back(s->analyzer.get());
    if (s->misrouted) r.exact = false;
    r.frames_per_shard.push_back(s->frames);
  }
  decode::AnalyzerMerge::finish_shards(analyzers);
  if (decode::AnalyzerMerge::cm_split(analyzers)) r.exact = false;
  r.bounds_reached = decode::AnalyzerMerge::bounds_reached(analyzers);
  r.analyzer = std::make_unique<decode::Analyzer>();
  std::vector<std::vector<std::uint32_t>> flow_index;
  decode::AnalyzerMerge::merge(analyzers, *r.analyzer, flow_index);
  if (tally_) {
    std::vector<const exporters::FlowTally*> tallies;
    for (auto& s : shards_) tallies.push_back(s->tally.get());
    r.tally = std::make_unique<exporters::FlowTally>(exporters::FlowTally::merge(tallies, flow_index, origin_));
  }
  return r;
}

}  // namespace rdmadiag::cli
