// Golden tests on the real captures in tests/pcaps/ (and derived/):
// - every ICRC/VCRC of real kernel traffic checks out;
// - a single flipped bit in a byte the ICRC covers makes exactly that frame bad,
//   while flipping a byte the spec masks out (TTL, TOS, UDP checksum, FECN/BECN)
//   changes nothing;
// - cutting frames at a snap length makes ICRCs unverifiable, never bad;
// - opcode, destination QP and PSN equal tshark's decode saved next to the
//   capture (X.tshark.tsv), so this cross-check runs even where tshark is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "decode/packet.h"

using namespace rdmadiag::decode;
namespace fs = std::filesystem;

namespace {

struct Frame {
  std::uint32_t linktype;
  std::uint32_t wirelen;
  std::vector<std::uint8_t> bytes;
};

std::vector<Frame> read_all(const fs::path& path) {
  rdmadiag::capture::FileReader r;
  EXPECT_TRUE(r.open(path.string())) << r.error();
  std::vector<Frame> out;
  rdmadiag::capture::Record rec;
  while (r.next(rec)) out.push_back(Frame{r.linktype(), rec.wirelen, {rec.data.begin(), rec.data.end()}});
  EXPECT_TRUE(r.stop_reason().empty()) << r.stop_reason();
  return out;
}

std::vector<fs::path> captures() {
  std::vector<fs::path> out;
  for (const auto& dir : {fs::path(RDMADIAG_PCAP_DIR), fs::path(RDMADIAG_PCAP_DIR) / "derived"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".pcap" && e.path().filename().string().find("corrupt") == std::string::npos)
        out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

DecodedPacket decode(const Frame& f, std::size_t caplen = SIZE_MAX) {
  DecodedPacket p;
  // derived/rxe_roce_v2_udp4792.pcap carries RoCEv2 on UDP 4792: name the port, as a
  // user would, so that a corrupted frame there is still RoCE (with a bad ICRC)
  // rather than falling out of the port heuristic.
  DecodeOptions opts;
  opts.add_roce_port(4792);
  decode_frame(f.linktype, Bytes(f.bytes.data(), std::min(caplen, f.bytes.size())), f.wirelen, opts, p);
  return p;
}

}  // namespace

TEST(Golden, EveryCrcOfRealTrafficIsOk) {
  std::size_t checked = 0;
  for (const auto& path : captures()) {
    SCOPED_TRACE(path.filename().string());
    const bool snap_cut = path.filename().string().find("snap") != std::string::npos;
    std::size_t frame = 0;
    for (const Frame& f : read_all(path)) {
      ++frame;
      const DecodedPacket p = decode(f);
      if (!p.has_bth) continue;
      ++checked;
      const bool cut = snap_cut && p.caplen < p.wirelen;  // an ERF record says so in its wlen
      EXPECT_EQ(p.icrc, cut ? CrcStatus::unverifiable : CrcStatus::ok) << "frame " << frame;
      if (p.vcrc != CrcStatus::not_present) {
        EXPECT_EQ(p.vcrc, cut ? CrcStatus::unverifiable : CrcStatus::ok) << "frame " << frame;
      }
    }
  }
  EXPECT_GT(checked, 4000u);
}

TEST(Golden, OneFlippedCoveredBitMakesExactlyThatFrameBad) {
  std::size_t flips = 0;
  for (const auto& path : captures()) {
    if (path.filename().string().find("snap") != std::string::npos) continue;
    SCOPED_TRACE(path.filename().string());
    auto frames = read_all(path);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const DecodedPacket before = decode(frames[i]);
      if (!before.has_bth || before.icrc != CrcStatus::ok) continue;
      // Covered bytes that steer no parsing: the BTH (but byte 4, masked, and the
      // opcode, which selects the headers) and everything after it up to the ICRC.
      const std::size_t bth = before.bth_offset;
      const std::size_t icrc_end = before.payload_offset + before.payload_len + before.ib.bth.pad_count + 4;
      for (std::size_t pos = bth + 1; pos < icrc_end; ++pos) {
        if (pos == bth + 4) continue;
        Frame f = frames[i];
        f.bytes[pos] ^= static_cast<std::uint8_t>(1u << (pos % 8));
        const DecodedPacket after = decode(f);
        ++flips;
        if (after.icrc != CrcStatus::bad) {
          ADD_FAILURE() << "frame " << i + 1 << " byte " << pos << ": ICRC " << to_string(after.icrc);
        }
        // The neighbours are untouched by construction (each frame decodes alone);
        // check one to be sure nothing is shared between decodes.
        if (i + 1 < frames.size()) {
          EXPECT_NE(decode(frames[i + 1]).icrc, CrcStatus::bad);
        }
      }
    }
  }
  EXPECT_GT(flips, 100000u);
}

TEST(Golden, MaskedFieldsDoNotChangeTheIcrc) {
  auto frames = read_all(fs::path(RDMADIAG_PCAP_DIR) / "rxe_write_bw_loss.pcap");
  std::size_t n = 0;
  for (Frame f : frames) {
    const DecodedPacket p = decode(f);
    if (!p.has_bth || !p.ipv4) continue;
    const std::size_t ip = p.bth_offset - 8 - p.ipv4->ihl_bytes;
    f.bytes[ip + 1] ^= 0xFC;            // DSCP
    f.bytes[ip + 1] ^= 0x03;            // ECN (a switch marking CE)
    f.bytes[ip + 8] -= 3;               // TTL after three hops
    f.bytes[ip + 10] ^= 0x5A;           // IP header checksum
    f.bytes[p.bth_offset - 2] ^= 0xFF;  // UDP checksum
    f.bytes[p.bth_offset + 4] ^= 0xC0;  // FECN, BECN
    EXPECT_EQ(decode(f).icrc, CrcStatus::ok);
    ++n;
  }
  EXPECT_GT(n, 900u);
}

TEST(Golden, SnapLengthCutsAreUnverifiableNeverBad) {
  for (const auto& path : captures()) {
    SCOPED_TRACE(path.filename().string());
    for (const Frame& f : read_all(path)) {
      const DecodedPacket whole = decode(f);
      if (!whole.has_bth || f.bytes.size() < f.wirelen) continue;
      // Where the ICRC ends: a frame may carry bytes after it (Ethernet padding).
      const std::size_t icrc_end = whole.payload_offset + whole.payload_len + whole.ib.bth.pad_count + 4;
      for (std::size_t snap : {64u, 96u, 128u, 200u}) {
        if (snap >= icrc_end) continue;
        const DecodedPacket cut = decode(f, snap);
        EXPECT_NE(cut.icrc, CrcStatus::bad);
        if (cut.has_bth) {
          EXPECT_EQ(cut.icrc, CrcStatus::unverifiable);
        }
      }
    }
  }
}

// Opcode, QP and PSN against tshark 4.0's decode saved beside each capture.
TEST(Golden, OpcodeQpPsnMatchSavedTsharkDecode) {
  std::size_t compared = 0;
  for (const auto& path : captures()) {
    fs::path tsv = path;
    tsv.replace_extension(".tshark.tsv");
    if (!fs::exists(tsv)) continue;
    SCOPED_TRACE(path.filename().string());
    std::ifstream in(tsv);
    std::string line;
    std::getline(in, line);
    std::vector<std::string> header;
    {
      std::stringstream ss(line);
      std::string h;
      while (std::getline(ss, h, '\t')) header.push_back(h);
    }
    auto col = [&](const std::string& name) {
      return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    };
    const std::size_t c_frame = col("frame.number"), c_op = col("infiniband.bth.opcode"),
                      c_qp = col("infiniband.bth.destqp"), c_psn = col("infiniband.bth.psn");
    if (c_psn >= header.size()) continue;  // an iWARP capture: no InfiniBand columns
    std::map<std::size_t, std::vector<std::string>> rows;
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string c;
      while (std::getline(ss, c, '\t')) cells.push_back(c);
      cells.resize(header.size());
      rows[std::stoul(cells[c_frame])] = cells;
    }
    const auto frames = read_all(path);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const DecodedPacket p = decode(frames[i]);
      const auto& r = rows[i + 1];
      const bool tshark_bth = !r.empty() && !r[c_op].empty();
      ASSERT_EQ(p.has_bth, tshark_bth) << "frame " << i + 1;
      if (!p.has_bth) continue;
      EXPECT_EQ(p.ib.bth.opcode, std::stoul(r[c_op])) << "frame " << i + 1;
      EXPECT_EQ(p.ib.bth.dest_qp, std::stoul(r[c_qp], nullptr, 16)) << "frame " << i + 1;
      EXPECT_EQ(p.ib.bth.psn, std::stoul(r[c_psn])) << "frame " << i + 1;
      ++compared;
    }
  }
  EXPECT_GT(compared, 2500u);
}
