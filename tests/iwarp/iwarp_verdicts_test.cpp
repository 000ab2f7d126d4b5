// Regressions for issue 15 class 5b: what the iWARP analysis says, and in which
// words. Byte fixtures written from the RFCs (stream_fixture.h); the expected
// outcome is what the fixture's bytes say (the size a Read Request asks for, the
// MSN each queue carries, the stride the markers were written at), never our
// own earlier output.
//  - RFC 5040 section 4.4 / 5.2.1: a Read Response answers the oldest Read
//    Request; its total length must be the request's RDMA Read Message Size.
//  - RFC 5041 section 5: MSNs are kept per untagged queue (QN 0 Send, 1 RDMA Read
//    Request, 2 Terminate), each starting at 1: equal MSNs on two queues are normal.
//  - RFC 5044 section 4.3: a marker every 512 octets; a sender using another
//    stride is one diagnostic for its direction, not a broken frame each time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exporters/analysis_report.h"
#include "stream_fixture.h"

using namespace iwarp_fixture;
using rdmadiag::exporters::explain;

namespace {

// RDMA Read Request (RFC 5040 section 4.4): untagged, QN 1, RDMAP opcode 1.
Buf read_request_ulpdu(std::uint32_t msn, std::uint32_t sink_stag, std::uint64_t sink_to, std::uint32_t size) {
  Buf u = {0x41, 0x41};
  be32(u, 0);
  be32(u, 1);  // QN 1
  be32(u, msn);
  be32(u, 0);  // MO
  be32(u, sink_stag);
  be64(u, sink_to);
  be32(u, size);
  be32(u, 0x77);     // data source STag
  be64(u, 0x9000);   // data source TO
  return u;
}

// RDMA Read Response segment (tagged, RDMAP opcode 2) placing `payload` bytes at sink STag/TO.
Buf read_response_ulpdu(std::uint32_t stag, std::uint64_t to, std::size_t payload, bool last) {
  Buf u = write_ulpdu(stag, to, payload, last);
  u[1] = 0x42;
  return u;
}

std::vector<std::string> texts(const Harness& h, AnomalyKind k) {
  std::vector<std::string> out;
  for (const Anomaly& a : h.an.anomalies().items())
    if (a.kind == k) out.push_back(explain(a, h.an));
  return out;
}

// No IB vocabulary, no sentinel in an iWARP sentence.
void expect_iwarp_words(const std::string& s) {
  for (const char* word : {"QP", "PSN", "RETH", "-1", "R_Key", "NAK"}) EXPECT_EQ(s.find(word), std::string::npos) << word << " in: " << s;
  EXPECT_EQ(s.rfind("iWARP ", 0), 0u) << s;
}

void send_all(Harness& h, const StreamWriter& w, int dir) {
  for (const auto& s : cut(w, dir, {1448})) h.send(s);
}

// A negotiated connection (CRC on) on which the initiator sent one Read Request; returns its frame.
std::uint64_t read_requested(Harness& h, StreamWriter& ini, StreamWriter& res, std::uint32_t size) {
  negotiate(h, ini, res, false, true);
  ini.fpdu(read_request_ulpdu(1, 0x100, 0x1000, size));
  send_all(h, ini, 0);
  return h.frame;
}

}  // namespace

TEST(IwarpVerdicts, ReadResponseShorterThanTheRequestIsAnIwarpAnomalyInIwarpWords) {
  Harness h;
  StreamWriter ini, res;
  const std::uint64_t request_frame = read_requested(h, ini, res, 4096);
  res.fpdu(read_response_ulpdu(0x100, 0x1000, 1000, false));
  res.fpdu(read_response_ulpdu(0x100, 0x1000 + 1000, 2000, true));  // 3000 of the 4096 bytes asked for
  send_all(h, res, 1);
  h.an.finish();
  ASSERT_EQ(h.anomalies(AnomalyKind::rdmap_read_size_mismatch), 1u);
  EXPECT_EQ(h.anomalies(AnomalyKind::payload_length_mismatch), 0u);  // an IB kind: was used, and mapped as an IB flow
  EXPECT_TRUE(is_iwarp_kind(AnomalyKind::rdmap_read_size_mismatch));
  EXPECT_EQ(h.an.anomalies().total(), 1u);
  const auto t = texts(h, AnomalyKind::rdmap_read_size_mismatch);
  ASSERT_EQ(t.size(), 1u);
  expect_iwarp_words(t[0]);
  EXPECT_NE(t[0].find("after 3000 bytes"), std::string::npos) << t[0];
  EXPECT_NE(t[0].find("asked for 4096"), std::string::npos) << t[0];
  EXPECT_NE(t[0].find("frame " + std::to_string(request_frame) + " "), std::string::npos) << t[0];
  // JSON: iWARP field names, the request's size, no IB fields.
  const auto j = rdmadiag::exporters::anomalies_json(h.an);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["kind"], "rdmap_read_size_mismatch");
  EXPECT_EQ(j[0]["read_size"], 4096);
  EXPECT_EQ(j[0]["count"], 3000);
  EXPECT_FALSE(j[0].contains("dest_qp"));
  EXPECT_FALSE(j[0].contains("psn"));
}

