// Fuzz target: the Wireshark plugin's glue, through the library it calls, in
// the order Wireshark calls it: a first, in-order pass that analyses each frame
// and keeps a record of it (PluginSession::analyse, fill_iwarp_unit), the end
// of that pass (finish: pairing), then display passes that decode each frame
// again and read the records back: the anomalies a record points into in the
// capped log, those shown at each frame (anomalies_at), their text, peer QPs,
// response links, and every header span the tree would show clipped to the
// captured bytes. Everything but the epan calls of dissector/packet-rdmadiag.cpp.
// Input: [link type selector][preference bits][PMTU selector] then frames as
// [2-byte length (bit 15: cut by snap length)][ts step][bytes], as in the
// analyzer target (fuzz_input.h).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "decode/packet.h"
#include "dissector/frame_records.h"
#include "dissector/plugin_session.h"
#include "tests/fuzz/fuzz_input.h"

using namespace rdmadiag;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

// What the tree builder asks of a header: its bytes, clipped to what was captured.
void check_clip(std::uint32_t captured, std::uint32_t off, std::uint32_t len) {
  const std::uint32_t n = wireshark::clip_to_captured(captured, off, len);
  require(n <= len);
  require(n == 0 || (off < captured && n <= captured - off));
}

struct Frame {
  decode::Bytes bytes;
  std::uint32_t wire_len;
  double ts;
};

// The frames: [2-byte length (bit 15: cut by snap length)][ts step][bytes], at most 2048.
std::vector<Frame> read_frames(fuzz::InputCursor& in) {
  std::vector<Frame> frames;
  double ts = 1.7e9;
  while (!in.empty() && frames.size() < 2048) {
    const std::uint16_t len_field = in.be16();
    const std::uint8_t ts_step = in.u8();
    const decode::Bytes bytes = in.take(len_field & 0x7fff);
    const auto caplen = static_cast<std::uint32_t>(bytes.size());
    ts += ts_step == 0xff ? -0.5 : ts_step * 1e-6;
    frames.push_back({bytes, (len_field & 0x8000) ? caplen + 64 : caplen, ts});
  }
  return frames;
}

// The CRCs, BTH and diagnostics the tree shows: their bytes within the captured ones.
void check_header_spans(const decode::DecodedPacket& p, std::uint32_t captured) {
  if (p.icrc == decode::CrcStatus::ok || p.icrc == decode::CrcStatus::bad) {
    require(p.icrc_offset <= captured && captured - p.icrc_offset >= 4);  // the plugin shows the ICRC's bytes
    check_clip(captured, p.icrc_offset, 4);
  }
  if (p.vcrc == decode::CrcStatus::ok || p.vcrc == decode::CrcStatus::bad)
    require(p.icrc_offset + 6 <= captured);
  if (p.has_bth) {
    require(p.opcode() != nullptr);
    check_clip(captured, p.bth_offset, p.ib.header_len);
    for (std::uint32_t off = p.bth_offset; off < p.bth_offset + p.ib.header_len + 4; ++off) check_clip(captured, off, 8);
  }
  for (const decode::Diagnostic& d : p.diags) check_clip(captured, d.offset, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::InputCursor in(data, size);
  const std::uint32_t linktype = fuzz::pick_linktype(in.u8());
  const std::uint8_t prefs = in.u8();
  static constexpr unsigned kPmtus[] = {0, 256, 512, 1024, 2048, 4096, 100, 5000};
  decode::DecodeOptions options;
  options.roce_heuristic = prefs & 1;
  if (prefs & 2) (void)options.add_roce_port(static_cast<std::uint16_t>(4791 + (prefs >> 4)));
  wireshark::PluginSession session(options, kPmtus[in.u8() % 8]);

  const std::vector<Frame> frames = read_frames(in);

  // First pass (Wireshark: !pinfo->fd->visited), frame numbers from 1.
  std::vector<wireshark::FrameRecord> records(frames.size() + 1);
  std::vector<std::vector<wireshark::IwarpUnitRecord>> units(frames.size() + 1);
  std::vector<bool> kept(frames.size() + 1, false);
  decode::DecodedPacket p;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::uint64_t no = i + 1;
    decode::decode_frame(linktype, frames[i].bytes, frames[i].wire_len, session.options(), p);
    if (!session.analyse(p, no, frames[i].ts, decode::Analyzer::kNoNs, records[no])) continue;
    kept[no] = true;
    const decode::IwarpFrame& u = session.last_units();
    require(u.size == records[no].iwarp_count);
    for (std::size_t k = 0; k < u.size; ++k) {
      units[no].emplace_back();
      wireshark::fill_iwarp_unit(u.items[k], units[no].back());
    }
  }
  // A frame seen again in the first pass is not analysed twice.
  if (!frames.empty()) {
    wireshark::FrameRecord again;
    require(!session.analyse(p, 1, frames[0].ts, decode::Analyzer::kNoNs, again));
  }
  session.finish();

  // Display passes: decode again, read the records back.
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::uint64_t no = i + 1;
    decode::decode_frame(linktype, frames[i].bytes, frames[i].wire_len, session.options(), p);
    check_header_spans(p, static_cast<std::uint32_t>(frames[i].bytes.size()));
    if (const auto* link = session.response_of(no)) require(link->response_frame > no && link->response_frame <= frames.size());
    // What the display passes show as this frame's anomalies: listed ones, naming it.
    for (const std::uint32_t k : session.anomalies_at(no)) {
      const decode::Anomaly& a = session.anomaly(k);
      require(!a.retracted && !wireshark::is_crc_anomaly(a.kind));
      require(a.frame == no || (a.kind == decode::AnomalyKind::cc_no_reaction && a.related[0] == no));
      (void)session.anomaly_text(a);
    }
    if (!kept[no]) continue;
    const wireshark::FrameRecord& r = records[no];
    const auto found = session.anomalies_of(r);
    require(found.size() <= r.anomalies_logged);
    for (const decode::Anomaly& a : found) {
      require(a.frame <= frames.size());
      if (!wireshark::is_crc_anomaly(a.kind)) (void)session.anomaly_text(a);
    }
    if (r.analysed) (void)session.peer_qp(r.flow);
    if (r.request_frame) require(r.request_frame < no);
    for (const wireshark::IwarpUnitRecord& u : units[no]) require(u.end_frame <= frames.size());
  }
  return 0;
}
