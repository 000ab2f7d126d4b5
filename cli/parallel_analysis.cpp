#include "cli/parallel_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include <pthread.h>
#include <sys/stat.h>

#include "decode/analyzer_merge.h"
#include "decode/shard_key.h"
#include "decode/transport_analysis.h"
#include "cli/split_read.h"
#include "exporters/progress.h"

namespace rdmadiag::cli {

std::size_t ShardAssigner::shard(std::uint64_t frame, const decode::ShardKey& key) {
  std::size_t s;
  if (!key.has_addresses) {
    s = frame % frames_.size();  // relates to nothing: any shard will do, in turn
  } else {
    RecentPair& recent = recent_[key.hash % recent_.size()];
    if (recent.valid && recent.key == key.hash) {
      s = recent.shard;
    } else {
      s = assign(key.hash);
      recent = RecentPair{key.hash, static_cast<std::uint32_t>(s), true};
    }
  }
  ++frames_[s];
  return s;
}

std::size_t ShardAssigner::assign(std::uint64_t key) {
  if (const auto it = shard_of_pair_.find(key); it != shard_of_pair_.end()) return it->second;
  if (shard_of_pair_.size() >= kMaxPairs) return key % frames_.size();
  // Connections start close together, when frame counts say little about the
  // load to come: the fewest pairs first.
  std::size_t least = 0;
  for (std::size_t i = 1; i < pairs_.size(); ++i)
    if (pairs_[i] < pairs_[least] || (pairs_[i] == pairs_[least] && frames_[i] < frames_[least])) least = i;
  ++pairs_[least];
  shard_of_pair_.emplace(key, static_cast<std::uint32_t>(least));
  return least;
}

FrameAssigner::FrameAssigner(unsigned shards) : assigner_(shards) {
  // For the tests: this frame's shard key is read wrong, as a parse that
  // disagreed with the full decode would (the run must then be repeated on one thread).
  if (const char* bad = std::getenv("RDMADIAG_JOBS_TEST_BAD_KEY")) bad_key_frame_ = std::strtoull(bad, nullptr, 10);
}

ShardPass::ShardPass(unsigned index, unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override,
                     bool tally, const decode::PfcOptions& pfc)
    : index_(index), assigner_(shards), opts_(opts) {
  analyzer_ = std::make_unique<decode::Analyzer>();
  analyzer_->keep_merge_order();
  analyzer_->transport().set_pmtu_override(pmtu_override);
  analyzer_->pfc().set_options(pfc);
  analyzer_->pfc().set_reports_anomalies(index == 0);  // the others' storms would be copies (AnalyzerMerge)
  if (tally) tally_ = std::make_unique<exporters::FlowTally>();
  pkt_ = std::make_unique<decode::DecodedPacket>();
  pa_ = std::make_unique<decode::PacketAnalysis>();
}

void ShardPass::frame(const capture::Record& rec, std::uint32_t linktype, std::uint16_t point) {
  point_ = point;
  frame_keyed(
      decode::shard_key(linktype, rec.data), linktype, [&] { return rec; },
      decode::is_pause_state_frame(linktype, rec.data));
}

void ShardPass::other_frame(const capture::Record& rec, std::uint32_t linktype, bool pause_state, bool sweep_point,
                            double ts) {
  if (pause_state) {  // pause state: every shard keeps it
    decode::decode_frame(linktype, rec.data, rec.wirelen, opts_, *pkt_);
    decode::take_reader_point(*pkt_, point_);
    analyzer_->add_pause_state(*pkt_, frame_, rec.ts_ns());
  }
  // One analyzer sweeps idle flows after every kSweepFrames-th frame
  // (Analyzer::add): the shard that has that frame does so itself, the others
  // before their next frame (several missed sweep points: one sweep, the latest).
  if (sweep_point) {
    sweep_now_ = sweep_pending_ ? std::max(sweep_now_, ts) : ts;
    sweep_pending_ = true;
  }
}

void ShardPass::own_frame(const capture::Record& rec, std::uint32_t linktype, const decode::ShardKey& key, double ts,
                          const decode::IcrcHint& icrc) {
  if (sweep_pending_) {
    analyzer_->sweep(sweep_now_);
    sweep_pending_ = false;
  }
  if (++frames_ == 1 && tally_) tally_->set_origin(origin_);
  decode::decode_frame(linktype, rec.data, rec.wirelen, opts_, *pkt_, icrc);
  decode::take_reader_point(*pkt_, point_);
  analyzer_->add(*pkt_, frame_, ts, *pa_, rec.ts_ns());
  if (tally_) tally_->add(*pkt_, *pa_, frame_, ts);
  // The analysis keys this frame by the addresses the light parse read: every
  // frame of the pair is in this shard.
  if (decode::analysis_keyed(*pkt_) && !(decode::shard_key(*pkt_) == key && key.has_addresses)) ++misrouted_;
}

ParallelAnalysis::ParallelAnalysis(unsigned shards, const decode::DecodeOptions& opts, std::uint32_t pmtu_override,
                                   bool tally, const decode::PfcOptions& pfc)
    : tally_(tally) {
  for (unsigned i = 0; i < shards; ++i)
    passes_.push_back(std::make_unique<ShardPass>(i, shards, opts, pmtu_override, tally, pfc));
}

namespace {

// One shard's reading of one input, every record of it.
ParallelAnalysis::Input read_input(ShardPass& pass, const std::string& path, bool progress) {
  capture::FileReader reader;
  reader.set_prefetch_ahead(true);  // each thread keeps few of the records it reads
  ParallelAnalysis::Input in;
  in.path = path;
  if (!reader.open(path)) {
    in.error = reader.error();
    return in;
  }
  in.linktype = reader.linktype();
  in.snaplen = reader.snaplen();
  in.point_names = reader.point_names();
  struct stat st {};
  const std::uint64_t file_size =
      progress && ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  exporters::ProgressBar bar(progress);
  capture::Record rec;
  while (reader.next(rec)) {
    pass.frame(rec, reader.record_linktype(), reader.record_point());
    if (bar.on() && (reader.records_read() & 4095) == 0)
      bar.update(path, static_cast<std::uint64_t>(std::max<std::int64_t>(0, reader.file_offset())), file_size,
                 reader.records_read());
  }
  bar.clear();
  in.records = reader.records_read();
  in.stop_reason = reader.stop_reason();
  return in;
}

// Runs `work(t)` on N threads (t = 0 on the calling thread), named for top and perf.
template <class Work>
void on_every_shard(std::size_t shards, Work&& work) {
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < shards; ++i)
    threads.emplace_back([i, &work] {
      ::pthread_setname_np(::pthread_self(), ("shard " + std::to_string(i)).c_str());
      work(static_cast<unsigned>(i));
    });
  work(0u);
  for (auto& t : threads) t.join();
}

}  // namespace

