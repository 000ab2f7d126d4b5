// iWARP stream analysis on byte fixtures built here from RFC 5044/5041/5040
// (MPA Request/Reply, FPDUs with pad, CRC32c computed bit by bit, markers placed
// every 512 octets of sequence space counted from the first FPDU), fed as TCP
// segments cut, repeated, reordered and lost; and on the real siw captures,
// whose FPDU counts are taken from tshark's decode beside them (*.tshark.tsv).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "stream_fixture.h"

using namespace iwarp_fixture;

TEST(IwarpStream, NegotiationAndFpdusSplitAcrossAndPackedInSegments) {
  for (std::vector<std::size_t> sizes : {std::vector<std::size_t>{1}, {3}, {7, 50}, {1448}, {100000}}) {
    Harness h;
    StreamWriter ini, res;
    negotiate(h, ini, res, false, true);
    for (std::uint32_t m = 1; m <= 20; ++m) ini.fpdu(send_ulpdu(m, m * 5));
    for (const auto& s : cut(ini, 0, sizes)) h.send(s);
    const auto f = h.fpdus();
    ASSERT_EQ(f.size(), 20u);
    for (std::uint32_t m = 1; m <= 20; ++m) {
      EXPECT_EQ(f[m - 1].seg.ddp.msn, m);
      EXPECT_EQ(f[m - 1].seg.payload_len, m * 5);
      EXPECT_EQ(f[m - 1].crc_status, MpaCrcStatus::ok);
      EXPECT_EQ(f[m - 1].pad, mpa_pad(18 + m * 5));
      EXPECT_FALSE(f[m - 1].resync);
    }
    EXPECT_EQ(h.an.anomalies().total(), 0u);
    ASSERT_GE(h.units.size(), 2u);
    EXPECT_EQ(h.units[0].kind, IwarpPdu::Kind::mpa_request);
    EXPECT_TRUE(h.units[0].negotiation.enhanced);
    EXPECT_EQ(h.units[0].negotiation.ird, 8);
    EXPECT_EQ(h.units[0].negotiation.ord, 4);
    EXPECT_TRUE(h.units[0].negotiation.peer_to_peer);
    EXPECT_TRUE(h.units[0].negotiation.rtr_write);
  }
}

// A first FPDU of every size from 0 to 520 payload bytes moves the 512-octet
// marker grid across every offset of the FPDUs after it: the header, the DDP
// header, payload, pad, the CRC, and the boundary between FPDUs.
TEST(IwarpStream, MarkersAtEveryOffsetRelationToTheFpdu) {
  for (std::size_t first = 0; first <= 520; ++first) {
    Harness h;
    StreamWriter ini, res;
    negotiate(h, ini, res, true, true);
    ini.fpdu(send_ulpdu(1, first));
    for (std::uint32_t m = 2; m <= 6; ++m) ini.fpdu(send_ulpdu(m, 97 + m));
    ini.fpdu(write_ulpdu(0x1234, 0x10000, 700, true));
    for (const auto& s : cut(ini, 0, {333, 1448})) h.send(s);
    const auto f = h.fpdus();
    ASSERT_EQ(f.size(), 7u) << first;
    std::uint32_t markers = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(f[i].crc_status, MpaCrcStatus::ok) << first << " fpdu " << i;
      ASSERT_TRUE(f[i].header_decoded);
      markers += f[i].markers;
    }
    EXPECT_EQ(f[0].seg.payload_len, first);
    EXPECT_EQ(f[6].seg.payload_len, 700u);
    EXPECT_EQ(f[6].seg.ddp.to, 0x10000u);
    EXPECT_GE(markers, 3u);
    ASSERT_EQ(h.an.anomalies().total(), 0u) << first;
  }
}

