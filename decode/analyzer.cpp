#include "decode/analyzer.h"

#include <cmath>

#include "decode/transport_analysis.h"

namespace rdmadiag::decode {

Analyzer::Analyzer()
    : transport_(std::make_unique<TransportAnalyzer>(anomalies_)),
      iwarp_(std::make_unique<IwarpAnalyzer>(anomalies_)),
      pfc_(std::make_unique<PfcAnalyzer>(anomalies_)),
      cc_(std::make_unique<CongestionAnalyzer>(anomalies_)) {
  transport_->set_next_pass(cc_.get());
}
Analyzer::~Analyzer() = default;

void Analyzer::add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out, std::int64_t ts_ns,
                   const FlowAhead* ahead) {
  if (ts_ns == kNoNs) ts_ns = std::llround(ts * 1e9);
  out.reset();
  anomalies_.set_order_key(frame);
  bool qp_counted = false;
  if (p.is_rdma() && p.has_bth) {
    transport_->add(p, frame, ts, out, ts_ns, ahead && ahead->on ? ahead : nullptr);
    // A flow keyed by this packet's destination QP that had packets before: each
    // of them was counted with the same QP key.
    const TransportAnalyzer::KeyedFlow& k = transport_->last_key();
    qp_counted = k.had_packets && k.key.dest_qp == p.ib.bth.dest_qp && queue_pair_follows_ends(p);
    if (p.transport == Transport::roce_v1 || p.transport == Transport::roce_v2) {
      pfc_->add_roce(p, ts_ns, frame);
      congestion(p, frame, ts_ns, out);
    }
  }
  summary_.add(p, frame, ts, qp_counted);
  if (p.mac_control) pfc_->add_mac_control(p, frame, ts_ns);
  if (p.tcp) {
    iwarp_->add(p, frame, ts, out.iwarp, ts_ns);
    if (!out.iwarp.empty()) {  // an MPA unit ended here: count the frame as iWARP, not as other TCP
      Counter& from = summary_.by_transport[static_cast<std::size_t>(p.transport)];
      --from.packets;
      from.bytes -= p.wirelen;
      summary_.by_transport[static_cast<std::size_t>(Transport::iwarp)].add(p.wirelen);
    }
  }
  if (frame % kSweepFrames == 0) sweep(ts);
}

bool Analyzer::looks_ahead() const { return transport_->looks_ahead(); }

void Analyzer::look_ahead(const DecodedPacket& p, FlowAhead& a, int step) const {
  if (step == 0 && !p.is_rdma()) {
    a.on = false;
    return;
  }
  transport_->look_ahead(p, a, step);
  if (step == 2 && a.on && a.slot == UINT32_MAX) summary_.prefetch_queue_pair(p);
}

void Analyzer::congestion(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, PacketAnalysis& out) {
  const TransportAnalyzer::KeyedFlow& k = transport_->last_key();
  const CongestionAnalyzer::FrameFindings f = cc_->add(p, frame, ts_ns, out.flow, &k.key, k.hash, k.cc_slot);
  if (f.cnp_response_ns >= 0) {
    out.cnp_response_us = static_cast<double>(f.cnp_response_ns) * 1e-3;
    out.cnp_mark_frame = f.cnp_mark_frame;
  }
  out.cc_verdict = f.verdict;
  out.cc_cnp_frame = f.episode_cnp_frame;
}

void Analyzer::add_pause_state(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns) {
  anomalies_.set_order_key(frame);
  if (p.mac_control) pfc_->add_mac_control(p, frame, ts_ns);
}

void Analyzer::sweep(double now) {
  transport_->sweep(now);
  iwarp_->sweep(now);
  cc_->sweep(std::llround(now * 1e9));
}

void Analyzer::keep_merge_order() {
  anomalies_.keep_order_keys(true);
  transport_->track_cm_ids();
}

void Analyzer::finish() {
  transport_->finish();
  iwarp_->finish();
  pfc_->finish();
  cc_->finish();
}

}  // namespace rdmadiag::decode
