// IB / RoCE transport analysis (IBA Vol 1 ch. 9.7, reliable and unreliable
// services): per-QP PSN sequencing, NAKs and retransmissions, request/response
// matching with wire latency, congestion signals. Placeholder until the pass lands.
#pragma once
#include "decode/analyzer.h"

namespace rdmadiag::decode {

class TransportAnalyzer {
 public:
  explicit TransportAnalyzer(AnomalyLog& log) : log_(log) {}
  void add(const DecodedPacket&, std::uint64_t, double, PacketAnalysis&) {}
  void finish() {}

 private:
  [[maybe_unused]] AnomalyLog& log_;
};

}  // namespace rdmadiag::decode