TEST(IwarpStream, RetransmittedOverlappingAndReorderedSegments) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, false, true);
  for (std::uint32_t m = 1; m <= 10; ++m) ini.fpdu(send_ulpdu(m, 40));
  auto segs = cut(ini, 0, {100});
  // Every segment sent twice; one segment re-sent as a larger overlapping one;
  // segments 3 and 4 swapped (out of order, filled at once: a recovered hole).
  std::vector<Segment> sent;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (i == 3) continue;
    sent.push_back(segs[i]);
    if (i == 4) sent.push_back(segs[3]);
    sent.push_back(segs[i]);
  }
  Segment overlap = segs[5];
  overlap.seq -= 30;
  overlap.data.insert(overlap.data.begin(), segs[4].data.end() - 30, segs[4].data.end());
  sent.push_back(overlap);
  for (const auto& s : sent) h.send(s);
  const auto f = h.fpdus();
  ASSERT_EQ(f.size(), 10u);
  for (std::uint32_t m = 1; m <= 10; ++m) EXPECT_EQ(f[m - 1].seg.ddp.msn, m);
  EXPECT_EQ(h.anomalies(AnomalyKind::ddp_msn_gap), 0u);
  EXPECT_EQ(h.anomalies(AnomalyKind::tcp_hole), 1u);  // recovered: the gap before segment 4 was filled
  EXPECT_EQ(h.an.iwarp().stats().tcp_holes_recovered, 1u);
  EXPECT_EQ(h.an.iwarp().stats().tcp_holes_lost, 0u);
}

TEST(IwarpStream, LostSegmentIsAHoleAndFramingResumesAfterIt) {
  for (bool markers : {false, true}) {
    Harness h;
    StreamWriter ini, res;
    negotiate(h, ini, res, markers, true);
    for (std::uint32_t m = 1; m <= 40; ++m) ini.fpdu(send_ulpdu(m, 60));
    auto segs = cut(ini, 0, {150});
    for (std::size_t i = 0; i < segs.size(); ++i)
      if (i != 5) h.send(segs[i]);
    // The responder acknowledges past the gap: the capture missed bytes that got through.
    h.send({1, res.start_seq, {}, 0x10}, ini.start_seq + std::uint32_t(ini.wire.size()));
    h.an.finish();
    const auto f = h.fpdus();
    EXPECT_EQ(h.anomalies(AnomalyKind::tcp_hole), 1u) << markers;
    EXPECT_EQ(h.an.iwarp().stats().tcp_holes_lost, 1u);
    EXPECT_EQ(h.anomalies(AnomalyKind::iwarp_resync), 1u);
    // Segment 5 covers bytes 750..899: FPDUs 10..12 (80 bytes each) touch it.
    ASSERT_GE(f.size(), 36u) << markers;
    EXPECT_EQ(f.back().seg.ddp.msn, 40u);
    for (const auto& u : f) EXPECT_EQ(u.crc_status, MpaCrcStatus::ok);
    EXPECT_TRUE(f.back().resync);
  }
}

TEST(IwarpStream, MsnGapAndMoDiscontinuityAndTerminate) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, false, false);
  ini.fpdu(send_ulpdu(1, 10));
  ini.fpdu(send_ulpdu(3, 10));                 // MSN 2 missing
  ini.fpdu(send_ulpdu(4, 10, false, 0));
  ini.fpdu(send_ulpdu(4, 10, true, 12));       // MO should be 10
  Buf term = {0x41, 0x47};
  be32(term, 0);
  be32(term, 2);  // QN 2
  be32(term, 1);
  be32(term, 0);
  term.push_back(0x12);  // layer DDP, etype 2 (untagged buffer)
  term.push_back(0x01);  // invalid QN
  term.push_back(0x40);  // D: the terminated DDP header follows
  term.push_back(0);
  be16(term, 30);
  Buf bad = send_ulpdu(9, 0);
  term.insert(term.end(), bad.begin(), bad.begin() + 18);
  ini.fpdu(term);
  for (const auto& s : cut(ini, 0, {1448})) h.send(s);
  const auto f = h.fpdus();
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].crc_status, MpaCrcStatus::not_negotiated);
  EXPECT_EQ(h.anomalies(AnomalyKind::ddp_msn_gap), 1u);
  EXPECT_EQ(h.anomalies(AnomalyKind::ddp_mo_discontinuity), 1u);
  EXPECT_EQ(h.anomalies(AnomalyKind::rdmap_terminate), 1u);
  ASSERT_TRUE(f[4].seg.has_terminate);
  EXPECT_EQ(f[4].seg.term.layer, 1);
  EXPECT_EQ(f[4].seg.term.error_type, 2);
  EXPECT_EQ(f[4].seg.term.error_code, 1);
  ASSERT_TRUE(f[4].seg.term.has_ddp);
  EXPECT_EQ(f[4].seg.term.ddp.msn, 9u);
  EXPECT_EQ(terminate_error_name(1, 2, 1), "invalid QN");
}

