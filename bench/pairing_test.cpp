// The pairing of responses with their requester flows (decode/transport_analysis.cpp
// infer_peer) costs O(1) index look-ups per packet whatever the number of QPs
// between two ends: counted (TransportAnalyzer::pairing_probes), not timed.
// Ground truth from the generator (bench/capture_gen.cpp): connection i's
// requester QP is 0x100 + 2i and its responder QP 0x101 + 2i, so a flow to
// QP q is correctly paired exactly when its peer's destination QP is q ^ 1.
// The same holds for matching CNPs to data flows (decode/congestion_analysis.cpp
// flow_for_cnp): the generator's CNP for a CE mark on the flow to QP q goes to
// the requester's QP q ^ 1, so a matched flow's sender QP must be q ^ 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "bench/capture_gen.h"
#include "decode/analyzer.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"

namespace {

namespace decode = rdmadiag::decode;

struct PairingRun {
  double probes_per_packet = 0;
  std::size_t paired = 0, mispaired = 0, flows = 0;
  std::uint64_t cnps = 0, cnps_unmatched = 0, cnp_probes = 0;
  std::size_t cc_matched = 0, cc_mismatched = 0;
};

void count_cnp_matching(const decode::CongestionAnalyzer& cc, PairingRun& r) {
  r.cnps = cc.totals().cnps;
  r.cnps_unmatched = cc.totals().cnps_unmatched;
  r.cnp_probes = cc.cnp_match_probes();
  for (const decode::CcFlowResult& f : cc.flows()) {
    if (!f.sender_qp_known) continue;
    ++r.cc_matched;
    if (f.sender_qp != (f.key.dest_qp ^ 1u)) ++r.cc_mismatched;
  }
}

// Every connection between the same two hosts (one client, one server).
PairingRun run_between_two_hosts(std::uint32_t qps, std::uint64_t packets, double ce = 0) {
  rdmadiag::bench::GenOptions o;
  o.packets = packets;
  o.ce = ce;
  o.qps = qps;
  o.clients = 1;
  o.servers = 1;
  decode::DecodeOptions opts;
  auto analyzer = std::make_unique<decode::Analyzer>();
  auto pkt = std::make_unique<decode::DecodedPacket>();
  auto pa = std::make_unique<decode::PacketAnalysis>();
  std::uint64_t frame = 0;
  rdmadiag::bench::generate(o, [&](std::uint64_t ts_ns, decode::Bytes b) {
    decode::decode_frame(decode::linktype::kEthernet, b, static_cast<std::uint32_t>(b.size()), opts, *pkt);
    analyzer->add(*pkt, ++frame, static_cast<double>(ts_ns) * 1e-9, *pa);
  });
  const std::uint64_t probes = analyzer->transport().pairing_probes();
  std::printf("%u QPs between two hosts: %llu pairing probes in %llu packets\n", qps,
              static_cast<unsigned long long>(probes), static_cast<unsigned long long>(frame));
  analyzer->finish();
  PairingRun r;
  r.probes_per_packet = static_cast<double>(probes) / static_cast<double>(frame);
  for (const decode::FlowSummary& f : analyzer->transport().flows()) {
    ++r.flows;
    if (f.pairing == decode::Pairing::none) continue;
    ++r.paired;
    if (f.peer_qp != (f.key.dest_qp ^ 1u)) ++r.mispaired;
  }
  count_cnp_matching(analyzer->congestion(), r);
  return r;
}

TEST(PairingIndex, ProbesPerPacketIndependentOfQpCount) {
  const PairingRun few = run_between_two_hosts(64, 200'000);
  const PairingRun many = run_between_two_hosts(16'384, 200'000);
  // A response flow pairs once (a handful of probes); paired flows cost none.
  EXPECT_LT(few.probes_per_packet, 0.05);
  EXPECT_LT(many.probes_per_packet, 1.0);
  // Independent of the QP count: 16K connections between two ends, each
  // pairing once in 200K packets, look at no more than ~3 buckets or flows each.
  const double per_connection = many.probes_per_packet * 200'000 / 16'384;
  EXPECT_LT(per_connection, 8.0) << many.probes_per_packet;
  for (const PairingRun* r : {&few, &many}) EXPECT_GT(r->paired, r->flows * 9 / 10);
  // Every pairing right, the 16K connections' too: an answer pairs with the one
  // requester whose outstanding request holds its PSN, or that missed a request
  // just below it (a NAK), and with none when two fit alike (decode/
  // transport_analysis.cpp psn_fit). The rule before session 43 took the
  // requester whose next PSN was nearest above: 28 wrong here (with the
  // generator's NAKs for a message's lost last packet, since dropped).
  EXPECT_EQ(few.mispaired, 0u);
  EXPECT_EQ(many.mispaired, 0u);
}

// With more connections than the analysis keeps live (1M between two ends,
// 2.2 packets a flow), most requesters never see an answer and wait in the
// PSN buckets until retired: a response walks its bucket's list, so the probes
// per pairing grow, but only up to the live-flow cap's share of a bucket
// (kMaxLiveFlows over the 2^(24 - kPsnBucketBits) buckets of a pair of ends),
// never with the QP count itself. Measured: 4.0 probes per paired connection
// with 64 connections, 5.4 with 16K, 12.1 with 1M (docs/performance.md; since
// session 43 a candidate's requester state read counts as a probe too).
TEST(PairingIndex, ProbesBoundedByTheLiveFlowCap) {
  constexpr std::uint64_t kPackets = 300'000;
  const PairingRun r = run_between_two_hosts(1u << 20, kPackets);
  ASSERT_GT(r.paired, 10'000u);
  const double per_connection = r.probes_per_packet * kPackets / (static_cast<double>(r.paired) / 2);
  constexpr double kBucketShare = static_cast<double>(decode::TransportAnalyzer::kMaxLiveFlows) /
                                  (1u << (24 - decode::TransportAnalyzer::kPsnBucketBits));
  EXPECT_LT(per_connection, kBucketShare) << per_connection;
  // With this many unanswered requesters between two ends, another
  // connection's outstanding request can hold the PSN an answer carries; a
  // holder is taken before a requester that missed it (the known limit in
  // docs/analysis.md). None of 53,528 paired here: the rule before session 43
  // mispaired 68 (137 with the generator's NAKs for a lost last packet), and 2
  // were left by a NAK naming a stale request's last PSN, ruled out since (a
  // sequence NAK is drawn by a later request). Bounded, not zero: a rarer
  // coincidence stays possible at this density.
  std::printf("1M connections: %zu paired, %zu mispaired\n", r.paired, r.mispaired);
  EXPECT_LE(r.mispaired, r.paired / 10'000);
}

// CE marks on 2 % of the requests, each answered by a CNP (paced per QP as
// DCQCN does): matching a CNP to its data flow looks at an index entry and the
// front of a queue, not at every flow between the two ends (the scan it
// replaced looked at ~8,000 flows per CNP with 16K connections).
TEST(CnpMatching, ProbesPerCnpIndependentOfQpCount) {
  for (const std::uint32_t qps : {64u, 16'384u}) {
    const PairingRun r = run_between_two_hosts(qps, 200'000, 0.02);
    std::printf("%u QPs: %llu CNPs, %llu match probes, %zu flows matched\n", qps,
                static_cast<unsigned long long>(r.cnps), static_cast<unsigned long long>(r.cnp_probes), r.cc_matched);
    ASSERT_GT(r.cnps, 2'000u);
    EXPECT_EQ(r.cnps_unmatched, 0u);
    EXPECT_LT(static_cast<double>(r.cnp_probes) / static_cast<double>(r.cnps), 4.0);
    EXPECT_GT(r.cc_matched, 0u);
    EXPECT_EQ(r.cc_mismatched, 0u);
  }
}

}  // namespace