TEST(IwarpVerdicts, ReadResponseToAnotherStagAndUnmatchedResponseInIwarpWords) {
  Harness h;
  StreamWriter ini, res;
  read_requested(h, ini, res, 100);
  res.fpdu(read_response_ulpdu(0x200, 0x1000, 100, true));  // the wrong sink STag
  res.fpdu(read_response_ulpdu(0x100, 0x1000, 100, true));  // nothing outstanding any more
  send_all(h, res, 1);
  h.an.finish();
  ASSERT_EQ(h.anomalies(AnomalyKind::ddp_to_discontinuity), 1u);
  ASSERT_EQ(h.anomalies(AnomalyKind::rdmap_read_response_unmatched), 1u);
  EXPECT_EQ(h.anomalies(AnomalyKind::response_without_request), 0u);
  EXPECT_EQ(h.an.anomalies().total(), 2u);
  const auto to = texts(h, AnomalyKind::ddp_to_discontinuity);
  expect_iwarp_words(to[0]);
  EXPECT_NE(to[0].find("STag 0x00000200, not 0x00000100"), std::string::npos) << to[0];
  EXPECT_EQ(to[0].find("tagged offset"), std::string::npos) << to[0];  // the offset was right
  expect_iwarp_words(texts(h, AnomalyKind::rdmap_read_response_unmatched)[0]);
}

// Send (QN 0), RDMA Read Request (QN 1) and Terminate (QN 2) interleaved, each
// queue counting its own MSNs from 1: nothing is missing or repeated.
TEST(IwarpVerdicts, EqualMsnsOnDifferentQueuesAreNotAGap) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, false, false);
  for (std::uint32_t m = 1; m <= 5; ++m) {
    ini.fpdu(send_ulpdu(m, 20));
    ini.fpdu(read_request_ulpdu(m, 0x100 + m, 0x1000, 64));
  }
  send_all(h, ini, 0);
  for (std::uint32_t m = 1; m <= 5; ++m) res.fpdu(read_response_ulpdu(0x100 + m, 0x1000, 64, true));
  send_all(h, res, 1);
  h.an.finish();
  EXPECT_EQ(h.fpdus().size(), 15u);
  EXPECT_EQ(h.an.anomalies().total(), 0u);
  EXPECT_EQ(h.an.iwarp().stats().reads_matched, 5u);
}

// A real gap: MSN 3 of the Read Request queue never sent (the TCP stream is
// complete), while QN 0 runs on; and an MSN used twice on the Send queue.
TEST(IwarpVerdicts, MsnGapAndRepeatNameTheirQueue) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, false, false);
  ini.fpdu(send_ulpdu(1, 20));
  ini.fpdu(read_request_ulpdu(1, 0x101, 0x1000, 0));
  ini.fpdu(read_request_ulpdu(2, 0x102, 0x1000, 0));
  ini.fpdu(send_ulpdu(2, 20));
  ini.fpdu(read_request_ulpdu(4, 0x104, 0x1000, 0));  // MSN 3 skipped on QN 1
  ini.fpdu(send_ulpdu(3, 20));
  ini.fpdu(send_ulpdu(3, 20));                         // MSN 3 again on QN 0
  send_all(h, ini, 0);
  h.an.finish();
  ASSERT_EQ(h.anomalies(AnomalyKind::ddp_msn_gap), 2u);
  const auto t = texts(h, AnomalyKind::ddp_msn_gap);
  for (const auto& s : t) expect_iwarp_words(s);
  EXPECT_NE(t[0].find("queue 1 (RDMA Read Request) MSN 4"), std::string::npos) << t[0];
  EXPECT_NE(t[0].find("MSN 3 never sent"), std::string::npos) << t[0];
  EXPECT_EQ(t[0].find("repeated"), std::string::npos) << t[0];
  EXPECT_NE(t[1].find("queue 0 (Send) MSN 3"), std::string::npos) << t[1];
  EXPECT_NE(t[1].find("used again"), std::string::npos) << t[1];
  const auto j = rdmadiag::exporters::anomalies_json(h.an);
  EXPECT_EQ(j[0]["qn"], 1);
  EXPECT_EQ(j[0]["msn"], 4);
  EXPECT_EQ(j[0]["expected_msn"], 3);
}

