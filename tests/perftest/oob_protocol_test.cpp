#include "perftest/oob_protocol.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>

using namespace rdmadiag::perftest::oob;

namespace {
std::span<const char> bytes_of(const std::string& s) { return {s.data(), s.size()}; }

// Fixtures: the exact TCP payloads of Debian 12's perftest 4.5 (announcing 6.06) in
// /work/shared/pcaps/rxe_write_lat and rxe_read_lat (frames 10, 14, 16, 18, 21, 22 / 20).
const std::string kVersion606("6.06\0\0\0\0\0\0\0\0\0\0\0\0", 16);
const std::string kPageSize("\x00\x00\x10\x00", 4);
const std::string kCacheLine("\x00\x00\x00\x40", 4);
const std::string kMtu1024("3\0", 2);
const std::string kWriteLatClientKey(
    "0000:0001:000011:0a1f81:000002c2:000055a47feba000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\0",
    108);
const std::string kWriteLatServerKey(
    "0000:0001:000011:dc4d2e:000002c9:00005639ef7f6000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:00000000:\0",
    108);
const std::string kReadLatClientKey(
    "0000:0080:000011:990bbd:00000254:00005569decd5000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\0",
    108);
// rxe_write_bw_loss frames 968-976: the client's bw report fields.
const std::string kBwReportFields[5] = {
    std::string("\x00\x00\x00\x00\x00\x00\x10\x00", 8), std::string("\x00\x00\x00\x00\x00\x00\x00\x3c", 8),
    std::string("\x3f\xfb\x1e\xe6\xcf\xd5\x87\xe9", 8), std::string("\x3f\xfb\x0a\x37\xfd\x98\x37\xbe", 8),
    std::string("\x3f\x3c\x5a\x78\xef\xd4\x73\x45", 8)};
}  // namespace

TEST(OobVersion, ParsesCapturedPerftest) {
  const auto v = parse_version(bytes_of(kVersion606));
  EXPECT_EQ(v.text, "6.06");
  EXPECT_DOUBLE_EQ(v.number, 6.06);
  EXPECT_FALSE(v.is_rdmadiag);
}

TEST(OobVersion, OurAnnouncementLooksLikePerftestAndCarriesMarker) {
  const auto ours = encode_version(kAnnouncedVersion, true);
  EXPECT_EQ(std::string(ours.data()), "6.06");  // what perftest's atof sees
  const auto v = parse_version(ours);
  EXPECT_TRUE(v.is_rdmadiag);
  const auto plain = encode_version("6.29", false);
  EXPECT_EQ(std::string(plain.data(), 16), std::string("6.29\0\0\0\0\0\0\0\0\0\0\0\0", 16));
}

TEST(OobVersion, RejectsNonPerftestPeers) {
  EXPECT_THROW(parse_version(bytes_of(std::string("GET / HTTP/1.1\r\n", 16))), ProtocolError);
  EXPECT_THROW(parse_version(bytes_of(std::string(16, '\0'))), ProtocolError);
  EXPECT_THROW(parse_version(bytes_of(std::string("SSH-2.0-OpenSSH_"))), ProtocolError);
  EXPECT_THROW(parse_version(bytes_of("6.06")), ProtocolError);  // truncated
  try {
    parse_version(bytes_of(std::string("\xff\xfe\x01garbage.......", 16)));
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("\\xff\\xfe\\x01"), std::string::npos) << e.what();
  }
}

TEST(OobSysData, ParsesCapturedValues) {
  EXPECT_EQ(parse_be32(bytes_of(kPageSize)), 4096u);
  EXPECT_EQ(parse_be32(bytes_of(kCacheLine)), 64u);
  EXPECT_EQ(encode_be32(4096), (std::array<char, 4>{0, 0, 0x10, 0}));
  EXPECT_THROW(parse_be32(bytes_of("ab")), ProtocolError);
}

TEST(OobMtu, ParsesCapturedValueAndRejectsJunk) {
  EXPECT_EQ(parse_mtu(bytes_of(kMtu1024)), 3);
  const auto enc = encode_mtu(3);
  EXPECT_EQ(std::string(enc.data(), 2), kMtu1024);
  EXPECT_THROW(parse_mtu(bytes_of(std::string("9\0", 2))), ProtocolError);
  EXPECT_THROW(parse_mtu(bytes_of("33")), ProtocolError);
  EXPECT_THROW(parse_mtu(bytes_of(std::string("3\0\0\0", 4))), ProtocolError);
}