TEST(IwarpStream, CorruptedCrcIsBad) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, false, true);
  ini.fpdu(send_ulpdu(1, 30));
  ini.fpdu(send_ulpdu(2, 30));
  ini.wire[25] ^= 0x01;  // a payload bit of the first FPDU
  for (const auto& s : cut(ini, 0, {1448})) h.send(s);
  const auto f = h.fpdus();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].crc_status, MpaCrcStatus::bad);
  EXPECT_EQ(f[1].crc_status, MpaCrcStatus::ok);
  EXPECT_EQ(h.anomalies(AnomalyKind::mpa_crc_bad), 1u);
}

// ---- real captures -------------------------------------------------------

namespace {
struct CaptureRun {
  std::uint64_t fpdus = 0;
  std::map<std::uint64_t, std::vector<IwarpPdu>> by_frame;  // by the frame an FPDU ended in
  std::map<AnomalyKind, std::uint64_t> anomalies;
  std::vector<Anomaly> holes;  // tcp_hole, in the order reported
  std::uint64_t resyncs = 0;
  std::map<std::pair<int, int>, std::uint64_t> old_data_segments;  // (src port, dst port) -> resends of delivered bytes
  std::map<std::uint64_t, std::pair<int, int>> hole_fills;         // frame filling a hole -> direction
};

// `snap`: every record cut to that many bytes, as a snap length would.
CaptureRun run_capture(const std::string& name, std::uint64_t skip = 0, std::size_t snap = SIZE_MAX) {
  rdmadiag::capture::FileReader r;
  EXPECT_TRUE(r.open(std::string(RDMADIAG_PCAP_DIR) + "/" + name));
  Analyzer an;
  DecodedPacket p;
  rdmadiag::capture::Record rec;
  CaptureRun out;
  std::uint64_t frame = 0;
  while (r.next(rec)) {
    ++frame;
    if (frame <= skip) continue;
    decode_frame(r.linktype(), rec.data.first(std::min(snap, rec.data.size())), rec.wirelen, DecodeOptions{}, p);
    PacketAnalysis pa;
    an.add(p, frame, double(rec.ts_sec) + rec.ts_nsec * 1e-9, pa);
    for (const IwarpPdu& u : pa.iwarp)
      if (u.kind == IwarpPdu::Kind::fpdu) out.by_frame[u.end_frame].push_back(u);
  }
  an.finish();
  out.fpdus = an.iwarp().stats().fpdus;
  out.resyncs = an.iwarp().stats().resyncs;
  for (const IwarpFlowInfo& f : an.iwarp().flows())
    out.old_data_segments[{f.src_port, f.dst_port}] += f.tcp.retransmitted_segments;
  for (const Anomaly& a : an.anomalies().items())
    if (a.kind == AnomalyKind::tcp_hole) out.holes.push_back(a);
  for (const Anomaly& a : out.holes) {
    const IwarpFlowInfo& f = an.iwarp().flows().at(a.flow);
    if (a.related_count) out.hole_fills[a.related[0]] = {f.src_port, f.dst_port};
  }
  for (std::size_t k = 0; k < std::size_t(AnomalyKind::count_); ++k)
    if (an.anomalies().count(AnomalyKind(k))) out.anomalies[AnomalyKind(k)] = an.anomalies().count(AnomalyKind(k));
  return out;
}

// The tshark decode beside a capture (X.tshark.tsv): one map of column -> value per frame.
std::vector<std::map<std::string, std::string>> tshark_rows(const std::string& name) {
  std::ifstream in(std::string(RDMADIAG_PCAP_DIR) + "/" + name + ".tshark.tsv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  std::stringstream hs(line);
  for (std::string c; std::getline(hs, c, '\t');) head.push_back(c);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> row;
    std::stringstream ls(line);
    std::size_t i = 0;
    for (std::string c; std::getline(ls, c, '\t') && i < head.size(); ++i) row[head[i]] = c;
    rows.push_back(std::move(row));
  }
  return rows;
}

// FPDUs tshark decoded (iwarp_mpa.ulpdulength occurrences).
std::uint64_t tshark_fpdus(const std::string& name) {
  std::uint64_t n = 0;
  for (auto& row : tshark_rows(name)) {
    const std::string& v = row["iwarp_mpa.ulpdulength"];
    if (!v.empty()) n += 1 + std::count(v.begin(), v.end(), ',');
  }
  return n;
}
}  // namespace

