// Fuzz target: a sequence of frames through decode_frame and the Analyzer (the
// IB/RoCE transport analysis, the iWARP pass for TCP frames, the capture
// summary), then the reports `analyze` and the Wireshark plugin build from it.
// Input: [link type selector] then frames as [2-byte length][bytes]; a length
// with the top bit set says the frame was cut by the snap length (the wire
// length is 64 bytes longer). Frame timestamps advance by a fuzzed amount, and
// sometimes go backwards, as they do in merged captures. The pause analysis runs
// with a link speed (100 Gb/s, storms past 1 ms) so that its timed paths run too.
#include <cstdint>
#include <sstream>

#include "decode/analyzer.h"
#include "decode/packet.h"
#include "exporters/analysis_report.h"
#include "exporters/json_report.h"
#include "exporters/congestion_report.h"
#include "exporters/pfc_report.h"
#include "tests/fuzz/fuzz_input.h"

using namespace rdmadiag;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::InputCursor in(data, size);
  const std::uint32_t linktype = fuzz::pick_linktype(in.u8());
  decode::Analyzer analyzer;
  decode::PfcOptions pfc;
  pfc.link_bps = 100'000'000'000;
  pfc.storm_seconds = 0.001;
  analyzer.pfc().set_options(pfc);
  decode::DecodedPacket p;
  decode::PacketAnalysis a;
  std::ostringstream json_text;
  exporters::JsonReportWriter json(json_text, true);
  double ts = 1.7e9;
  std::uint64_t frame_no = 0;
  while (!in.empty() && frame_no < 4096) {
    const std::uint16_t len_field = in.be16();
    const std::uint8_t ts_step = in.u8();
    const decode::Bytes frame = in.take(len_field & 0x7fff);
    const auto caplen = static_cast<std::uint32_t>(frame.size());
    p = decode::DecodedPacket{};
    decode::decode_frame(linktype, frame, (len_field & 0x8000) ? caplen + 64 : caplen, {}, p);
    ts += ts_step == 0xff ? -0.5 : ts_step * 1e-6;
    analyzer.add(p, ++frame_no, ts, a);
    json.packet(p, a, frame_no, ts);
  }
  analyzer.finish();
  std::ostringstream text;
  exporters::write_flow_table(text, analyzer.transport());
  exporters::write_problems(text, analyzer.anomalies(), analyzer.transport());
  (void)exporters::flows_json(analyzer.transport()).dump();
  (void)exporters::anomalies_json(analyzer).dump();
  exporters::write_pfc_text(text, analyzer.pfc());
  (void)exporters::pfc_json(analyzer.pfc(), analyzer.summary().first_ts).dump();
  exporters::write_congestion_text(text, analyzer.congestion());
  (void)exporters::congestion_json(analyzer.congestion()).dump();
  return 0;
}
