// What the plugin remembers about one frame between Wireshark's passes: the
// analysis results of the first, in-order pass (decode results are recomputed
// from the frame's bytes on every pass; they are stateless). Plain values, so
// the records can live in Wireshark's file-scoped memory.
#pragma once
#include <cstdint>

#include "decode/analyzer.h"
#include "decode/anomaly.h"
#include "decode/iwarp_analysis.h"

namespace rdmadiag::wireshark {

// One MPA unit (FPDU or MPA Request/Reply) that ended in the frame.
struct IwarpUnitRecord {
  decode::IwarpPdu::Kind kind = decode::IwarpPdu::Kind::fpdu;
  decode::MpaCrcStatus crc_status = decode::MpaCrcStatus::not_negotiated;
  bool header_decoded = false;
  bool tagged = false;
  bool last = false;
  bool resync = false;
  std::uint8_t rdmap_opcode = 0;
  std::uint16_t ulpdu_len = 0;
  std::uint32_t crc = 0, crc_computed = 0;
  std::uint32_t seq = 0;
  std::uint32_t stag = 0, msn = 0;
  std::uint64_t end_frame = 0;
  std::uint64_t request_frame = 0;
  double latency_us = -1;
};

struct FrameRecord {
  bool analysed = false;  // the IB/RoCE PSN analysis looked at it
  bool duplicate = false, out_of_order = false, retransmission = false, spurious_retransmission = false;
  bool ecn_ce = false, cnp = false;
  bool icrc_not_wire = false;  // a bad ICRC of a direction whose ICRCs are not the wire's
  std::uint32_t flow = UINT32_MAX;
  std::int64_t expected_psn = -1;
  std::uint32_t gap = 0;
  std::uint64_t request_frame = 0;
  double latency_us = -1;
  std::uint64_t nak_gap_frame = 0;
  // Congestion analysis (decode/congestion_analysis.h).
  double cnp_response_us = -1;
  std::uint64_t cnp_mark_frame = 0;
  decode::CcVerdict cc_verdict = decode::CcVerdict::none;
  std::uint64_t cc_cnp_frame = 0;
  std::uint8_t anomaly_count = 0;       // raised at this frame
  // Where they are in the analyzer's anomaly log (read at display time: later
  // frames add to them, e.g. the NAK and the resend that answer a gap).
  std::uint32_t first_anomaly = 0;
  std::uint8_t anomalies_logged = 0;    // how many of them the log kept (it is capped)
  std::uint8_t iwarp_count = 0;
  std::uint32_t iwarp_not_listed = 0;
  IwarpUnitRecord* iwarp = nullptr;      // iwarp_count entries

  // anomalies_logged: the iWARP analysis raises anomalies (a TCP hole) without counting them in anomaly_count.
  bool worth_keeping() const { return analysed || iwarp_count || iwarp_not_listed || anomaly_count || anomalies_logged; }
};

// Fills the plain fields of `r` from the analysis of one frame (not the arrays).
void fill_record(const decode::PacketAnalysis& a, FrameRecord& r);
void fill_iwarp_unit(const decode::IwarpPdu& u, IwarpUnitRecord& r);

}  // namespace rdmadiag::wireshark