TEST(IwarpCaptures, LossFreeCapturesDecodeEveryFpduWithoutAnomalies) {
  for (const char* name : {"siw_write_lat.pcap", "siw_mpacrc_write_lat.pcap", "siw_read_bw.pcap", "lab_siw_send_lat.pcap",
                           "lab_siw_read_lat.pcap"}) {
    const CaptureRun r = run_capture(name);
    EXPECT_EQ(r.fpdus, tshark_fpdus(std::string(name).substr(0, std::string(name).size() - 5))) << name;
    EXPECT_TRUE(r.anomalies.empty()) << name << ": " << r.anomalies.size() << " kinds";
  }
}

// Every gap is its own hole, where tshark sees it (tcp.analysis.lost_segment: the
// segment after bytes it never saw), as large as the bytes tshark never saw
// before it (its relative seq minus the highest end seen before in that
// direction). Each was filled by a resend: the filling segment's IP ID is newer
// than the one after the gap (Linux numbers a connection's packets in order).
// Issue 15: the first two gaps (frames 162, 171) were reported as one hole of
// 2708 bytes from frame 162, a range of which 1448..2708 had been captured.
TEST(IwarpCaptures, LossyCaptureReportsEachHoleAsTsharkSeesIt) {
  const CaptureRun r = run_capture("lab_siw_write_bw_loss.pcap");
  struct Gap { std::uint64_t frame; std::uint32_t bytes; long ip_id; };
  std::vector<Gap> gaps;
  std::map<std::uint64_t, long> ip_id;
  std::map<std::string, std::uint64_t> end;  // per source port: highest seq + len so far
  for (auto& row : tshark_rows("lab_siw_write_bw_loss")) {
    if (row["tcp.len"].empty() || row["tcp.len"] == "0") continue;
    const std::uint64_t fr = std::stoull(row["frame.number"]), seq = std::stoull(row["tcp.seq"]), len = std::stoull(row["tcp.len"]);
    ip_id[fr] = std::stol(row["ip.id"], nullptr, 16);
    if (row["tcp.analysis.lost_segment"] == "1")
      gaps.push_back({fr, std::uint32_t(seq - end[row["tcp.srcport"]]), ip_id[fr]});
    end[row["tcp.srcport"]] = std::max(end[row["tcp.srcport"]], seq + len);
  }
  ASSERT_EQ(gaps.size(), 3u);
  ASSERT_EQ(r.holes.size(), gaps.size());
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    SCOPED_TRACE(gaps[i].frame);
    EXPECT_EQ(r.holes[i].frame, gaps[i].frame);
    EXPECT_EQ(r.holes[i].count, gaps[i].bytes);
    ASSERT_EQ(r.holes[i].related_count, 1u);
    EXPECT_GT(std::int16_t(std::uint16_t(ip_id.at(r.holes[i].related[0]) - gaps[i].ip_id)), 0);  // sent after
    EXPECT_EQ(r.holes[i].expected_psn, std::int64_t(TcpGapFill::retransmission));
  }
  EXPECT_EQ(r.anomalies.size(), 1u);  // nothing else: the resends filled every hole
  // tshark (no out-of-order reassembly) misses the FPDUs right after each hole; we decode them all:
  // 60 RDMA Writes of 4096 bytes in 3 FPDUs each, and the Send exchanges.
  EXPECT_GE(r.fpdus, tshark_fpdus("lab_siw_write_bw_loss"));
  EXPECT_EQ(r.fpdus, 180u + 32u);
}