TEST(OobKeyMessage, ParsesCapturedWriteLatKeys) {
  const auto c = parse_key_message(bytes_of(kWriteLatClientKey), true);
  EXPECT_EQ(c.lid, 0u);
  EXPECT_EQ(c.out_reads, 1u);
  EXPECT_EQ(c.qpn, 0x11u);
  EXPECT_EQ(c.psn, 0x0a1f81u);
  EXPECT_EQ(c.rkey, 0x2c2u);
  EXPECT_EQ(c.vaddr, 0x55a47feba000ull);
  ASSERT_TRUE(c.gid.has_value());
  const std::array<std::uint8_t, 16> gid_client{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
  EXPECT_EQ(*c.gid, gid_client);
  EXPECT_EQ(c.srqn, 0u);
  const auto s = parse_key_message(bytes_of(kWriteLatServerKey), true);
  EXPECT_EQ(s.psn, 0xdc4d2eu);
  EXPECT_EQ(s.rkey, 0x2c9u);
  EXPECT_EQ(s.vaddr, 0x5639ef7f6000ull);
  EXPECT_EQ((*s.gid)[15], 1);
  const auto r = parse_key_message(bytes_of(kReadLatClientKey), true);
  EXPECT_EQ(r.out_reads, 0x80u);  // READ tests announce the device's max outstanding reads
}

TEST(OobKeyMessage, EncodesByteForByteLikePerftest) {
  const auto c = parse_key_message(bytes_of(kWriteLatClientKey), true);
  const auto enc = encode_key_message(c);
  EXPECT_EQ(std::string(enc.begin(), enc.end()), kWriteLatClientKey);
}

TEST(OobKeyMessage, WithoutGidForm) {
  KeyMessage k{0x12, 1, 0x345, 0xabcdef, 0x1000, 0x7f0000001000ull, std::nullopt, 0};
  const auto enc = encode_key_message(k);
  ASSERT_EQ(enc.size(), kKeyMessageSizeWithoutGid);
  EXPECT_EQ(std::string(enc.data()), "0012:0001:000345:abcdef:00001000:00007f0000001000:00000000");
  EXPECT_EQ(parse_key_message(enc, false), k);
}

TEST(OobKeyMessage, TruncatedOrWrongFormExplainsItself) {
  const std::string truncated = kWriteLatClientKey.substr(0, 60);
  EXPECT_THROW(parse_key_message(bytes_of(truncated), true), ProtocolError);
  try {
    parse_key_message(bytes_of(std::string(59, '0')), true);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("without GID"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_key_message(bytes_of(kWriteLatClientKey), false), ProtocolError);
}

TEST(OobKeyMessage, MalformedFieldsAreRejectedWithPosition) {
  std::string bad = kWriteLatClientKey;
  bad[12] = 'g';  // inside the QPN
  try {
    parse_key_message(bytes_of(bad), true);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("QPN"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte 12"), std::string::npos) << e.what();
  }
  std::string no_colon = kWriteLatClientKey;
  no_colon[4] = '-';
  EXPECT_THROW(parse_key_message(bytes_of(no_colon), true), ProtocolError);
  std::string no_nul = kWriteLatClientKey;
  no_nul[107] = 'x';
  EXPECT_THROW(parse_key_message(bytes_of(no_nul), true), ProtocolError);
}

TEST(OobKeyMessage, HostileBytesNeverCrash) {
  // Every single-byte corruption of a valid message either parses or throws ProtocolError.
  for (std::size_t pos = 0; pos < kWriteLatClientKey.size(); ++pos) {
    for (int value : {0, int{':'}, int{'Z'}, 0x80, 0xff, int{'%'}, int{'\n'}}) {
      std::string m = kWriteLatClientKey;
      m[pos] = static_cast<char>(value);
      try {
        (void)parse_key_message(bytes_of(m), true);
      } catch (const ProtocolError&) {
      }
    }
  }
  std::string all_colons(108, ':');
  EXPECT_THROW(parse_key_message(bytes_of(all_colons), true), ProtocolError);
  std::string all_ff(108, '\xff');
  EXPECT_THROW(parse_key_message(bytes_of(all_ff), true), ProtocolError);
}

TEST(OobBwReport, ParsesCapturedClientReport) {
  std::array<std::array<char, 8>, 5> fields{};
  for (int i = 0; i < 5; ++i) std::memcpy(fields[static_cast<std::size_t>(i)].data(), kBwReportFields[i].data(), 8);
  const auto r = parse_bw_report(fields);
  EXPECT_EQ(r.size, 4096u);
  EXPECT_EQ(r.iterations, 60u);
  // The server printed "1.70  1.69  0.000433" for these.
  EXPECT_NEAR(r.bw_peak_mb_per_sec, 1.70, 0.005);
  EXPECT_NEAR(r.bw_avg_mb_per_sec, 1.69, 0.005);
  EXPECT_NEAR(r.msg_rate_mpps, 0.000433, 0.0000005);
  EXPECT_EQ(encode_bw_report(r), fields);
}

TEST(OobOptions, RoundTripAndMismatchReport) {
  const std::vector<std::pair<std::string, std::string>> local{{"test", "write-lat"}, {"size", "2"}, {"iters", "1000"}};
  const std::vector<std::pair<std::string, std::string>> remote{{"test", "read-lat"}, {"size", "2"}, {"iters", "1000"}};
  const auto enc = encode_options(local);
  EXPECT_EQ(parse_options(enc), local);
  const auto diffs = compare_options(local, remote);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0], "test: local write-lat, remote read-lat");
  std::array<char, kOptionsMessageSize> unterminated;
  unterminated.fill('a');
  EXPECT_THROW(parse_options(unterminated), ProtocolError);
  const std::string short_message(10, 'a');
  EXPECT_THROW(parse_options(bytes_of(short_message)), ProtocolError);
  auto no_equals = encode_options({{"x", "1"}});
  no_equals[1] = ':';
  EXPECT_THROW(parse_options(no_equals), ProtocolError);
}

TEST(OobNegotiation, LayoutAndComparison) {
  NegotiationBlock b;
  b.verb = 2;
  b.size = 2;
  b.iters = 1000;
  b.device_attr.assign(kDeviceAttrSize, 0);
  const auto with = encode_negotiation(b, true);
  const auto without = encode_negotiation(b, false);
  EXPECT_EQ(with.size(), 320u);
  EXPECT_EQ(without.size(), 312u);
  EXPECT_EQ(std::string(with.data() + 8, 4), std::string("\0\0\0\x02", 4));  // verb at offset 8
  EXPECT_EQ(std::string(with.data() + 32, 8), std::string("\0\0\0\0\0\0\0\x02", 8));
  const auto back = parse_negotiation(with);
  EXPECT_EQ(back.verb, 2);
  EXPECT_EQ(back.iters, 1000u);
  NegotiationBlock other = b;
  other.verb = 4;
  const auto diffs = compare_negotiation(b, other);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0], "verb mismatch: local=WRITE, remote=READ");
  EXPECT_THROW(parse_negotiation(std::span<const char>(with.data(), 100)), ProtocolError);
}