ParallelAnalysis::Result ParallelAnalysis::run(const std::vector<std::string>& paths, bool progress) {
  std::vector<std::vector<Input>> seen(passes_.size());
  for (const std::string& path : paths) {
    // A file read in place (classic pcap, pcapng of one interface) is split
    // between the threads (SplitRead); anything else (standard input, several
    // interfaces, an unreadable file) every thread reads whole.
    capture::FileReader probe;
    const bool split = passes_.size() > 1 && probe.open(path) && probe.mapped_layout() &&
                       probe.mapped_layout()->file_size < SplitRead::kMaxFileBytes &&
                       std::getenv("RDMADIAG_JOBS_NO_SPLIT") == nullptr;
    if (split) {
      SplitRead read(passes_, path, *probe.mapped_layout(), probe.linktype());
      on_every_shard(passes_.size(), [&](unsigned t) {
        seen[t].push_back(read.run(t, progress && t == 0));
        seen[t].back().snaplen = probe.snaplen();
      });
      split_rewalks_ += read.rewalks();
      split_icrc_verified_ += read.icrc_verified();
    } else {
      on_every_shard(passes_.size(),
                     [&](unsigned t) { seen[t].push_back(read_input(*passes_[t], path, progress && t == 0)); });
    }
  }
  Result r = merge(passes_, tally_);
  // A file that changed while the shards read it: they did not see the same frames.
  for (std::size_t i = 1; i < seen.size(); ++i)
    for (std::size_t k = 0; k < seen[0].size(); ++k)
      if (seen[i][k].error != seen[0][k].error || seen[i][k].records != seen[0][k].records ||
          seen[i][k].stop_reason != seen[0][k].stop_reason)
        r.exact = false;
  r.inputs = std::move(seen[0]);
  r.split_rewalks = split_rewalks_;
  r.split_icrc_verified = split_icrc_verified_;
  return r;
}

void ParallelAnalysis::keep_shards_until_exit() {
  static auto* kept = new std::vector<std::unique_ptr<ShardPass>>;  // never destroyed: no frees at exit
  for (auto& p : passes_) kept->push_back(std::move(p));
  passes_.clear();
}

ParallelAnalysis::Result ParallelAnalysis::merge(std::vector<std::unique_ptr<ShardPass>>& passes, bool tally) {
  Result r;
  std::vector<decode::Analyzer*> analyzers;
  for (auto& p : passes) {
    analyzers.push_back(&p->analyzer());
    if (p->misrouted()) r.exact = false;
    r.frames_per_shard.push_back(p->frames());
  }
  decode::AnalyzerMerge::finish_shards(analyzers);
  if (decode::AnalyzerMerge::cm_split(analyzers) || decode::AnalyzerMerge::pause_split(analyzers) ||
      decode::AnalyzerMerge::corrupt_address_split(analyzers))
    r.exact = false;
  r.bounds_reached = decode::AnalyzerMerge::bounds_reached(analyzers);
  r.analyzer = std::make_unique<decode::Analyzer>();
  std::vector<std::vector<std::uint32_t>> flow_index;
  decode::AnalyzerMerge::merge(analyzers, *r.analyzer, flow_index);
  if (!passes.empty()) r.analyzer->copies() = passes[0]->assigner().copies();
  if (tally) {
    std::vector<const exporters::FlowTally*> tallies;
    for (auto& p : passes) tallies.push_back(p->tally());
    r.tally = std::make_unique<exporters::FlowTally>(
        exporters::FlowTally::merge(tallies, flow_index, passes.empty() ? 0 : passes[0]->origin()));
  }
  return r;
}

}  // namespace rdmadiag::cli