// Every segment we count as a resend of bytes already delivered is one tshark
// flags (tcp.analysis.retransmission / fast_retransmission), per direction; the
// other frames tshark flags are ones that filled a hole we report.
TEST(IwarpCaptures, TcpResendsAreTheOnesTsharkFlags) {
  for (const char* name : {"siw_write_lat", "siw_mpacrc_write_lat", "siw_read_bw", "lab_siw_send_lat", "lab_siw_read_lat",
                           "lab_siw_write_bw_loss"}) {
    SCOPED_TRACE(name);
    const CaptureRun r = run_capture(std::string(name) + ".pcap");
    std::map<std::pair<int, int>, std::uint64_t> flagged;
    for (auto& row : tshark_rows(name)) {
      if (row["tcp.len"].empty() || row["tcp.len"] == "0") continue;
      if (row["tcp.analysis.retransmission"].empty() && row["tcp.analysis.fast_retransmission"].empty()) continue;
      const std::pair<int, int> dir{std::stoi(row["tcp.srcport"]), std::stoi(row["tcp.dstport"])};
      const auto fill = r.hole_fills.find(std::stoull(row["frame.number"]));
      if (fill == r.hole_fills.end()) ++flagged[dir];
      else EXPECT_EQ(fill->second, dir);
    }
    for (const auto& [dir, n] : r.old_data_segments) EXPECT_EQ(n, flagged[dir]) << dir.first << " -> " << dir.second;
    for (const auto& [dir, n] : flagged) EXPECT_EQ(n, r.old_data_segments.count(dir) ? r.old_data_segments.at(dir) : 0u);
  }
}

// The first 20 frames of siw_mpacrc_write_lat.pcap cut at a snap length of 100
// (editcap -s 100): frames 14 and 15 lose the last 6 bytes of their Send FPDU
// (payload tail and CRC), not the 18-byte DDP/RDMAP header. Every FPDU tshark
// decodes in the uncut frames is decoded with the same opcode and MSN, the cut
// ones with an unverifiable CRC, and no MSN gap appears: the header check once
// took the largest header of any opcode (74 bytes) and lost these two Sends.
TEST(IwarpCaptures, SnapLengthCutAfterTheHeadersKeepsTheFpdu) {
  const CaptureRun r = run_capture("derived/siw_mpacrc_write_lat_snap100.pcap");
  std::uint64_t want = 0;
  for (auto& row : tshark_rows("siw_mpacrc_write_lat")) {
    const std::uint64_t fr = std::stoull(row["frame.number"]);
    if (fr > 20 || row["iwarp_rdma.opcode"].empty()) continue;
    SCOPED_TRACE(fr);
    ++want;
    ASSERT_EQ(r.by_frame.count(fr), 1u);
    ASSERT_EQ(r.by_frame.at(fr).size(), 1u);
    const IwarpPdu& u = r.by_frame.at(fr)[0];
    ASSERT_TRUE(u.header_decoded);
    EXPECT_EQ(u.seg.ddp.opcode(), std::stoul(row["iwarp_rdma.opcode"], nullptr, 16));
    EXPECT_EQ(u.seg.ddp.msn, std::stoul(row["iwarp_ddp.msn"]));
    EXPECT_EQ(u.crc_status, fr == 14 || fr == 15 ? MpaCrcStatus::unverifiable : MpaCrcStatus::ok);
  }
  EXPECT_EQ(want, 7u);  // tshark -Y iwarp_ddp_rdmap on the uncut 20 frames: 7 Sends
  EXPECT_EQ(r.fpdus, want);
  EXPECT_TRUE(r.anomalies.empty()) << r.anomalies.size() << " kinds";
}

