// The stateful pass over decode results: one object that every front end
// (analyze, capture, the Wireshark plugin) feeds frame by frame, in order. It
// keeps the capture summary and runs the per-transport analyses, each keyed by
// flow with bounded memory, and says per frame what it concluded.
#pragma once
#include <cstdint>
#include <memory>

#include "decode/anomaly.h"
#include "decode/capture_summary.h"
#include "decode/congestion_analysis.h"
#include "decode/copy_detector.h"
#include "decode/flow_summary.h"
#include "decode/iwarp_analysis.h"
#include "decode/packet.h"
#include "decode/pfc_analysis.h"

namespace rdmadiag::decode {

// What the analysis concluded about one frame (for --packets and the plugin).
// Filled by the transport analyses; fixed size, no heap. The scalar verdicts are
// a base so that reset() can clear them without touching the ~12 KB of iWARP
// slots, of which a frame uses at most a few.
struct PacketVerdict {
  bool analysed = false;           // an RDMA transport frame the PSN analysis looked at
  std::uint32_t flow = UINT32_MAX; // index of the flow (direction) it belongs to
  std::int64_t expected_psn = -1;
  std::uint32_t gap = 0;           // PSNs missing just before this frame
  bool duplicate = false;
  bool out_of_order = false;
  bool retransmission = false;
  bool spurious_retransmission = false;  // a resend of a packet that was not lost at the capture point
  std::uint64_t request_frame = 0;   // for a response/ACK: the request it answers
  std::uint64_t response_frame = 0;  // for a request: its response/ACK (known in a second pass)
  double latency_us = -1;            // request -> response at the capture point
  std::uint64_t nak_gap_frame = 0;   // for a NAK: the frame where the gap it answers was seen
  bool ecn_ce = false;
  bool cnp = false;
  // Its ICRC is bad in the capture, but its direction's ICRCs are not the wire's
  // (icrc_origin.h): not corrupt.
  bool icrc_not_wire = false;
  // Congestion analysis (congestion_analysis.h): a CNP's response time to the
  // CE mark it answers; an episode after a CNP judged at this frame.
  double cnp_response_us = -1;
  std::uint64_t cnp_mark_frame = 0;
  CcVerdict cc_verdict = CcVerdict::none;
  std::uint64_t cc_cnp_frame = 0;        // the CNP that opened the judged episode
  std::uint8_t anomaly_count = 0;    // anomalies raised at this frame
};

struct PacketAnalysis : PacketVerdict {
  IwarpFrame iwarp;                  // iWARP: the MPA units (FPDUs, Request/Reply) that ended in this frame
  // Back to the default state: what a new PacketAnalysis holds, as far as anyone can read.
  void reset() {
    // Copied from a constant: assigning a temporary made GCC zero it on the
    // stack in 8-byte stores and reload it in 16-byte loads, each a failed
    // store-to-load forward (~6 % of the CPU on the 64-connection bench capture).
    static constexpr PacketVerdict kClear{};
    static_cast<PacketVerdict&>(*this) = kClear;
    iwarp.clear();
  }
};

class TransportAnalyzer;  // IB / RoCE (transport_analysis.h)

// A frame's flow, computed ahead of its analysis (Analyzer::look_ahead).
struct FlowAhead {
  FlowKey key;
  std::uint64_t hash = 0;
  std::uint32_t slot = UINT32_MAX;  // the flow's slot at the last step (a hint: it may have gone since)
  bool on = false;  // the frame has a flow to load
};

class Analyzer {
 public:
  Analyzer();
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // Idle flows are retired after every kSweepFrames-th frame of the input.
  static constexpr std::uint64_t kSweepFrames = 65536;

  // `frame` is 1-based and increasing; `ts` in seconds; `ts_ns` the same time in
  // integer nanoseconds when the caller has it (the pause analysis works in ns,
  // finer than a double of seconds since the epoch resolves), else from `ts`.
  static constexpr std::int64_t kNoNs = INT64_MIN;
  // `ahead`: what look_ahead found for `p` (its key, hash and slot are not looked up again).
  void add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out, std::int64_t ts_ns = kNoNs,
           const FlowAhead* ahead = nullptr);
  // Starts loading what add() will read for `p`, a frame decoded ahead of its
  // analysis (for a batch, step 0 on each frame, then 1, then 2, the later the
  // nearer add(): TransportAnalyzer::look_ahead). Only loads: add()'s results
  // do not change.
  void look_ahead(const DecodedPacket& p, FlowAhead& a, int step) const;
  // Whether looking ahead can pay: the flow states no longer fit a core's cache.
  bool looks_ahead() const;
  // End of input: flush state (pending gaps, open flows) into the results.
  void finish();
  // analyze -j: a MAC Control frame that another shard analyses. Every shard
  // keeps the pause state (the RoCE frames it analyses are checked against it);
  // nothing else is counted here.
  void add_pause_state(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns);

  // A shard of a sharded analysis (analyze -j, analyzer_merge.h) sees only some
  // frames. The sweep after a frame it did not see: `now` is that frame's time.
  void sweep(double now);
  // Keeps what the merge needs to order the results as one analyzer would.
  void keep_merge_order();

  const CaptureSummary& summary() const { return summary_; }
  const AnomalyLog& anomalies() const { return anomalies_; }
  AnomalyLog& anomalies() { return anomalies_; }
  const TransportAnalyzer& transport() const { return *transport_; }
  TransportAnalyzer& transport() { return *transport_; }  // e.g. to enable its forward links
  const IwarpAnalyzer& iwarp() const { return *iwarp_; }
  IwarpAnalyzer& iwarp() { return *iwarp_; }  // e.g. to keep Read Response heads (NVMe Connect data)
  const PfcAnalyzer& pfc() const { return *pfc_; }
  PfcAnalyzer& pfc() { return *pfc_; }  // e.g. to set the link speed
  const CongestionAnalyzer& congestion() const { return *cc_; }
  CongestionAnalyzer& congestion() { return *cc_; }
  // Exact copies of recent frames (copy_detector.h): the front end feeds it
  // each frame's bytes, which the decode result does not keep.
  const CopyDetector& copies() const { return copies_; }
  CopyDetector& copies() { return copies_; }

 private:
  CaptureSummary summary_;
  AnomalyLog anomalies_;
  std::unique_ptr<TransportAnalyzer> transport_;
  std::unique_ptr<IwarpAnalyzer> iwarp_;
  std::unique_ptr<PfcAnalyzer> pfc_;
  std::unique_ptr<CongestionAnalyzer> cc_;
  CopyDetector copies_;
  void congestion(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, PacketAnalysis& out);
  friend class AnalyzerMerge;
};

}  // namespace rdmadiag::decode
