#include "decode/analyzer.h"

#include "decode/transport_analysis.h"

namespace rdmadiag::decode {

Analyzer::Analyzer() : transport_(std::make_unique<TransportAnalyzer>(anomalies_)) {}
Analyzer::~Analyzer() = default;

void Analyzer::add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out) {
  out = PacketAnalysis{};
  summary_.add(p, frame, ts);
  if (p.is_rdma() && p.has_bth) transport_->add(p, frame, ts, out);
}

void Analyzer::finish() { transport_->finish(); }

}  // namespace rdmadiag::decode
