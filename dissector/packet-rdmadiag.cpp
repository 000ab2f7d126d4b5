// rdmadiag as a Wireshark 4.0 epan plugin: a postdissector that runs beside the
// built-in InfiniBand / RoCE / iWARP dissectors and adds an `rdmadiag` tree with
// what `rdmadiag analyze` concludes: ICRC / VCRC / MPA CRC verdicts, PSN
// sequencing, request/response links and latency, congestion signals, and the
// headers Wireshark 4.0 leaves raw or misparses (FECN/BECN, CNP, XRCETH, RD).
//
// No protocol logic lives here: each frame's bytes are decoded by rdmadiag's
// decode library and fed, on Wireshark's first in-order pass, to its Analyzer;
// the per-frame results are kept (file scope) and shown on every later pass.
//
// Wireshark's exceptions are longjmp()s: the code that calls into Wireshark keeps
// no live object with a non-trivial destructor, and every tvb offset it passes
// comes from the decoder, which never goes past the captured bytes.
#include <epan/expert.h>
#include <epan/packet.h>
#include <epan/prefs.h>
#include <epan/proto.h>
#include <wiretap/wtap.h>
#include <ws_version.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "decode/analyzer.h"
#include "decode/erf.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"
#include "dissector/frame_records.h"
#include "dissector/plugin_session.h"
#include "exporters/analysis_report.h"
#include "exporters/iwarp_json.h"

#ifndef RDMADIAG_PLUGIN_VERSION
#define RDMADIAG_PLUGIN_VERSION "0.0.0"
#endif

// What Wireshark's plugin loader looks up (C names, exported).
extern "C" {
WS_DLL_PUBLIC const gchar plugin_version[];
WS_DLL_PUBLIC const int plugin_want_major;
WS_DLL_PUBLIC const int plugin_want_minor;
WS_DLL_PUBLIC void plugin_register(void);
}
const gchar plugin_version[] = RDMADIAG_PLUGIN_VERSION;
const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
const int plugin_want_minor = WIRESHARK_VERSION_MINOR;

