// The Wireshark plugin's state for one open file, without any Wireshark type:
// the analysis of the first, in-order pass, the per-frame records it leaves,
// and what the display passes read back (anomalies, peer QPs, response links).
// Kept free of epan so the fuzz target fuzz_dissector_glue runs exactly this
// code (docs/robustness.md); packet-rdmadiag.cpp only turns it into tree items.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/analyzer.h"
#include "decode/nvme_analysis.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"
#include "dissector/frame_records.h"

namespace rdmadiag::wireshark {

// An NVMe command's capsule or completion frame, as `rdmadiag nvme` sees it
// (decode/nvme_analysis.h): known once the completion was read (first pass),
// or after finish() for commands that never completed.
struct NvmeFrameNote {
  bool command = false;                 // the command capsule (else the completion)
  std::uint16_t qid = decode::kNvmeUnknownQid, cid = 0;
  std::uint64_t command_frame = 0, response_frame = 0;  // response_frame 0: no completion in the capture
  double latency_us = -1;
  std::uint32_t transport_events = 0;   // on the queue's queue pairs inside the command's window
  std::uint64_t first_event_frame = 0;
  std::string name;                     // command name
};

class PluginSession {
 public:
  // pmtu: the preference (256..4096), anything else means "inferred from the trace".
  // link_mbps: the link speed preference for pause times (0: unknown).
  PluginSession(const decode::DecodeOptions& options, unsigned pmtu, unsigned link_mbps = 0);

  const decode::DecodeOptions& options() const { return options_; }
  void set_options(const decode::DecodeOptions& o) { options_ = o; }

  // First pass: frames come once each, in increasing order. Fills `r` (not its
  // iWARP array: see last_units) and returns true when the frame is worth keeping;
  // false for frames seen before, after finish(), or with nothing to say.
  // `ts_ns`: the same time in integer nanoseconds (the pause and congestion analyses work in ns).
  bool analyse(const decode::DecodedPacket& p, std::uint64_t frame, double ts, std::int64_t ts_ns, FrameRecord& r);
  // The MPA units of the frame analyse() last looked at (copy them with fill_iwarp_unit).
  const decode::IwarpFrame& last_units() const { return analysis_.iwarp; }

  // End of the first pass: flows are paired and summarised.
  void finish();
  bool finished() const { return finished_; }

  // Display passes.
  std::optional<std::uint32_t> peer_qp(std::uint32_t flow) const;
  // The gap at `frame` as the whole capture tells it (PSNs that arrived late are
  // not missing); `when_read` is what the analysis said when it read the frame.
  std::uint32_t gap_at(std::uint64_t frame, std::uint32_t when_read) const;
  // Whether the resend at `frame` of `flow` is spurious as the whole capture
  // tells it (later answers can show it was needed); `when_read` as for gap_at.
  bool spurious_at(std::uint32_t flow, std::uint64_t frame, bool when_read) const;
  // After finish(): the verdict of a frame first taken for corrupt and analysed
  // again as intact (its direction's ICRCs are not the wire's), or nullptr.
  const decode::ReplayRevision* replay_at(std::uint64_t frame) const;
  // The anomalies raised at the record's frame that the (capped) log kept.
  std::span<const decode::Anomaly> anomalies_of(const FrameRecord& r) const;
  // After finish(): the anomalies the analysis lists (not withdrawn; checksum
  // kinds aside, their own items show them) that name `frame` (Anomaly::frame;
  // cc_no_reaction: the packet where it was judged, its first related frame),
  // as indexes for anomaly(); raised at this frame or later. Empty before finish().
  std::span<const std::uint32_t> anomalies_at(std::uint64_t frame) const;
  const decode::Anomaly& anomaly(std::uint32_t index) const { return analyzer_.anomalies().items()[index]; }
  // An anomaly worded as `rdmadiag analyze` words it.
  std::string anomaly_text(const decode::Anomaly& a) const;
  // The response of a request frame (known once the response was seen).
  const decode::TransportAnalyzer::ForwardLink* response_of(std::uint64_t frame) const;
  // The NVMe command capsules and completions at `frame` (an iWARP segment may
  // carry several), in the order they were noted.
  std::span<const NvmeFrameNote> nvme_at(std::uint64_t frame) const;

 private:
  decode::Analyzer analyzer_;
  decode::DecodeOptions options_;
  decode::PacketAnalysis analysis_;  // ~12 KB: a member, not a stack local per frame
  bool finished_ = false;
  std::uint64_t last_frame_ = 0;
  std::unordered_map<std::uint32_t, std::uint32_t> peer_qp_;  // flow index -> QP at its source
  std::unordered_map<std::uint64_t, std::int64_t> gap_revision_;  // gap frame -> PSNs that came late after it
  std::vector<decode::SpuriousRevision> spurious_revisions_;      // resends shown needed by lost answers
  std::unordered_map<std::uint64_t, decode::ReplayRevision> replays_;  // frames analysed again as intact
  // After finish(): the frames the listed anomalies are shown at, in order, and their log indexes.
  std::vector<std::uint64_t> shown_frames_;
  std::vector<std::uint32_t> shown_anomalies_;
  void index_anomalies();
  void note_nvme(const decode::NvmeCommandResult& r);
  std::unique_ptr<decode::NvmeAnalyzer> nvme_;  // large: on the heap
  // Per command/completion frame, as Wireshark keeps per-frame state.
  std::unordered_map<std::uint64_t, std::vector<NvmeFrameNote>> nvme_frames_;
  void keep_nvme_note(std::uint64_t frame, const NvmeFrameNote& n);
};

// Checksums are shown by their own items, not as anomalies.
bool is_crc_anomaly(decode::AnomalyKind k);

// Length of a header the decoder placed at `off`, clipped to the captured bytes.
inline std::uint32_t clip_to_captured(std::uint32_t captured, std::uint32_t off, std::uint32_t len) {
  if (off >= captured) return 0;
  return len < captured - off ? len : captured - off;
}

}  // namespace rdmadiag::wireshark
