// Merging the analyzers of a sharded analysis (`analyze -j N`) into the results
// one Analyzer fed every frame would have produced. Each shard is an Analyzer
// fed, in frame order and with the original frame numbers and times, every
// frame of the connections (endpoint address pairs, shard_key.h) assigned to it
// and some of the frames that relate to nothing. Since no analysis state spans
// two address pairs, each flow's results are already those of one thread; what
// the merge restores is everything numbered or ordered across flows:
//   - flow indices (creation order = the frame that created the flow), peers;
//   - the anomaly log (order of insertion: the frame being analysed, then the
//     end-of-input phase), its cap, and the flow indices in it;
//   - iWARP flow indices (order of identification) and totals;
//   - the capture summary (sums; first/last frame; first frames of each diagnostic).
// Limits (where the merge cannot be exact; docs/analysis.md): the flow-table
// bounds apply per shard (TransportAnalyzer::kMaxLiveFlows, kMaxRetiredFlows,
// IwarpAnalyzer::kMaxConnections, the TCP buffer budget, the tracked queue pairs).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "decode/analyzer.h"

namespace rdmadiag::decode {

class AnalyzerMerge {
 public:
  // Ends the shards' analyses as one analyzer's would end: the TCP streams
  // still open end at the input's last TCP frame, whichever shard saw it.
  static void finish_shards(std::span<Analyzer* const> shards);

  // Merges finished shards into `out` (a new Analyzer that saw no frame).
  // flow_index[s][i]: the merged index of flow i of shard s (UINT32_MAX: none).
  static void merge(std::span<Analyzer* const> shards, Analyzer& out,
                    std::vector<std::vector<std::uint32_t>>& flow_index);

  // Whether a CM REP in one shard may have answered a REQ seen in another (a
  // REP sent from other addresses than the REQ went to): one analyzer would
  // have paired them, the shards could not.
  static bool cm_split(std::span<Analyzer* const> shards);

  // Whether a shard holds a corrupt packet alone on its address pair (a bit
  // error in an address): one analyzer ties it to the flow of the hosts one
  // bit away, which may be in another shard.
  static bool corrupt_address_split(std::span<Analyzer* const> shards);

  // Whether the shards' pause states differ (each should have seen every MAC
  // Control frame: ShardPass); then the merged pause results would not be exact.
  static bool pause_split(std::span<Analyzer* const> shards);

  // Whether a shard reached a bound that one analyzer would have reached at a
  // different point (then the merged results may differ from one thread's).
  static bool bounds_reached(std::span<Analyzer* const> shards);
};

}  // namespace rdmadiag::decode