// Markers every `stride` octets instead of 512: one mpa_marker_stride for the
// direction, no mpa_bad_framing, every FPDU decoded with a good CRC.
TEST(IwarpVerdicts, NonStandardMarkerStrideIsOneDiagnosticAndTheStreamDecodes) {
  for (std::uint32_t stride : {256u, 1024u, 2048u}) {
    Harness h;
    StreamWriter ini, res;
    negotiate(h, ini, res, true, true);
    ini.stride = stride;
    for (std::uint32_t m = 1; m <= 60; ++m) ini.fpdu(send_ulpdu(m, 90 + 13 * (m % 7)));
    for (const auto& s : cut(ini, 0, {1448, 700})) h.send(s);
    h.an.finish();
    EXPECT_EQ(h.anomalies(AnomalyKind::mpa_marker_stride), 1u) << stride;
    EXPECT_EQ(h.anomalies(AnomalyKind::mpa_bad_framing), 0u) << stride;
    EXPECT_EQ(h.an.anomalies().total(), 1u) << stride;
    const auto f = h.fpdus();
    ASSERT_EQ(f.size(), 60u) << stride;
    for (const auto& u : f) EXPECT_EQ(u.crc_status, MpaCrcStatus::ok) << stride;
    const auto t = texts(h, AnomalyKind::mpa_marker_stride);
    expect_iwarp_words(t[0]);
    EXPECT_NE(t[0].find("every " + std::to_string(stride) + " octets"), std::string::npos) << t[0];
    const auto j = rdmadiag::exporters::anomalies_json(h.an);
    EXPECT_EQ(j[0]["count"], stride);
  }
}

// The standard stride with one corrupted FPDU: the CRC error is reported as
// such, and the marker check does not invent a stride. Markers at sequence
// offsets 0, 512, 1024 from the first FPDU; FPDUs of 124 octets start at 4, 128,
// ..., 1000: byte 1050 is payload of the FPDU at 1000, byte 1000 its ULPDU length.
TEST(IwarpVerdicts, StandardStrideWithACorruptFpduIsNoStrideDiagnostic) {
  for (std::size_t corrupt : {1050u, 1000u}) {
    Harness h;
    StreamWriter ini, res;
    negotiate(h, ini, res, true, true);
    for (std::uint32_t m = 1; m <= 30; ++m) ini.fpdu(send_ulpdu(m, 100));
    ini.wire[corrupt] ^= 0x01;
    for (const auto& s : cut(ini, 0, {1448})) h.send(s);
    h.an.finish();
    EXPECT_EQ(h.anomalies(AnomalyKind::mpa_marker_stride), 0u) << corrupt;
    EXPECT_EQ(h.anomalies(AnomalyKind::mpa_crc_bad), 1u) << corrupt;
    if (corrupt == 1050) {
      EXPECT_EQ(h.an.anomalies().total(), 1u);
      EXPECT_EQ(h.fpdus().size(), 30u);
    }
  }
}

// Markers that follow no stride at all: said once, and nothing more about framing.
TEST(IwarpVerdicts, MarkersAtNoStrideAreOneDiagnostic) {
  Harness h;
  StreamWriter ini, res;
  negotiate(h, ini, res, true, true);
  ini.markers = false;
  for (std::uint32_t m = 1; m <= 200; ++m) {
    ini.fpdu(send_ulpdu(m, 100));
    if (m % 3 == 0) ini.raw({0, 0, 0, 9});  // a would-be marker in no place a stride puts one
  }
  for (const auto& s : cut(ini, 0, {1448})) h.send(s);
  h.an.finish();
  EXPECT_EQ(h.anomalies(AnomalyKind::mpa_marker_stride), 1u);
  EXPECT_EQ(h.anomalies(AnomalyKind::mpa_bad_framing), 0u);
  EXPECT_EQ(h.anomalies(AnomalyKind::iwarp_resync), 0u);
  const auto t = texts(h, AnomalyKind::mpa_marker_stride);
  EXPECT_NE(t[0].find("no stride found"), std::string::npos) << t[0];
}