// Snap lengths that cut the negotiation, FPDU lengths, DDP/RDMAP headers (a
// Read Request's 28 bytes) or payloads find nothing the whole capture lacks:
// only framing found again (iwarp_resync) where an FPDU's length was cut. Once
// seen: bad framing from a cut Request/Reply or FPDU length, MSN gaps after a
// cut header, unmatched Read Responses after a cut Read Request.
TEST(IwarpCaptures, SnapLengthCutsInventNoProblem) {
  for (const char* name : {"siw_write_lat.pcap", "siw_mpacrc_write_lat.pcap", "siw_read_bw.pcap", "lab_siw_send_lat.pcap",
                           "lab_siw_read_lat.pcap"}) {
    for (std::size_t snap : {70u, 84u, 86u, 100u, 113u, 118u, 130u}) {
      const CaptureRun r = run_capture(name, 0, snap);
      for (const auto& [kind, n] : r.anomalies)
        EXPECT_EQ(kind, AnomalyKind::iwarp_resync) << name << " -s " << snap << ": " << n;
    }
  }
}

// The capture cut to start mid-connection: every FPDU the full capture has after
// the first resync point of a direction is decoded, identically.
TEST(IwarpCaptures, MidConnectionCaptureResynchronises) {
  for (std::uint64_t skip : {83u, 120u, 150u}) {  // inside the perftest connection
    const CaptureRun full = run_capture("siw_mpacrc_write_lat.pcap");
    const CaptureRun cut = run_capture("siw_mpacrc_write_lat.pcap", skip);
    EXPECT_GE(cut.resyncs, 1u) << skip;
    std::map<std::uint32_t, std::uint64_t> first;  // flow -> first frame with a resync FPDU
    for (const auto& [fr, us] : cut.by_frame)
      for (const auto& u : us) {
        EXPECT_TRUE(u.resync);
        first.emplace(u.flow, fr);
      }
    ASSERT_FALSE(first.empty()) << skip;
    std::uint64_t compared = 0;
    for (const auto& [fr, us] : cut.by_frame) {
      ASSERT_TRUE(full.by_frame.count(fr)) << fr;
      const auto& want = full.by_frame.at(fr);
      ASSERT_EQ(us.size(), want.size()) << fr;
      for (std::size_t i = 0; i < us.size(); ++i) {
        EXPECT_EQ(us[i].seq, want[i].seq);
        EXPECT_EQ(us[i].seg.ddp.opcode(), want[i].seg.ddp.opcode());
        EXPECT_EQ(us[i].crc_status, MpaCrcStatus::ok);  // CRC use inferred from the bytes
        ++compared;
      }
    }
    // Nothing missed once every direction has resynchronised.
    std::uint64_t last_first = 0;
    for (const auto& [flow, f0] : first) last_first = std::max(last_first, f0);
    for (const auto& [fr, us] : full.by_frame)
      if (fr >= last_first) {
        ASSERT_TRUE(cut.by_frame.count(fr)) << "frame " << fr << " after skip " << skip;
        EXPECT_EQ(cut.by_frame.at(fr).size(), us.size());
      }
    EXPECT_GT(compared, 50u) << skip;
  }
}