namespace {

using namespace rdmadiag;
using decode::AnomalyKind;
using decode::CrcStatus;
using decode::MpaCrcStatus;
using wireshark::FrameRecord;
using wireshark::IwarpUnitRecord;

int proto_rdmadiag = -1;

// Fields. Booleans (BTH bits too) are added only when true, so `rdmadiag.psn.gap` style filters select the frames.
int hf_transport = -1;
int hf_icrc = -1, hf_icrc_status = -1, hf_icrc_computed = -1, hf_icrc_not_wire = -1;
int hf_vcrc = -1, hf_vcrc_status = -1, hf_vcrc_computed = -1;
int hf_mpa_crc = -1, hf_mpa_crc_status = -1, hf_mpa_crc_computed = -1;
int hf_bth_opcode = -1, hf_bth_opcode_name = -1, hf_bth_service = -1, hf_bth_se = -1, hf_bth_migreq = -1,
    hf_bth_pad = -1, hf_bth_tver = -1, hf_bth_pkey = -1, hf_bth_fecn = -1, hf_bth_becn = -1, hf_bth_dest_qp = -1,
    hf_bth_ackreq = -1, hf_bth_psn = -1;
int hf_rdeth_eecnxt = -1, hf_deth_qkey = -1, hf_deth_src_qp = -1, hf_xrceth_srq = -1;
int hf_reth_va = -1, hf_reth_rkey = -1, hf_reth_len = -1;
int hf_aeth_kind = -1, hf_aeth_syndrome = -1, hf_aeth_msn = -1;
int hf_cnp = -1, hf_ecn_ce = -1;
int hf_pfc_opcode = -1, hf_pfc_priority = -1, hf_pfc_quanta = -1, hf_pfc_xon = -1;
int hf_cc_response = -1, hf_cc_mark_frame = -1, hf_cc_verdict = -1, hf_cc_cnp_frame = -1;
int hf_flow = -1, hf_peer_qp = -1, hf_psn_expected = -1, hf_psn_gap = -1, hf_psn_duplicate = -1,
    hf_psn_out_of_order = -1, hf_retransmission = -1, hf_spurious = -1, hf_nak_gap_frame = -1,
    hf_request_frame = -1, hf_response_frame = -1, hf_latency = -1, hf_anomalies = -1;
int hf_iwarp_unit = -1, hf_iwarp_opcode = -1, hf_iwarp_ulpdu_len = -1, hf_iwarp_seq = -1, hf_iwarp_end_frame = -1,
    hf_iwarp_resync = -1;
int hf_diag = -1;
int hf_nvme_queue = -1, hf_nvme_cid = -1, hf_nvme_command = -1, hf_nvme_command_frame = -1, hf_nvme_response_frame = -1,
    hf_nvme_latency = -1, hf_nvme_cause_events = -1, hf_nvme_cause_frame = -1, hf_nvme_unanswered = -1;

gint ett_rdmadiag = -1, ett_bth = -1, ett_analysis = -1, ett_iwarp = -1, ett_crc = -1;

expert_field ei_icrc_bad = EI_INIT, ei_vcrc_bad = EI_INIT, ei_mpa_crc_bad = EI_INIT;
expert_field ei_icrc_unverifiable = EI_INIT, ei_icrc_not_wire = EI_INIT;
expert_field ei_psn_gap = EI_INIT, ei_psn_duplicate = EI_INIT, ei_psn_out_of_order = EI_INIT,
    ei_retransmission = EI_INIT, ei_spurious = EI_INIT, ei_ecn_ce = EI_INIT, ei_cnp = EI_INIT, ei_fecn = EI_INIT,
    ei_becn = EI_INIT;
expert_field ei_cc_response = EI_INIT, ei_cc_slowed = EI_INIT;
expert_field ei_pfc_pause = EI_INIT, ei_pfc_xon = EI_INIT;
expert_field ei_nvme_cause = EI_INIT, ei_nvme_unanswered = EI_INIT;
expert_field ei_diag_error = EI_INIT, ei_diag_warning = EI_INIT, ei_diag_note = EI_INIT;
std::array<expert_field, static_cast<std::size_t>(AnomalyKind::count_)> ei_anomaly;

// Preferences.
range_t* pref_roce_ports = nullptr;
gboolean pref_analysis = TRUE;
gboolean pref_roce_heuristic = TRUE;
guint pref_pmtu = 0;  // 0: inferred from the trace
guint pref_link_mbps = 0;  // 0: unknown (pause times and storms need it)

// The file being dissected: the analysis state of the first pass (plugin_session.h).
wireshark::PluginSession* file_state = nullptr;
wmem_map_t* frame_records = nullptr;  // frame number -> FrameRecord* (file scope)

// Wireshark's checksum status numbers (PROTO_CHECKSUM_E_*), our words for them.
const value_string crc_status_vals[] = {
    {PROTO_CHECKSUM_E_BAD, "Bad"},
    {PROTO_CHECKSUM_E_GOOD, "Good"},
    {PROTO_CHECKSUM_E_UNVERIFIED, "Unverifiable"},
    {PROTO_CHECKSUM_E_NOT_PRESENT, "Not present"},
    {0, nullptr},
};

decode::DecodeOptions options_from_prefs() {
  decode::DecodeOptions o;
  o.roce_heuristic = pref_roce_heuristic;
  if (pref_roce_ports) {
    for (guint i = 0; i < pref_roce_ports->nranges; ++i)
      for (guint32 port = pref_roce_ports->ranges[i].low; port <= pref_roce_ports->ranges[i].high && port <= 0xFFFF;
           ++port)
        if (port != 4791 && !o.add_roce_port(static_cast<std::uint16_t>(port))) return o;
  }
  return o;
}

void init_file_state() {
  delete file_state;
  file_state = new wireshark::PluginSession(options_from_prefs(), pref_pmtu, pref_link_mbps);
}

void cleanup_file_state() {
  delete file_state;
  file_state = nullptr;
}

// After the first sequential pass: close the analysis, so flows are paired and summarised.
void first_pass_done() {
  if (file_state) file_state->finish();
}

// pcap link type of the frame (the decoder speaks pcap LINKTYPE_*); 0 when not one it decodes.
std::uint32_t linktype_of(const packet_info* pinfo) {
  if (!pinfo->rec || pinfo->rec->rec_type != REC_TYPE_PACKET) return 0;
  switch (pinfo->rec->rec_header.packet_header.pkt_encap) {
    case WTAP_ENCAP_ETHERNET: return decode::linktype::kEthernet;
    case WTAP_ENCAP_SLL: return decode::linktype::kLinuxSll;
    case WTAP_ENCAP_SLL2: return decode::linktype::kLinuxSll2;
    case WTAP_ENCAP_RAW_IP: return decode::linktype::kRaw;
    case WTAP_ENCAP_RAW_IP4: return decode::linktype::kIpv4;
    case WTAP_ENCAP_RAW_IP6: return decode::linktype::kIpv6;
    case WTAP_ENCAP_INFINIBAND: return decode::linktype::kInfiniband;
    case WTAP_ENCAP_ERF:
      // wiretap has taken the ERF header (and an Ethernet record's 2-byte pad) off:
      // what is left is the packet the record's type names.
      if (!pinfo->pseudo_header) return 0;
      switch (pinfo->pseudo_header->erf.phdr.type & 0x7F) {
        case decode::kErfTypeInfiniband: return decode::linktype::kInfiniband;
        case decode::kErfTypeEth: return decode::linktype::kEthernet;
        case decode::kErfTypeIpv4: return decode::linktype::kIpv4;
        case decode::kErfTypeIpv6: return decode::linktype::kIpv6;
        default: return 0;
      }
    default:
      return 0;
  }
}

double seconds(const nstime_t& t) { return static_cast<double>(t.secs) + t.nsecs * 1e-9; }

// Runs the analysis on a frame of the first pass and keeps what it concluded.
const FrameRecord* analyse(const decode::DecodedPacket& p, std::uint32_t frame, const nstime_t& abs_ts) {
  const double ts = seconds(abs_ts);
  const std::int64_t ts_ns = static_cast<std::int64_t>(abs_ts.secs) * 1'000'000'000 + abs_ts.nsecs;
  FrameRecord r;
  if (!file_state->analyse(p, frame, ts, ts_ns, r)) return nullptr;
  auto* rec = wmem_new(wmem_file_scope(), FrameRecord);
  *rec = r;
  const decode::IwarpFrame& units = file_state->last_units();
  if (units.size) {
    rec->iwarp = wmem_alloc_array(wmem_file_scope(), IwarpUnitRecord, units.size);
    for (std::size_t i = 0; i < units.size; ++i) {
      rec->iwarp[i] = IwarpUnitRecord{};
      wireshark::fill_iwarp_unit(units.items[i], rec->iwarp[i]);
    }
  }
  wmem_map_insert(frame_records, GUINT_TO_POINTER(frame), rec);
  return rec;
}

// ---- tree building (no C++ objects with destructors below this line's callers) ----

proto_item* add_flag(proto_tree* tree, int hf, tvbuff_t* tvb) {
  proto_item* it = proto_tree_add_boolean(tree, hf, tvb, 0, 0, TRUE);
  proto_item_set_generated(it);
  return it;
}

proto_item* add_generated_uint(proto_tree* tree, int hf, tvbuff_t* tvb, guint32 v) {
  proto_item* it = proto_tree_add_uint(tree, hf, tvb, 0, 0, v);
  proto_item_set_generated(it);
  return it;
}

// Bounds of a header the decoder placed at `off`, clipped to the captured bytes.
gint clip(tvbuff_t* tvb, std::uint32_t off, std::uint32_t len) {
  return static_cast<gint>(wireshark::clip_to_captured(tvb_captured_length(tvb), off, len));
}

// `not_wire`: the analysis found this direction's captured ICRCs are not the wire's
// (decode/icrc_origin.h): a bad one is shown, but as a note, not an error.
void add_crcs(proto_tree* tree, packet_info* pinfo, tvbuff_t* tvb, const decode::DecodedPacket& p, bool not_wire) {
  proto_item* it = nullptr;
  switch (p.icrc) {
    case CrcStatus::ok:
    case CrcStatus::bad:
      proto_tree_add_checksum(tree, tvb, p.icrc_offset, hf_icrc, hf_icrc_status, not_wire ? nullptr : &ei_icrc_bad,
                              pinfo, p.icrc_computed, ENC_LITTLE_ENDIAN, PROTO_CHECKSUM_VERIFY);
      it = proto_tree_add_uint(tree, hf_icrc_computed, tvb, p.icrc_offset, 4, p.icrc_computed);
      proto_item_set_generated(it);
      if (not_wire && p.icrc == CrcStatus::bad) expert_add_info(pinfo, add_flag(tree, hf_icrc_not_wire, tvb), &ei_icrc_not_wire);
      break;
    case CrcStatus::unverifiable:
      it = add_generated_uint(tree, hf_icrc_status, tvb, PROTO_CHECKSUM_E_UNVERIFIED);
      expert_add_info(pinfo, it, &ei_icrc_unverifiable);
      break;
    case CrcStatus::not_present:
      break;
  }
  switch (p.vcrc) {
    case CrcStatus::ok:
    case CrcStatus::bad:
      proto_tree_add_checksum(tree, tvb, p.icrc_offset + 4, hf_vcrc, hf_vcrc_status, &ei_vcrc_bad, pinfo,
                              p.vcrc_computed, ENC_LITTLE_ENDIAN, PROTO_CHECKSUM_VERIFY);
      it = proto_tree_add_uint(tree, hf_vcrc_computed, tvb, p.icrc_offset + 4, 2, p.vcrc_computed);
      proto_item_set_generated(it);
      break;
    case CrcStatus::unverifiable:
      add_generated_uint(tree, hf_vcrc_status, tvb, PROTO_CHECKSUM_E_UNVERIFIED);
      break;
    case CrcStatus::not_present:
      break;
  }
}

// A header bit shown only when set, so that its bare field name filters (docs/wireshark.md); nullptr when clear.
proto_item* add_set_flag(proto_tree* tree, int hf, tvbuff_t* tvb, std::uint32_t off, gint len, bool set) {
  return set ? proto_tree_add_boolean(tree, hf, tvb, static_cast<gint>(off), len, TRUE) : nullptr;
}

void add_transport_headers(proto_tree* tree, packet_info* pinfo, tvbuff_t* tvb, const decode::DecodedPacket& p) {
  const decode::IbTransport& t = p.ib;
  const decode::OpcodeInfo& info = *p.opcode();
  char name[64];
  std::snprintf(name, sizeof name, "%.*s", static_cast<int>(info.name.size()), info.name.data());
  char service[16];
  const std::string_view sv = decode::to_string(info.service);
  std::snprintf(service, sizeof service, "%.*s", static_cast<int>(sv.size()), sv.data());

  const std::uint32_t off = p.bth_offset;
  proto_item* bth_item = proto_tree_add_uint_format(tree, hf_bth_opcode, tvb, off, clip(tvb, off, t.header_len),
                                                    t.bth.opcode, "Transport: %s (0x%02x), PSN %u, QP 0x%06x%s%s",
                                                    name, t.bth.opcode, t.bth.psn, t.bth.dest_qp,
                                                    t.bth.fecn ? ", FECN" : "", t.bth.becn ? ", BECN" : "");
  proto_tree* bth = proto_item_add_subtree(bth_item, ett_bth);
  proto_tree_add_string(bth, hf_bth_opcode_name, tvb, off, clip(tvb, off, 1), name);
  proto_tree_add_string(bth, hf_bth_service, tvb, off, clip(tvb, off, 1), service);
  add_set_flag(bth, hf_bth_se, tvb, off + 1, clip(tvb, off + 1, 1), t.bth.solicited_event);
  add_set_flag(bth, hf_bth_migreq, tvb, off + 1, clip(tvb, off + 1, 1), t.bth.mig_req);
  proto_tree_add_uint(bth, hf_bth_pad, tvb, off + 1, clip(tvb, off + 1, 1), t.bth.pad_count);
  proto_tree_add_uint(bth, hf_bth_tver, tvb, off + 1, clip(tvb, off + 1, 1), t.bth.tver);
  proto_tree_add_uint(bth, hf_bth_pkey, tvb, off + 2, clip(tvb, off + 2, 2), t.bth.pkey);
  // FECN/BECN: the top bits of BTH byte 4, which Wireshark 4.0 shows only as "reserved".
  if (proto_item* fecn = add_set_flag(bth, hf_bth_fecn, tvb, off + 4, clip(tvb, off + 4, 1), t.bth.fecn))
    expert_add_info(pinfo, fecn, &ei_fecn);
  if (proto_item* becn = add_set_flag(bth, hf_bth_becn, tvb, off + 4, clip(tvb, off + 4, 1), t.bth.becn))
    expert_add_info(pinfo, becn, &ei_becn);
  proto_tree_add_uint(bth, hf_bth_dest_qp, tvb, off + 5, clip(tvb, off + 5, 3), t.bth.dest_qp);
  add_set_flag(bth, hf_bth_ackreq, tvb, off + 8, clip(tvb, off + 8, 1), t.bth.ack_req);
  proto_tree_add_uint(bth, hf_bth_psn, tvb, off + 9, clip(tvb, off + 9, 3), t.bth.psn);

  // Extended headers, in wire order (IBA 9.2 table 39).
  std::uint32_t x = off + 12;
  if (t.has(decode::kRdeth)) {
    proto_tree_add_uint(bth, hf_rdeth_eecnxt, tvb, x, clip(tvb, x, 4), t.rdeth_ee_context);
    x += 4;
  }
  if (t.has(decode::kDeth)) {
    proto_tree_add_uint(bth, hf_deth_qkey, tvb, x, clip(tvb, x, 4), t.deth.qkey);
    proto_tree_add_uint(bth, hf_deth_src_qp, tvb, x + 5, clip(tvb, x + 5, 3), t.deth.src_qp);
    x += 8;
  }
  if (t.has(decode::kXrceth)) {
    proto_tree_add_uint(bth, hf_xrceth_srq, tvb, x + 1, clip(tvb, x + 1, 3), t.xrc_srq);
    x += 4;
  }
  if (t.has(decode::kFeth)) x += 4;
  if (t.has(decode::kReth)) {
    proto_tree_add_uint64(bth, hf_reth_va, tvb, x, clip(tvb, x, 8), t.reth.va);
    proto_tree_add_uint(bth, hf_reth_rkey, tvb, x + 8, clip(tvb, x + 8, 4), t.reth.rkey);
    proto_tree_add_uint(bth, hf_reth_len, tvb, x + 12, clip(tvb, x + 12, 4), t.reth.dma_len);
    x += 16;
  }
  if (t.has(decode::kAtomicEth)) x += 28;
  if (t.has(decode::kAeth)) {
    char kind[32];
    const std::string_view k = t.aeth.kind_name();
    std::snprintf(kind, sizeof kind, "%.*s", static_cast<int>(k.size()), k.data());
    proto_tree_add_string(bth, hf_aeth_kind, tvb, x, clip(tvb, x, 1), kind);
    proto_tree_add_uint(bth, hf_aeth_syndrome, tvb, x, clip(tvb, x, 1), t.aeth.syndrome);
    proto_tree_add_uint(bth, hf_aeth_msn, tvb, x + 1, clip(tvb, x + 1, 3), t.aeth.msn);
  }
  if (info.kind == decode::OpKind::cnp) {
    proto_item* it = add_flag(tree, hf_cnp, tvb);
    expert_add_info(pinfo, it, &ei_cnp);
  }
}

// The text of an anomaly, as `rdmadiag analyze` words it, copied out of the std::string at once.
void anomaly_text(const decode::Anomaly& a, char* buf, std::size_t n) {
  const std::string s = file_state->anomaly_text(a);
  std::snprintf(buf, n, "%s", s.c_str());
}

proto_item* add_relative_time(proto_tree* t, int hf, tvbuff_t* tvb, double us) {
  nstime_t ns;
  ns.secs = static_cast<time_t>(us / 1e6);
  ns.nsecs = static_cast<int>((us - static_cast<double>(ns.secs) * 1e6) * 1e3);
  proto_item* it = proto_tree_add_time(t, hf, tvb, 0, 0, &ns);
  proto_item_set_generated(it);
  return it;
}

// A response's link back to its request, and the time between them.
void add_request_link(proto_tree* t, tvbuff_t* tvb, std::uint64_t request_frame, double latency_us) {
  if (request_frame) {
    proto_item* it = proto_tree_add_uint(t, hf_request_frame, tvb, 0, 0, static_cast<guint32>(request_frame));
    proto_item_set_generated(it);
  }
  if (latency_us >= 0) add_relative_time(t, hf_latency, tvb, latency_us);
}

// Congestion control: a CNP's response time to the CE mark it answers, and the
// sender's rate judged after a CNP (a kept rate is the cc_no_reaction anomaly's expert info).
void add_congestion(proto_tree* t, packet_info* pinfo, tvbuff_t* tvb, const FrameRecord& r) {
  if (r.cnp_response_us >= 0) {
    proto_item* it = add_relative_time(t, hf_cc_response, tvb, r.cnp_response_us);
    expert_add_info_format(pinfo, it, &ei_cc_response, "CNP %.3f us after the CE-marked packet in frame %llu",
                           r.cnp_response_us, static_cast<unsigned long long>(r.cnp_mark_frame));
    add_generated_uint(t, hf_cc_mark_frame, tvb, static_cast<guint32>(r.cnp_mark_frame));
  }
  if (r.cc_verdict == decode::CcVerdict::slowed || r.cc_verdict == decode::CcVerdict::kept_rate) {
    const bool slowed = r.cc_verdict == decode::CcVerdict::slowed;
    proto_item* it = proto_tree_add_string(t, hf_cc_verdict, tvb, 0, 0, slowed ? "slowed" : "kept_rate");
    proto_item_set_generated(it);
    add_generated_uint(t, hf_cc_cnp_frame, tvb, static_cast<guint32>(r.cc_cnp_frame));
    if (slowed)
      expert_add_info_format(pinfo, it, &ei_cc_slowed, "Sender slowed after the CNP in frame %llu",
                             static_cast<unsigned long long>(r.cc_cnp_frame));
  }
}

void add_anomaly(packet_info* pinfo, proto_item* anchor, const decode::Anomaly& a, bool* covered) {
  char text[512];
  anomaly_text(a, text, sizeof text);
  expert_add_info_format(pinfo, anchor, &ei_anomaly[static_cast<std::size_t>(a.kind)], "%s", text);
  if (covered) covered[static_cast<std::size_t>(a.kind)] = true;
}

// The anomalies of this frame as expert infos, each worded as `rdmadiag analyze`
// words it; marks their kinds in `covered` (may be null). After the first pass:
// every one the analysis lists that names this frame, for IB/RoCE, iWARP and pause
// kinds alike, also those found at a later frame. During it (one-pass tshark):
// those raised while this frame was read, wherever they point.
void add_anomalies(packet_info* pinfo, proto_item* anchor, const FrameRecord* r, bool* covered) {
  if (file_state->finished()) {
    for (const std::uint32_t i : file_state->anomalies_at(pinfo->num))
      add_anomaly(pinfo, anchor, file_state->anomaly(i), covered);
    return;
  }
  if (!r) return;
  for (const decode::Anomaly& a : file_state->anomalies_of(*r))
    if (!wireshark::is_crc_anomaly(a.kind) && !a.retracted) add_anomaly(pinfo, anchor, a, covered);  // CRC: own items
}

// Whether add_anomalies() has something to show at this frame.
bool has_anomalies(std::uint32_t frame, const FrameRecord* r) {
  if (file_state->finished()) return !file_state->anomalies_at(frame).empty();
  return r && r->anomalies_logged;
}

void add_analysis(proto_tree* tree, packet_info* pinfo, tvbuff_t* tvb, const FrameRecord& r) {
  proto_item* root = proto_tree_add_uint_format(tree, hf_flow, tvb, 0, 0, r.flow, "PSN analysis (flow %u)", r.flow);
  proto_item_set_generated(root);
  proto_tree* t = proto_item_add_subtree(root, ett_analysis);
  if (file_state) {
    if (const auto qp = file_state->peer_qp(r.flow)) add_generated_uint(t, hf_peer_qp, tvb, *qp);
  }
  if (r.expected_psn >= 0) add_generated_uint(t, hf_psn_expected, tvb, static_cast<guint32>(r.expected_psn));

  bool covered[static_cast<std::size_t>(AnomalyKind::count_)] = {};
  if (file_state) add_anomalies(pinfo, root, &r, covered);
  const std::uint32_t gap = file_state ? file_state->gap_at(pinfo->num, r.gap) : r.gap;
  if (gap) {
    proto_item* it = add_generated_uint(t, hf_psn_gap, tvb, gap);
    if (!covered[static_cast<std::size_t>(AnomalyKind::psn_gap)])
      expert_add_info_format(pinfo, it, &ei_psn_gap, "PSN gap: %u packet(s) missing before this one", gap);
  }
  if (r.duplicate) {
    proto_item* it = add_flag(t, hf_psn_duplicate, tvb);
    if (!covered[static_cast<std::size_t>(AnomalyKind::psn_duplicate)]) expert_add_info(pinfo, it, &ei_psn_duplicate);
  }
  if (r.out_of_order) {
    proto_item* it = add_flag(t, hf_psn_out_of_order, tvb);
    if (!covered[static_cast<std::size_t>(AnomalyKind::psn_out_of_order)])
      expert_add_info(pinfo, it, &ei_psn_out_of_order);
  }
  if (r.retransmission) {
    proto_item* it = add_flag(t, hf_retransmission, tvb);
    if (!covered[static_cast<std::size_t>(AnomalyKind::retransmission)]) expert_add_info(pinfo, it, &ei_retransmission);
  }
  if (file_state ? file_state->spurious_at(r.flow, pinfo->num, r.spurious_retransmission) : r.spurious_retransmission) {
    proto_item* it = add_flag(t, hf_spurious, tvb);
    expert_add_info(pinfo, it, &ei_spurious);
  }
  if (r.nak_gap_frame) {
    proto_item* it = proto_tree_add_uint(t, hf_nak_gap_frame, tvb, 0, 0, static_cast<guint32>(r.nak_gap_frame));
    proto_item_set_generated(it);
  }
  add_request_link(t, tvb, r.request_frame, r.latency_us);
  if (r.ecn_ce) {
    proto_item* it = add_flag(t, hf_ecn_ce, tvb);
    expert_add_info(pinfo, it, &ei_ecn_ce);
  }
  add_congestion(t, pinfo, tvb, r);
  if (r.anomaly_count) add_generated_uint(t, hf_anomalies, tvb, r.anomaly_count);
}

// The response of a request frame and the time to it, from the analyzer's forward
// links (known once the response was seen: on a later pass, or tshark -2).
void add_response_link(proto_tree* tree, tvbuff_t* tvb, std::uint32_t frame, const FrameRecord* r) {
  if (!file_state) return;
  const auto* link = file_state->response_of(frame);
  if (!link) return;
  proto_item* item = proto_tree_add_uint(tree, hf_response_frame, tvb, 0, 0,
                                         static_cast<guint32>(link->response_frame));
  proto_item_set_generated(item);
  if (!r || r->latency_us < 0) add_request_link(tree, tvb, 0, link->latency_us);
}

guint32 mpa_status(MpaCrcStatus s) {
  switch (s) {
    case MpaCrcStatus::ok: return PROTO_CHECKSUM_E_GOOD;
    case MpaCrcStatus::bad: return PROTO_CHECKSUM_E_BAD;
    case MpaCrcStatus::unverifiable: return PROTO_CHECKSUM_E_UNVERIFIED;
    default: return PROTO_CHECKSUM_E_NOT_PRESENT;
  }
}

void add_iwarp(proto_tree* tree, packet_info* pinfo, tvbuff_t* tvb, const FrameRecord& r) {
  for (std::size_t i = 0; i < r.iwarp_count; ++i) {
    const IwarpUnitRecord& u = r.iwarp[i];
    char label[64];
    if (u.kind == decode::IwarpPdu::Kind::mpa_request) {
      std::snprintf(label, sizeof label, "MPA Request");
    } else if (u.kind == decode::IwarpPdu::Kind::mpa_reply) {
      std::snprintf(label, sizeof label, "MPA Reply");
    } else {
      const std::string_view op = decode::rdmap_opcode_name(u.rdmap_opcode);
      std::snprintf(label, sizeof label, "FPDU %.*s", static_cast<int>(op.size()), op.data());
    }
    proto_item* unit = proto_tree_add_string_format(tree, hf_iwarp_unit, tvb, 0, 0, label, "iWARP %s (ULPDU %u bytes)",
                                                    label, u.ulpdu_len);
    proto_item_set_generated(unit);
    proto_tree* t = proto_item_add_subtree(unit, ett_iwarp);
    add_generated_uint(t, hf_iwarp_seq, tvb, u.seq);
    if (u.end_frame && u.end_frame != pinfo->num) {
      proto_item* it = proto_tree_add_uint(t, hf_iwarp_end_frame, tvb, 0, 0, static_cast<guint32>(u.end_frame));
      proto_item_set_generated(it);
    }
    if (u.kind != decode::IwarpPdu::Kind::fpdu) continue;
    if (u.header_decoded) add_generated_uint(t, hf_iwarp_opcode, tvb, u.rdmap_opcode);
    add_generated_uint(t, hf_iwarp_ulpdu_len, tvb, u.ulpdu_len);
    if (u.resync) add_flag(t, hf_iwarp_resync, tvb);
    if (u.crc_status == MpaCrcStatus::ok || u.crc_status == MpaCrcStatus::bad) add_generated_uint(t, hf_mpa_crc, tvb, u.crc);
    proto_item* st = add_generated_uint(t, hf_mpa_crc_status, tvb, mpa_status(u.crc_status));
    if (u.crc_status == MpaCrcStatus::bad) {
      add_generated_uint(t, hf_mpa_crc_computed, tvb, u.crc_computed);
      expert_add_info_format(pinfo, st, &ei_mpa_crc_bad, "Bad MPA CRC32c 0x%08x [should be 0x%08x]", u.crc,
                             u.crc_computed);
    }
    add_request_link(t, tvb, u.request_frame, u.latency_us);
  }
}

void add_diagnostics(proto_tree* tree, packet_info* pinfo, tvbuff_t* tvb, const decode::DecodedPacket& p) {
  for (const decode::Diagnostic& d : p.diags) {
    if (d.code == decode::DiagCode::icrc_bad || d.code == decode::DiagCode::vcrc_bad) continue;  // checksum items
    char text[96];
    const std::string_view c = decode::to_string(d.code);
    std::snprintf(text, sizeof text, "%.*s", static_cast<int>(c.size()), c.data());
    proto_item* it = proto_tree_add_string(tree, hf_diag, tvb, d.offset, clip(tvb, d.offset, 1), text);
    expert_field* ei = d.severity == decode::Severity::error     ? &ei_diag_error
                       : d.severity == decode::Severity::warning ? &ei_diag_warning
                                                                 : &ei_diag_note;
    expert_add_info_format(pinfo, it, ei, "rdmadiag decode: %s", text);
  }
}

void append_info(packet_info* pinfo, const decode::DecodedPacket* p, const FrameRecord* r) {
  if (p && p->icrc == CrcStatus::bad) col_append_str(pinfo->cinfo, COL_INFO, " [ICRC bad]");
  if (p && p->vcrc == CrcStatus::bad) col_append_str(pinfo->cinfo, COL_INFO, " [VCRC bad]");
  if (!r) return;
  // The gap as the whole capture tells it, as the tree shows it (a withdrawn gap gets no tag).
  const std::uint32_t gap = file_state->gap_at(pinfo->num, r->gap);
  if (gap) col_append_fstr(pinfo->cinfo, COL_INFO, " [PSN gap: %u missing]", gap);
  if (r->duplicate) col_append_str(pinfo->cinfo, COL_INFO, " [PSN duplicate]");
  if (r->out_of_order) col_append_str(pinfo->cinfo, COL_INFO, " [PSN out of order]");
  if (r->retransmission) col_append_str(pinfo->cinfo, COL_INFO, " [Retransmission]");
  for (std::size_t i = 0; i < r->iwarp_count; ++i)
    if (r->iwarp[i].crc_status == MpaCrcStatus::bad) col_append_str(pinfo->cinfo, COL_INFO, " [MPA CRC bad]");
}

// A PAUSE/PFC frame (decode/mac_control.h): per priority it speaks for, the
// quanta (0: XON), and the storms that began here (known on a second pass, with
// the link speed preference).
int dissect_pause(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, const decode::DecodedPacket& p,
                  const FrameRecord* r) {
  const decode::MacControl& m = *p.mac_control;
  proto_item* root = proto_tree_add_item(tree, proto_rdmadiag, tvb, 0, -1, ENC_NA);
  proto_tree* t = proto_item_add_subtree(root, ett_rdmadiag);
  add_generated_uint(t, hf_pfc_opcode, tvb, m.opcode);
  if (m.is_pause() || m.is_pfc()) {
    unsigned paused = 0, resumed = 0;
    for (std::size_t n = 0; n < decode::kPriorities; ++n) {
      if (!m.enables(n)) continue;
      add_generated_uint(t, hf_pfc_priority, tvb, static_cast<guint32>(n));
      add_generated_uint(t, hf_pfc_quanta, tvb, m.quanta_for(n));
      (m.quanta_for(n) ? paused : resumed) |= 1u << n;
    }
    if (paused)
      expert_add_info_format(pinfo, root, &ei_pfc_pause, "%s pauses priority mask 0x%02x", m.is_pfc() ? "PFC" : "PAUSE",
                             paused);
    if (resumed) {
      proto_item* it = add_flag(t, hf_pfc_xon, tvb);
      expert_add_info_format(pinfo, it, &ei_pfc_xon, "XON: priority mask 0x%02x resumes", resumed);
    }
  }
  add_anomalies(pinfo, root, r, nullptr);  // storms: known when the pause ends (second pass)
  return static_cast<int>(tvb_captured_length(tvb));
}

// The NVMe command this capsule or completion belongs to (rdmadiag nvme's
// pairing), its latency, and the transport events inside its window: the cause
// of a slow command. Command frames get it on a second pass (tshark -2).
void add_nvme(proto_tree* t, packet_info* pinfo, tvbuff_t* tvb, const wireshark::NvmeFrameNote& n) {
  if (n.qid != decode::kNvmeUnknownQid) add_generated_uint(t, hf_nvme_queue, tvb, n.qid);
  add_generated_uint(t, hf_nvme_cid, tvb, n.cid);
  proto_item_set_generated(proto_tree_add_string(t, hf_nvme_command, tvb, 0, 0, n.name.c_str()));
  const int link = n.command ? hf_nvme_response_frame : hf_nvme_command_frame;
  const std::uint64_t other = n.command ? n.response_frame : n.command_frame;
  if (other) proto_item_set_generated(proto_tree_add_uint(t, link, tvb, 0, 0, static_cast<guint32>(other)));
  if (!n.response_frame) {
    proto_item* it = add_flag(t, hf_nvme_unanswered, tvb);
    expert_add_info_format(pinfo, it, &ei_nvme_unanswered, "NVMe %s (CID 0x%04x): no completion in the capture",
                           n.name.c_str(), n.cid);
    return;
  }
  proto_item* lat = proto_tree_add_double(t, hf_nvme_latency, tvb, 0, 0, n.latency_us);
  proto_item_set_generated(lat);
  add_generated_uint(t, hf_nvme_cause_events, tvb, n.transport_events);
  if (!n.transport_events) return;
  proto_item_set_generated(
      proto_tree_add_uint(t, hf_nvme_cause_frame, tvb, 0, 0, static_cast<guint32>(n.first_event_frame)));
  if (!n.command)
    expert_add_info_format(pinfo, lat, &ei_nvme_cause,
                           "NVMe %s (CID 0x%04x) took %.1f us with %u transport events on its queue pairs, first at frame %u",
                           n.name.c_str(), n.cid, n.latency_us, n.transport_events, static_cast<unsigned>(n.first_event_frame));
}

int dissect_rdmadiag(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, void*) {
  const std::uint32_t lt = linktype_of(pinfo);
  if (!lt || !file_state) return 0;
  const guint caplen = tvb_captured_length(tvb);
  const guint8* bytes = caplen ? tvb_get_ptr(tvb, 0, static_cast<gint>(caplen)) : nullptr;
  static decode::DecodedPacket p;
  decode::decode_frame(lt, decode::Bytes(bytes, caplen), pinfo->fd->pkt_len, file_state->options(), p);
  // A pcapng file's interfaces are capture points (two hosts' captures merged
  // with mergecap -I none): each one's packets are analysed as it saw them.
  if (pinfo->rec->presence_flags & WTAP_HAS_INTERFACE_ID)
    decode::take_reader_point(p, decode::interface_point(pinfo->rec->rec_header.packet_header.interface_id));

  const FrameRecord* r = nullptr;
  if (!pinfo->fd->visited && pref_analysis)
    r = analyse(p, pinfo->num, pinfo->abs_ts);
  else
    r = static_cast<const FrameRecord*>(wmem_map_lookup(frame_records, GUINT_TO_POINTER(pinfo->num)));
  FrameRecord replayed;  // a frame analysed again once its direction's ICRCs proved not the wire's
  if (const decode::ReplayRevision* v = r ? file_state->replay_at(pinfo->num) : nullptr) {
    replayed = *r;
    decode::apply_replay(*v, replayed);
    r = &replayed;
  }

  if (p.mac_control) return dissect_pause(tvb, pinfo, tree, p, r);
  const bool rdma = p.is_rdma() && (p.has_bth || p.icrc != CrcStatus::not_present);
  const bool anomalies = has_anomalies(pinfo->num, r);
  if (!rdma && !(r && (r->iwarp_count || r->iwarp_not_listed)) && !anomalies) return 0;
  append_info(pinfo, rdma ? &p : nullptr, r);

  proto_item* root = proto_tree_add_item(tree, proto_rdmadiag, tvb, 0, -1, ENC_NA);
  proto_tree* t = proto_item_add_subtree(root, ett_rdmadiag);
  // Not an IB/RoCE packet: a TCP segment where the iWARP analysis found units or anomalies (a hole).
  const std::string_view tr = decode::to_string(rdma ? p.transport : decode::Transport::iwarp);
  char transport[16];
  std::snprintf(transport, sizeof transport, "%.*s", static_cast<int>(tr.size()), tr.data());
  proto_item* ti = proto_tree_add_string(t, hf_transport, tvb, 0, 0, transport);
  proto_item_set_generated(ti);
  if (rdma) {
    add_crcs(t, pinfo, tvb, p, r && r->icrc_not_wire);
    if (p.has_bth) add_transport_headers(t, pinfo, tvb, p);
    add_diagnostics(t, pinfo, tvb, p);
  }
  if (r && r->analysed)
    add_analysis(t, pinfo, tvb, *r);
  else if (anomalies)
    add_anomalies(pinfo, root, r, nullptr);
  if (rdma && p.has_bth) add_response_link(t, tvb, pinfo->num, r);
  if (r && r->iwarp_count) add_iwarp(t, pinfo, tvb, *r);
  for (const wireshark::NvmeFrameNote& n : file_state->nvme_at(pinfo->num)) add_nvme(t, pinfo, tvb, n);
  return static_cast<int>(caplen);
}

void apply_prefs() {
  // Ports and heuristics change what the decoder sees: a new first pass follows (Wireshark redissects).
  if (file_state) file_state->set_options(options_from_prefs());
}

#define HF(id, name, abbrev, type, display, strings, blurb) \
  { &id, { name, abbrev, type, display, strings, 0x0, blurb, HFILL } }

// Expert Information groups by these words (the per-frame message says the details).
const char* anomaly_summary(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::psn_gap: return "PSN gap: packets lost before the capture point";
    case AnomalyKind::psn_duplicate: return "Duplicate PSN";
    case AnomalyKind::psn_out_of_order: return "PSN out of order (reordered on the path)";
    case AnomalyKind::nak_psn_seq_error: return "NAK: PSN sequence error (responder asks for a resend)";
    case AnomalyKind::nak_invalid_request: return "NAK: invalid request";
    case AnomalyKind::nak_remote_access: return "NAK: remote access error";
    case AnomalyKind::nak_remote_op: return "NAK: remote operational error";
    case AnomalyKind::nak_invalid_rd_request: return "NAK: invalid RD request";
    case AnomalyKind::rnr_nak: return "RNR NAK: receiver not ready";
    case AnomalyKind::retransmission: return "Retransmission episode (go-back-N)";
    case AnomalyKind::icrc_bad: return "Bad ICRC";
    case AnomalyKind::vcrc_bad: return "Bad VCRC";
    case AnomalyKind::bad_opcode_sequence: return "Bad opcode sequence";
    case AnomalyKind::payload_length_mismatch: return "Payload length mismatch";
    case AnomalyKind::pkey_change: return "P_Key changed within a flow";
    case AnomalyKind::response_without_request: return "Response without a request in the capture";
    case AnomalyKind::tcp_hole: return "TCP bytes missing under MPA";
    case AnomalyKind::mpa_crc_bad: return "Bad MPA CRC32c";
    case AnomalyKind::mpa_bad_framing: return "Bad MPA framing";
    case AnomalyKind::ddp_msn_gap: return "DDP MSN gap";
    case AnomalyKind::ddp_mo_discontinuity: return "DDP message offset discontinuity";
    case AnomalyKind::rdmap_terminate: return "RDMAP Terminate";
    case AnomalyKind::iwarp_resync: return "iWARP framing found without the MPA negotiation";
    case AnomalyKind::ddp_to_discontinuity: return "DDP tagged offset or STag discontinuity";
    case AnomalyKind::rdmap_read_size_mismatch: return "RDMA Read Response not the size requested";
    case AnomalyKind::rdmap_read_response_unmatched: return "RDMA Read Response without a Read Request";
    case AnomalyKind::mpa_marker_stride: return "MPA markers not every 512 octets";
    case AnomalyKind::pause_storm: return "Pause storm: a priority paused beyond the threshold";
    case AnomalyKind::cc_no_reaction: return "Sender kept its rate after a CNP";
    case AnomalyKind::icrc_not_wire: return "ICRCs not the wire's: a sender's bad ICRCs its receiver took (offload)";
    default: return "rdmadiag anomaly";
  }
}

