// MPA connection setup as pure steps (decode/mpa.h), one rule at a time, from
// RFC 5044 section 7.1: the first bytes of a direction's stream, and what the
// Reply settles (CRC if either side set C; Markers towards each side that set M;
// R rejects).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/mpa.h"

using namespace rdmadiag::decode;

namespace {
std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }
MpaNegotiation frame(MpaFrameType t, bool m, bool c, bool r = false) {
  MpaNegotiation n;
  n.type = t;
  n.marker = m;
  n.crc = c;
  n.reject = r;
  return n;
}
}  // namespace

TEST(MpaSetup, StreamStartFromTheSyn) {
  const auto req = bytes(kMpaRequestKey), rep = bytes(kMpaReplyKey);
  EXPECT_EQ(mpa_classify_start(Bytes(req), true), MpaStreamStart::negotiation);
  EXPECT_EQ(mpa_classify_start(Bytes(rep), true), MpaStreamStart::negotiation);
  EXPECT_EQ(mpa_classify_start(Bytes(req.data(), 5), true), MpaStreamStart::need_more);  // "MPA I": may become a key
  EXPECT_EQ(mpa_classify_start(Bytes(), true), MpaStreamStart::need_more);
  const auto http = bytes("GET / HTTP/1.1\r\n");
  EXPECT_EQ(mpa_classify_start(Bytes(http), true), MpaStreamStart::not_mpa);
  EXPECT_EQ(mpa_classify_start(Bytes(http.data(), 3), true), MpaStreamStart::not_mpa);  // cannot become a key
}

TEST(MpaSetup, StreamStartMidConnection) {
  const std::vector<std::uint8_t> fpdu = {0x00, 0x20, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_EQ(mpa_classify_start(Bytes(fpdu), false), MpaStreamStart::hunt);
  EXPECT_EQ(mpa_classify_start(Bytes(fpdu.data(), 4), false), MpaStreamStart::need_more);
  EXPECT_EQ(mpa_classify_start(Bytes(bytes(kMpaRequestKey)), false), MpaStreamStart::negotiation);
}

TEST(MpaSetup, ReplySettlesCrcAndMarkersPerDirection) {
  for (int bits = 0; bits < 16; ++bits) {
    const bool req_m = bits & 1, req_c = bits & 2, rep_m = bits & 4, rep_c = bits & 8;
    const MpaNegotiation req = frame(MpaFrameType::request, req_m, req_c), rep = frame(MpaFrameType::reply, rep_m, rep_c);
    const MpaSettlement s = mpa_settle(&req, rep);
    SCOPED_TRACE(bits);
    EXPECT_FALSE(s.rejected);
    EXPECT_EQ(s.crc, req_c || rep_c);
    EXPECT_EQ(s.markers_from_responder, req_m);  // the initiator asked to receive markers
    EXPECT_EQ(s.markers_from_initiator, rep_m);
  }
}

TEST(MpaSetup, RejectAndMissingRequest) {
  const MpaNegotiation req = frame(MpaFrameType::request, true, true);
  const MpaSettlement rejected = mpa_settle(&req, frame(MpaFrameType::reply, true, true, true));
  EXPECT_TRUE(rejected.rejected);
  EXPECT_FALSE(rejected.crc);
  const MpaSettlement no_request = mpa_settle(nullptr, frame(MpaFrameType::reply, true, false));
  EXPECT_FALSE(no_request.crc);
  EXPECT_FALSE(no_request.markers_from_responder);
  EXPECT_TRUE(no_request.markers_from_initiator);
}
