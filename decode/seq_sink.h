// Where the per-flow sequence machines of the IB/RoCE transport analysis
// (rc_requester.h, rc_responder.h, unreliable_sequence.h) report: anomalies
// into the capture's log (tagged with the flow), the flow's counters, the
// verdict on the packet being analysed, and request -> response links. The
// machines see nothing else of the analyzer, so each transition can be driven
// and checked on its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "decode/analyzer.h"
#include "decode/anomaly.h"
#include "decode/flow_summary.h"

namespace rdmadiag::decode {

class SeqSink {
 public:
  using LinkFn = std::function<void(std::uint64_t request_frame, std::uint64_t response_frame, double latency_us)>;

  // `out` may be null (a report made after the packet, e.g. at the end of the capture).
  SeqSink(AnomalyLog& log, FlowSummary& stats, PacketAnalysis* out, const LinkFn* link = nullptr)
      : log_(log), stats_(stats), out_(out), link_(link) {}

  FlowSummary& stats() { return stats_; }
  // The verdict on the packet being analysed; a scratch one when there is none.
  PacketVerdict& verdict() { return out_ ? static_cast<PacketVerdict&>(*out_) : scratch_; }

  // Adds an anomaly of this flow; returns its handle for later updates (SIZE_MAX: not kept).
  std::size_t report(Anomaly a) {
    a.flow = stats_.index;
    if (!a.dest_qp) a.dest_qp = stats_.key.dest_qp;
    const std::size_t handle = log_.items().size();
    log_.add(a);
    if (out_ && out_->anomaly_count < 255) ++out_->anomaly_count;
    return handle < log_.items().size() ? handle : SIZE_MAX;
  }
  // An anomaly reported earlier (of any flow), or nullptr if it was not kept.
  Anomaly* anomaly(std::size_t handle) { return handle < log_.items().size() ? &log_.items()[handle] : nullptr; }
  // A part of an earlier anomaly (a gap split in two): logged, not counted at this packet.
  std::size_t add_part(Anomaly a) {
    const std::size_t handle = log_.items().size();
    log_.add(a);
    return handle < log_.items().size() ? handle : SIZE_MAX;
  }
  void retract(std::size_t handle) { log_.retract(handle); }
  void revise(const GapRevision& r) { log_.note_revision(r); }
  void revise(SpuriousRevision r) {
    r.flow = stats_.index;
    log_.note_revision(r);
  }
  void relate(std::size_t handle, std::uint64_t frame) {
    if (Anomaly* a = anomaly(handle)) a->relate(frame);
  }

  // A request at `request_frame` answered at `response_frame` (latency in microseconds).
  void link(std::uint64_t request_frame, std::uint64_t response_frame, double latency_us) {
    if (link_ && *link_) (*link_)(request_frame, response_frame, latency_us);
  }

 private:
  AnomalyLog& log_;
  FlowSummary& stats_;
  PacketAnalysis* out_;
  const LinkFn* link_;
  PacketVerdict scratch_;
};

}  // namespace rdmadiag::decode