// The transport and its CRCs: ICRC, VCRC, MPA CRC32c.
void register_crc_fields() {
  static hf_register_info hf[] = {
      HF(hf_transport, "Transport", "rdmadiag.transport", FT_STRING, BASE_NONE, nullptr, "ib, roce_v1, roce_v2 or iwarp"),
      HF(hf_icrc, "ICRC", "rdmadiag.icrc", FT_UINT32, BASE_HEX, nullptr, "Invariant CRC as on the wire"),
      HF(hf_icrc_status, "ICRC status", "rdmadiag.icrc.status", FT_UINT8, BASE_NONE, VALS(crc_status_vals), nullptr),
      HF(hf_icrc_computed, "ICRC computed", "rdmadiag.icrc.computed", FT_UINT32, BASE_HEX, nullptr, nullptr),
      HF(hf_icrc_not_wire, "ICRC not the wire's", "rdmadiag.icrc.not_wire", FT_BOOLEAN, BASE_NONE, nullptr,
         "Bad in the capture, but the receiver took this sender's packets: captured before the ICRC is computed"),
      HF(hf_vcrc, "VCRC", "rdmadiag.vcrc", FT_UINT16, BASE_HEX, nullptr, "Variant CRC (native InfiniBand)"),
      HF(hf_vcrc_status, "VCRC status", "rdmadiag.vcrc.status", FT_UINT8, BASE_NONE, VALS(crc_status_vals), nullptr),
      HF(hf_vcrc_computed, "VCRC computed", "rdmadiag.vcrc.computed", FT_UINT16, BASE_HEX, nullptr, nullptr),
      HF(hf_mpa_crc, "MPA CRC", "rdmadiag.mpa_crc", FT_UINT32, BASE_HEX, nullptr, "MPA FPDU CRC32c"),
      HF(hf_mpa_crc_status, "MPA CRC status", "rdmadiag.mpa_crc.status", FT_UINT8, BASE_NONE, VALS(crc_status_vals),
         nullptr),
      HF(hf_mpa_crc_computed, "MPA CRC computed", "rdmadiag.mpa_crc.computed", FT_UINT32, BASE_HEX, nullptr, nullptr),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// BTH and its extension headers.
void register_header_fields() {
  static hf_register_info hf[] = {
      HF(hf_bth_opcode, "Opcode", "rdmadiag.bth.opcode", FT_UINT8, BASE_HEX, nullptr, nullptr),
      HF(hf_bth_opcode_name, "Opcode name", "rdmadiag.bth.opcode_name", FT_STRING, BASE_NONE, nullptr, nullptr),
      HF(hf_bth_service, "Transport service", "rdmadiag.bth.service", FT_STRING, BASE_NONE, nullptr,
         "RC, UC, RD, UD, CNP, XRC, VENDOR or RESERVED"),
      HF(hf_bth_se, "Solicited event", "rdmadiag.bth.se", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_bth_migreq, "MigReq", "rdmadiag.bth.migreq", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_bth_pad, "Pad count", "rdmadiag.bth.pad", FT_UINT8, BASE_DEC, nullptr, nullptr),
      HF(hf_bth_tver, "Transport header version", "rdmadiag.bth.tver", FT_UINT8, BASE_DEC, nullptr, nullptr),
      HF(hf_bth_pkey, "P_Key", "rdmadiag.bth.pkey", FT_UINT16, BASE_HEX, nullptr, nullptr),
      HF(hf_bth_fecn, "FECN", "rdmadiag.bth.fecn", FT_BOOLEAN, BASE_NONE, nullptr, "Forward explicit congestion notification"),
      HF(hf_bth_becn, "BECN", "rdmadiag.bth.becn", FT_BOOLEAN, BASE_NONE, nullptr, "Backward explicit congestion notification"),
      HF(hf_bth_dest_qp, "Destination QP", "rdmadiag.bth.dest_qp", FT_UINT24, BASE_HEX, nullptr, nullptr),
      HF(hf_bth_ackreq, "AckReq", "rdmadiag.bth.ackreq", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_bth_psn, "PSN", "rdmadiag.bth.psn", FT_UINT24, BASE_DEC, nullptr, nullptr),
      HF(hf_rdeth_eecnxt, "RDETH EE context", "rdmadiag.rdeth.ee_context", FT_UINT24, BASE_HEX, nullptr, nullptr),
      HF(hf_deth_qkey, "DETH Q_Key", "rdmadiag.deth.qkey", FT_UINT32, BASE_HEX, nullptr, nullptr),
      HF(hf_deth_src_qp, "DETH source QP", "rdmadiag.deth.src_qp", FT_UINT24, BASE_HEX, nullptr, nullptr),
      HF(hf_xrceth_srq, "XRCETH XRC SRQ", "rdmadiag.xrceth.srq", FT_UINT24, BASE_HEX, nullptr, nullptr),
      HF(hf_reth_va, "RETH virtual address", "rdmadiag.reth.va", FT_UINT64, BASE_HEX, nullptr, nullptr),
      HF(hf_reth_rkey, "RETH R_Key", "rdmadiag.reth.rkey", FT_UINT32, BASE_HEX, nullptr, nullptr),
      HF(hf_reth_len, "RETH DMA length", "rdmadiag.reth.dma_len", FT_UINT32, BASE_DEC, nullptr, nullptr),
      HF(hf_aeth_kind, "AETH", "rdmadiag.aeth.kind", FT_STRING, BASE_NONE, nullptr, "ack, rnr_nak, nak_..."),
      HF(hf_aeth_syndrome, "AETH syndrome", "rdmadiag.aeth.syndrome", FT_UINT8, BASE_HEX, nullptr, nullptr),
      HF(hf_aeth_msn, "AETH MSN", "rdmadiag.aeth.msn", FT_UINT24, BASE_DEC, nullptr, nullptr),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// ECN, CNPs, PAUSE/PFC and the congestion-control verdicts.
void register_congestion_fields() {
  static hf_register_info hf[] = {
      HF(hf_cnp, "Congestion notification packet", "rdmadiag.cnp", FT_BOOLEAN, BASE_NONE, nullptr, "RoCEv2 CNP"),
      HF(hf_ecn_ce, "ECN congestion experienced", "rdmadiag.ecn_ce", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_pfc_opcode, "MAC Control opcode", "rdmadiag.pfc.opcode", FT_UINT16, BASE_HEX, nullptr,
         "0x0001 PAUSE (802.3 Annex 31B), 0x0101 PFC (802.3 Annex 31D, 802.1Qbb)"),
      HF(hf_pfc_priority, "Priority", "rdmadiag.pfc.priority", FT_UINT8, BASE_DEC, nullptr,
         "A priority the frame speaks for (PAUSE: all 8; PFC: the enabled ones), in order"),
      HF(hf_pfc_quanta, "Pause quanta", "rdmadiag.pfc.quanta", FT_UINT16, BASE_DEC, nullptr,
         "Per rdmadiag.pfc.priority, in the same order: 512 bit times each; 0 resumes (XON)"),
      HF(hf_pfc_xon, "XON", "rdmadiag.pfc.xon", FT_BOOLEAN, BASE_NONE, nullptr, "A priority resumes (time 0)"),
      HF(hf_cc_response, "CNP response time", "rdmadiag.cc.cnp_response", FT_RELATIVE_TIME, BASE_NONE, nullptr,
         "From the first CE-marked packet not yet answered to this CNP, at the capture point"),
      HF(hf_cc_mark_frame, "CE mark answered", "rdmadiag.cc.mark_frame", FT_FRAMENUM, BASE_NONE, nullptr, nullptr),
      HF(hf_cc_verdict, "Rate after the CNP", "rdmadiag.cc.verdict", FT_STRING, BASE_NONE, nullptr,
         "slowed or kept_rate: the sender's gaps after a CNP against those before it"),
      HF(hf_cc_cnp_frame, "CNP judged", "rdmadiag.cc.cnp_frame", FT_FRAMENUM, BASE_NONE, nullptr, nullptr),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// Flow and PSN sequence analysis.
void register_sequence_fields() {
  static hf_register_info hf[] = {
      HF(hf_flow, "Flow", "rdmadiag.flow", FT_UINT32, BASE_DEC, nullptr, "Index of the flow, as in rdmadiag analyze"),
      HF(hf_peer_qp, "Peer QP", "rdmadiag.peer_qp", FT_UINT24, BASE_HEX, nullptr, "QP at the source side of this flow"),
      HF(hf_psn_expected, "Expected PSN", "rdmadiag.psn.expected", FT_UINT24, BASE_DEC, nullptr, nullptr),
      HF(hf_psn_gap, "PSN gap (missing)", "rdmadiag.psn.gap", FT_UINT32, BASE_DEC, nullptr,
         "PSNs missing just before this packet"),
      HF(hf_psn_duplicate, "Duplicate PSN", "rdmadiag.psn.duplicate", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_psn_out_of_order, "Out of order", "rdmadiag.psn.out_of_order", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_retransmission, "Retransmission", "rdmadiag.retransmission", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
      HF(hf_spurious, "Spurious retransmission", "rdmadiag.retransmission.spurious", FT_BOOLEAN, BASE_NONE, nullptr,
         "Resend of a packet that was not lost at the capture point"),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// NVMe-oF commands and their completions.
void register_nvme_fields() {
  static hf_register_info hf[] = {
      HF(hf_nvme_queue, "NVMe queue ID", "rdmadiag.nvme.queue", FT_UINT16, BASE_DEC, nullptr, "From the queue's Connect"),
      HF(hf_nvme_cid, "NVMe command ID", "rdmadiag.nvme.cid", FT_UINT16, BASE_HEX, nullptr, nullptr),
      HF(hf_nvme_command, "NVMe command", "rdmadiag.nvme.command", FT_STRING, BASE_NONE, nullptr, nullptr),
      HF(hf_nvme_command_frame, "NVMe command in frame", "rdmadiag.nvme.command_frame", FT_FRAMENUM, BASE_NONE,
         FRAMENUM_TYPE(FT_FRAMENUM_REQUEST), nullptr),
      HF(hf_nvme_response_frame, "NVMe completion in frame", "rdmadiag.nvme.response_frame", FT_FRAMENUM, BASE_NONE,
         FRAMENUM_TYPE(FT_FRAMENUM_RESPONSE), nullptr),
      HF(hf_nvme_latency, "NVMe latency (us)", "rdmadiag.nvme.latency", FT_DOUBLE, BASE_NONE, nullptr,
         "Command capsule to completion at the capture point, microseconds"),
      HF(hf_nvme_cause_events, "Transport events inside", "rdmadiag.nvme.cause.events", FT_UINT32, BASE_DEC, nullptr,
         "PSN gaps, resends, duplicates, out of order, CNPs, NAKs, RNR NAKs on the queue's queue pairs while the command was outstanding"),
      HF(hf_nvme_cause_frame, "First transport event in frame", "rdmadiag.nvme.cause.first_frame", FT_FRAMENUM, BASE_NONE,
         nullptr, nullptr),
      HF(hf_nvme_unanswered, "No completion in the capture", "rdmadiag.nvme.unanswered", FT_BOOLEAN, BASE_NONE, nullptr, nullptr),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// Request/response pairing and anomalies.
void register_pairing_fields() {
  static hf_register_info hf[] = {
      HF(hf_nak_gap_frame, "Gap answered by this NAK", "rdmadiag.nak.gap_frame", FT_FRAMENUM, BASE_NONE, nullptr, nullptr),
      HF(hf_request_frame, "Request in frame", "rdmadiag.request_frame", FT_FRAMENUM, BASE_NONE,
         FRAMENUM_TYPE(FT_FRAMENUM_REQUEST), nullptr),
      HF(hf_response_frame, "Response in frame", "rdmadiag.response_frame", FT_FRAMENUM, BASE_NONE,
         FRAMENUM_TYPE(FT_FRAMENUM_RESPONSE), nullptr),
      HF(hf_latency, "Latency", "rdmadiag.latency", FT_RELATIVE_TIME, BASE_NONE, nullptr,
         "Request to response at the capture point"),
      HF(hf_anomalies, "Anomalies", "rdmadiag.anomalies", FT_UINT8, BASE_DEC, nullptr, "Anomalies raised at this frame"),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// iWARP units, and decode diagnostics.
void register_iwarp_fields() {
  static hf_register_info hf[] = {
      HF(hf_iwarp_unit, "iWARP unit", "rdmadiag.iwarp.unit", FT_STRING, BASE_NONE, nullptr, nullptr),
      HF(hf_iwarp_opcode, "RDMAP opcode", "rdmadiag.iwarp.opcode", FT_UINT8, BASE_HEX, nullptr, nullptr),
      HF(hf_iwarp_ulpdu_len, "ULPDU length", "rdmadiag.iwarp.ulpdu_len", FT_UINT16, BASE_DEC, nullptr, nullptr),
      HF(hf_iwarp_seq, "TCP sequence number of the unit", "rdmadiag.iwarp.seq", FT_UINT32, BASE_DEC, nullptr, nullptr),
      HF(hf_iwarp_end_frame, "Unit ended in frame", "rdmadiag.iwarp.end_frame", FT_FRAMENUM, BASE_NONE, nullptr, nullptr),
      HF(hf_iwarp_resync, "Framing found without MPA negotiation", "rdmadiag.iwarp.resync", FT_BOOLEAN, BASE_NONE,
         nullptr, nullptr),
      HF(hf_diag, "Decode diagnostic", "rdmadiag.diag", FT_STRING, BASE_NONE, nullptr, nullptr),
  };
  proto_register_field_array(proto_rdmadiag, hf, array_length(hf));
}

// The expert infos of CRC, sequence, congestion, NVMe and decode findings.
expert_module_t* register_experts() {
  static ei_register_info ei[] = {
      {&ei_icrc_bad, {"rdmadiag.icrc.bad", PI_CHECKSUM, PI_ERROR, "Bad ICRC", EXPFILL}},
      {&ei_vcrc_bad, {"rdmadiag.vcrc.bad", PI_CHECKSUM, PI_ERROR, "Bad VCRC", EXPFILL}},
      {&ei_mpa_crc_bad, {"rdmadiag.mpa_crc.bad", PI_CHECKSUM, PI_ERROR, "Bad MPA CRC32c", EXPFILL}},
      {&ei_icrc_not_wire,
       {"rdmadiag.icrc.not_wire.expert", PI_CHECKSUM, PI_NOTE,
        "ICRC not the wire's (captured before it is computed: offload); not corruption", EXPFILL}},
      {&ei_icrc_unverifiable,
       {"rdmadiag.icrc.unverifiable", PI_CHECKSUM, PI_CHAT, "ICRC not captured (snap length): unverifiable", EXPFILL}},
      {&ei_psn_gap, {"rdmadiag.psn.gap.expert", PI_SEQUENCE, PI_WARN, "PSN gap", EXPFILL}},
      {&ei_psn_duplicate, {"rdmadiag.psn.duplicate.expert", PI_SEQUENCE, PI_WARN, "Duplicate PSN", EXPFILL}},
      {&ei_psn_out_of_order, {"rdmadiag.psn.out_of_order.expert", PI_SEQUENCE, PI_WARN, "PSN out of order", EXPFILL}},
      {&ei_retransmission, {"rdmadiag.retransmission.expert", PI_SEQUENCE, PI_NOTE, "Retransmitted packet", EXPFILL}},
      {&ei_spurious,
       {"rdmadiag.retransmission.spurious.expert", PI_SEQUENCE, PI_NOTE,
        "Spurious retransmission: the original passed the capture point", EXPFILL}},
      {&ei_ecn_ce, {"rdmadiag.ecn_ce.expert", PI_SEQUENCE, PI_NOTE, "ECN congestion experienced", EXPFILL}},
      {&ei_cnp, {"rdmadiag.cnp.expert", PI_SEQUENCE, PI_NOTE, "Congestion notification packet", EXPFILL}},
      {&ei_pfc_pause, {"rdmadiag.pfc.pause.expert", PI_SEQUENCE, PI_NOTE, "Pause (PAUSE/PFC XOFF)", EXPFILL}},
      {&ei_pfc_xon, {"rdmadiag.pfc.xon.expert", PI_SEQUENCE, PI_CHAT, "Pause ends (XON)", EXPFILL}},
      {&ei_cc_response, {"rdmadiag.cc.cnp_response.expert", PI_SEQUENCE, PI_NOTE, "CNP response time", EXPFILL}},
      {&ei_cc_slowed, {"rdmadiag.cc.slowed.expert", PI_SEQUENCE, PI_NOTE, "Sender slowed after a CNP", EXPFILL}},
      {&ei_fecn, {"rdmadiag.bth.fecn.expert", PI_SEQUENCE, PI_NOTE, "FECN set: congestion on the path", EXPFILL}},
      {&ei_becn, {"rdmadiag.bth.becn.expert", PI_SEQUENCE, PI_NOTE, "BECN set: congestion reported back", EXPFILL}},
      {&ei_nvme_cause,
       {"rdmadiag.nvme.cause.expert", PI_SEQUENCE, PI_WARN, "NVMe command delayed by transport events", EXPFILL}},
      {&ei_nvme_unanswered,
       {"rdmadiag.nvme.unanswered.expert", PI_SEQUENCE, PI_WARN, "NVMe command with no completion", EXPFILL}},
      {&ei_diag_error, {"rdmadiag.diag.error", PI_MALFORMED, PI_ERROR, "Decode error", EXPFILL}},
      {&ei_diag_warning, {"rdmadiag.diag.warning", PI_PROTOCOL, PI_WARN, "Decode warning", EXPFILL}},
      {&ei_diag_note, {"rdmadiag.diag.note", PI_PROTOCOL, PI_NOTE, "Decode note", EXPFILL}},
  };
  expert_module_t* expert = expert_register_protocol(proto_rdmadiag);
  expert_register_field_array(expert, ei, array_length(ei));
  return expert;
}

// The expert group of an anomaly kind.
int anomaly_expert_group(AnomalyKind kind) {
  switch (kind) {
    case AnomalyKind::psn_gap: case AnomalyKind::psn_duplicate: case AnomalyKind::psn_out_of_order:
    case AnomalyKind::retransmission: case AnomalyKind::tcp_hole: case AnomalyKind::ddp_msn_gap:
    case AnomalyKind::ddp_mo_discontinuity: case AnomalyKind::ddp_to_discontinuity:
    case AnomalyKind::pause_storm: case AnomalyKind::cc_no_reaction:
      return PI_SEQUENCE;
    case AnomalyKind::nak_psn_seq_error: case AnomalyKind::nak_invalid_request: case AnomalyKind::nak_remote_access:
    case AnomalyKind::nak_remote_op: case AnomalyKind::nak_invalid_rd_request: case AnomalyKind::rnr_nak:
    case AnomalyKind::rdmap_terminate:
      return PI_RESPONSE_CODE;
    case AnomalyKind::icrc_bad: case AnomalyKind::vcrc_bad: case AnomalyKind::mpa_crc_bad:
    case AnomalyKind::icrc_not_wire:
      return PI_CHECKSUM;
    case AnomalyKind::mpa_bad_framing: case AnomalyKind::mpa_marker_stride:
      return PI_MALFORMED;
    case AnomalyKind::iwarp_resync:
      return PI_REASSEMBLE;
    default:
      return PI_PROTOCOL;
  }
}

// The expert severity of an anomaly kind.
int anomaly_expert_severity(AnomalyKind kind) {
  int severity = PI_WARN;
  switch (decode::severity_of(kind)) {
    case decode::Severity::error: severity = PI_ERROR; break;
    case decode::Severity::warning: severity = PI_WARN; break;
    case decode::Severity::note: severity = PI_NOTE; break;
  }
  // The normal recovery signals: a NAK asking for a resend, an RNR NAK, the resend itself.
  if (kind == AnomalyKind::nak_psn_seq_error || kind == AnomalyKind::rnr_nak || kind == AnomalyKind::retransmission)
    severity = PI_NOTE;
  return severity;
}

// One expert entry per kind of anomaly the analysis raises, named after it.
void register_anomaly_experts(expert_module_t* expert) {
  static std::array<ei_register_info, static_cast<std::size_t>(AnomalyKind::count_)> ei_kinds;
  for (std::size_t k = 0; k < ei_kinds.size(); ++k) {
    const auto kind = static_cast<AnomalyKind>(k);
    const std::string_view name = decode::to_string(kind);
    const int group = anomaly_expert_group(kind);
    const int severity = anomaly_expert_severity(kind);
    ei_anomaly[k] = EI_INIT;
    const char* summary = anomaly_summary(kind);
    ei_kinds[k] = ei_register_info{&ei_anomaly[k],
                                   {g_strdup_printf("rdmadiag.anomaly.%.*s", static_cast<int>(name.size()), name.data()),
                                    group, severity,
                                    summary, EXPFILL}};
  }
  expert_register_field_array(expert, ei_kinds.data(), static_cast<int>(ei_kinds.size()));
}

void register_preferences() {
  module_t* prefs = prefs_register_protocol(proto_rdmadiag, apply_prefs);
  prefs_register_bool_preference(prefs, "analysis", "Run the PSN / sequence analysis",
                                 "Off: only CRC checks and header decode (faster on huge captures)", &pref_analysis);
  range_convert_str(wmem_epan_scope(), &pref_roce_ports, "", 65535);
  prefs_register_range_preference(prefs, "roce_ports", "Extra RoCEv2 UDP ports",
                                  "UDP destination ports carrying RoCEv2 besides 4791 (up to 8)", &pref_roce_ports,
                                  65535);
  prefs_register_bool_preference(prefs, "roce_heuristic", "Find RoCEv2 on any UDP port",
                                 "Try RoCEv2 on every UDP packet; a valid ICRC confirms it", &pref_roce_heuristic);
  prefs_register_uint_preference(prefs, "pmtu", "Path MTU (0: infer)",
                                 "Path MTU in bytes (256, 512, 1024, 2048 or 4096) for RDMA READ PSN reservations and "
                                 "FIRST/MIDDLE payload checks; 0 infers it from the trace (CM REQ, segment sizes)",
                                 10, &pref_pmtu);
  prefs_register_uint_preference(prefs, "link_speed_mbps", "Link speed in Mb/s (0: unknown)",
                                 "Turns PAUSE/PFC quanta into time for the pause analysis (storms, as rdmadiag analyze "
                                 "--link-speed); 0: pause times unknown",
                                 10, &pref_link_mbps);
}

void register_protocol() {
  proto_rdmadiag = proto_register_protocol("rdmadiag RDMA analysis", "rdmadiag", "rdmadiag");
  register_crc_fields();
  register_header_fields();
  register_congestion_fields();
  register_sequence_fields();
  register_nvme_fields();
  register_pairing_fields();
  register_iwarp_fields();
  static gint* ett[] = {&ett_rdmadiag, &ett_bth, &ett_analysis, &ett_iwarp, &ett_crc};
  proto_register_subtree_array(ett, array_length(ett));

  register_anomaly_experts(register_experts());
  register_preferences();

  frame_records = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), g_direct_hash, g_direct_equal);
  register_init_routine(init_file_state);
  register_cleanup_routine(cleanup_file_state);
  register_postseq_cleanup_routine(first_pass_done);
}

void register_handoff() {
  dissector_handle_t handle = create_dissector_handle(dissect_rdmadiag, proto_rdmadiag);
  register_postdissector(handle);
}

}  // namespace

void plugin_register(void) {
  static proto_plugin plugin;
  plugin.register_protoinfo = register_protocol;
  plugin.register_handoff = register_handoff;
  proto_register_plugin(&plugin);
}