namespace {
std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}
// -R: the SEND payload of Debian 12's `ib_write_lat -R` (perftest 4.5, client 10.77.0.2) on the
// rdma_cm exchange QP, from a lab capture (tests/lab/run --mode rxe, RoCE v2 SEND ONLY, read with
// tshark's data.data): struct pingpong_dest in network byte order, 56 bytes, gid_index 1 at the end.
const std::string kCmWriteLatClientKey = from_hex(
    "00000000000000010000001200829997000003a200000000000055838c7bc000"
    "00000000000000000000ffff0a4d00020000000000000001");
}  // namespace

TEST(OobCmKeyMessage, ParsesCapturedPerftestKey) {
  ASSERT_EQ(kCmWriteLatClientKey.size(), kCmKeyMessageSize);
  const auto k = parse_cm_key_message(bytes_of(kCmWriteLatClientKey));
  EXPECT_EQ(k.lid, 0u);
  EXPECT_EQ(k.out_reads, 1u);
  EXPECT_EQ(k.qpn, 0x12u);
  EXPECT_EQ(k.psn, 0x829997u);
  EXPECT_EQ(k.rkey, 0x3a2u);
  EXPECT_EQ(k.vaddr, 0x55838c7bc000ull);
  ASSERT_TRUE(k.gid);
  const std::array<std::uint8_t, 16> gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
  EXPECT_EQ(*k.gid, gid);
  EXPECT_EQ(k.srqn, 0u);
}

TEST(OobCmKeyMessage, EncodesLikePerftestExceptTheUnreadGidIndex) {
  const auto k = parse_cm_key_message(bytes_of(kCmWriteLatClientKey));
  const auto mine = encode_cm_key_message(k, false);
  ASSERT_EQ(mine.size(), kCmKeyMessageSize);
  // perftest puts its gid_index (1) in the last 4 bytes; no receiver reads it, we send 0.
  EXPECT_EQ(std::string(mine.data(), 52), kCmWriteLatClientKey.substr(0, 52));
  EXPECT_EQ(std::string(mine.data() + 52, 4), std::string(4, '\0'));
}

TEST(OobCmKeyMessage, UpstreamTailMarkersFormKeepsTheSameFields) {
  const auto k = parse_cm_key_message(bytes_of(kCmWriteLatClientKey));
  const auto wide = encode_cm_key_message(k, true);
  ASSERT_EQ(wide.size(), kCmKeyMessageSizeWithTailMarkers);
  // vaddr and rkey keep their offsets (24, 16); the GID moves from 32 to 40.
  EXPECT_EQ(std::string(wide.data(), 32), kCmWriteLatClientKey.substr(0, 32));
  EXPECT_EQ(std::string(wide.data() + 40, 16), kCmWriteLatClientKey.substr(32, 16));
  EXPECT_EQ(parse_cm_key_message({wide.data(), wide.size()}), k);
}

TEST(OobCmKeyMessage, OtherSizesAreRejectedWithAnExplanation) {
  for (std::size_t n : {0u, 4u, 16u, 55u, 57u, 63u, 65u, 108u}) {
    const std::string bytes(n, 'x');
    try {
      parse_cm_key_message(bytes_of(bytes));
      ADD_FAILURE() << n << " bytes accepted";
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find("rdma_cm key message of " + std::to_string(n) + " bytes"), std::string::npos);
    }
  }
}
