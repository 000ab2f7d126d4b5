#include "dissector/frame_records.h"

namespace rdmadiag::wireshark {

void fill_record(const decode::PacketAnalysis& a, FrameRecord& r) {
  r.analysed = a.analysed;
  r.flow = a.flow;
  r.expected_psn = a.expected_psn;
  r.gap = a.gap;
  r.duplicate = a.duplicate;
  r.out_of_order = a.out_of_order;
  r.retransmission = a.retransmission;
  r.spurious_retransmission = a.spurious_retransmission;
  r.request_frame = a.request_frame;
  r.latency_us = a.latency_us;
  r.nak_gap_frame = a.nak_gap_frame;
  r.ecn_ce = a.ecn_ce;
  r.cnp = a.cnp;
  r.icrc_not_wire = a.icrc_not_wire;
  r.cnp_response_us = a.cnp_response_us;
  r.cnp_mark_frame = a.cnp_mark_frame;
  r.cc_verdict = a.cc_verdict;
  r.cc_cnp_frame = a.cc_cnp_frame;
  r.anomaly_count = a.anomaly_count;
  r.iwarp_not_listed = a.iwarp.overflow;
  r.iwarp_count = a.iwarp.size;  // the units themselves are copied by the caller
}

void fill_iwarp_unit(const decode::IwarpPdu& u, IwarpUnitRecord& r) {
  r.kind = u.kind;
  r.crc_status = u.crc_status;
  r.header_decoded = u.header_decoded;
  r.tagged = u.seg.ddp.tagged;
  r.last = u.seg.ddp.last;
  r.resync = u.resync;
  r.rdmap_opcode = u.seg.ddp.opcode();
  r.ulpdu_len = u.ulpdu_len;
  r.crc = u.crc;
  r.crc_computed = u.crc_computed;
  r.seq = u.seq;
  r.stag = u.seg.ddp.stag;
  r.msn = u.seg.ddp.msn;
  r.end_frame = u.end_frame;
  r.request_frame = u.request_frame;
  r.latency_us = u.latency_us;
}

}  // namespace rdmadiag::wireshark
