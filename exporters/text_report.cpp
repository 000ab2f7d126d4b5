#include "exporters/text_report.h"

#include "exporters/analysis_report.h"
#include "exporters/iwarp_json.h"
#include "exporters/congestion_report.h"
#include "exporters/pfc_report.h"
#include "exporters/text_format.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {
const char* transport_label(Transport t) {
  switch (t) {
    case Transport::ib: return "IB";
    case Transport::roce_v1: return "RoCEv1";
    case Transport::roce_v2: return "RoCEv2";
    case Transport::iwarp: return "iWARP";
    case Transport::other: return "other";
  }
  return "?";
}

std::string human_bytes(std::uint64_t b) {
  if (b >= 10ULL << 30) return fmt("%.1f GiB", static_cast<double>(b) / (1ULL << 30));
  if (b >= 10ULL << 20) return fmt("%.1f MiB", static_cast<double>(b) / (1ULL << 20));
  if (b >= 10ULL << 10) return fmt("%.1f KiB", static_cast<double>(b) / (1ULL << 10));
  return fmt("%llu B", static_cast<unsigned long long>(b));
}
}  // namespace

std::string packet_line(const DecodedPacket& p, std::uint64_t frame, double ts) {
  std::string s = fmt("%6llu %11.6f ", static_cast<unsigned long long>(frame), ts);
  const std::string src = src_address(p), dst = dst_address(p);
  if (!src.empty()) s += src + " -> " + dst + " ";
  s += transport_label(p.transport);
  if (p.mac_control) {
    s += ' ';  // not " " + text: GCC 12 warns falsely (-Wrestrict) on that once inlined
    s += mac_control_text(p);
  } else if (!p.has_bth) {
    if (p.tcp) s += fmt(" TCP %u -> %u len=%u", p.tcp->src_port, p.tcp->dst_port, p.tcp_payload_len);
    else if (p.udp) s += fmt(" UDP %u -> %u len=%u", p.udp->src_port, p.udp->dst_port, p.udp->length);
  } else {
    const IbTransport& t = p.ib;
    s += " ";
    s += opcode_info(t.bth.opcode).name;
    s += fmt(" QP=0x%06x PSN=%u", t.bth.dest_qp, t.bth.psn);
    if (t.bth.ack_req) s += " A";
    if (t.bth.solicited_event) s += " SE";
    if (t.bth.fecn) s += " FECN";
    if (t.bth.becn) s += " BECN";
    if (t.has(kReth)) s += fmt(" RETH(va=0x%llx rkey=0x%x len=%u)", static_cast<unsigned long long>(t.reth.va), t.reth.rkey, t.reth.dma_len);
    if (t.has(kAeth)) {
      s += fmt(" AETH(%.*s", static_cast<int>(t.aeth.kind_name().size()), t.aeth.kind_name().data());
      if (t.aeth.kind() == AethKind::rnr_nak) s += fmt(" %.2fms", t.aeth.rnr_timer_ms());
      s += fmt(" msn=%u)", t.aeth.msn);
    }
    if (t.has(kDeth)) s += fmt(" DETH(qkey=0x%x srcqp=0x%x)", t.deth.qkey, t.deth.src_qp);
    if (t.has(kAtomicEth)) s += fmt(" AtomicETH(va=0x%llx rkey=0x%x)", static_cast<unsigned long long>(t.atomic_eth.va), t.atomic_eth.rkey);
    if (t.has(kImmDt)) s += fmt(" imm=0x%08x", t.immediate);
    if (t.has(kIeth)) s += fmt(" inval_rkey=0x%x", t.invalidate_rkey);
    if (p.payload_len) s += fmt(" len=%u", p.payload_len);
    if (p.cm) {
      s += " CM ";
      s += to_string(p.cm->type);
      if (p.cm->type == CmMessageType::req || p.cm->type == CmMessageType::rep)
        s += fmt(" qpn=0x%06x psn=%u", p.cm->local_qpn, p.cm->starting_psn);
    } else if (p.mad) {
      s += " MAD ";
      s += mgmt_class_name(p.mad->mgmt_class);
    }
  }
  if (p.icrc != CrcStatus::not_present) s += std::string(" ICRC ") + std::string(to_string(p.icrc));
  if (p.vcrc != CrcStatus::not_present) s += std::string(" VCRC ") + std::string(to_string(p.vcrc));
  for (const Diagnostic& d : p.diags) {
    if (d.code == DiagCode::icrc_bad || d.code == DiagCode::vcrc_bad) continue;
    s += " [";
    s += to_string(d.code);
    s += "]";
  }
  return s;
}

std::string packet_line(const DecodedPacket& p, const PacketAnalysis& a, std::uint64_t frame, double ts) {
  std::string s = packet_line(p, frame, ts);
  if (!a.iwarp.empty()) {
    // iWARP framing lives in the TCP stream: show the units that ended in this frame.
    const std::size_t at = s.find(" other TCP ");
    if (at != std::string::npos) s.replace(at, 6, " iWARP");
    s += ' ';
    s += iwarp_packet_text(a.iwarp);
  }
  if (a.gap) s += fmt(" [gap: %u PSN missing]", a.gap);
  if (a.duplicate) s += " [duplicate]";
  if (a.out_of_order) s += " [out of order]";
  if (a.retransmission) s += a.spurious_retransmission ? " [spurious retransmission]" : " [retransmission]";
  if (a.nak_gap_frame) s += fmt(" [answers gap at frame %llu]", static_cast<unsigned long long>(a.nak_gap_frame));
  if (a.request_frame) {
    s += fmt(" [request at frame %llu", static_cast<unsigned long long>(a.request_frame));
    if (a.latency_us >= 0) s += fmt(", %.1f us", a.latency_us);
    s += "]";
  }
  if (a.response_frame) s += fmt(" [response at frame %llu]", static_cast<unsigned long long>(a.response_frame));
  if (a.ecn_ce) s += " [ECN CE]";
  return s;
}

void write_text_summary(std::ostream& out, const AnalyzeReport& report) {
  for (const InputInfo& in : report.inputs) {
    if (!in.error.empty()) {
      out << "input " << in.path << ": ERROR " << in.error << "\n";
      continue;
    }
    out << "input " << in.path << ": " << in.records << " records, link type " << linktype_name(in.linktype)
        << " (" << in.linktype << ")";
    if (!in.stop_reason.empty()) out << ", INCOMPLETE: " << in.stop_reason;
    out << "\n";
  }
  if (!report.summary) return;
  const CaptureSummary& s = *report.summary;
  out << fmt("\n%llu packets, %s, %.6f s\n", static_cast<unsigned long long>(s.packets), human_bytes(s.bytes).c_str(),
             s.duration_s());
  out << "\nBy transport:\n";
  for (std::size_t i = 0; i < s.by_transport.size(); ++i) {
    if (!s.by_transport[i].packets) continue;
    out << fmt("  %-8s %10llu packets %12s\n", std::string(to_string(static_cast<Transport>(i))).c_str(),
               static_cast<unsigned long long>(s.by_transport[i].packets), human_bytes(s.by_transport[i].bytes).c_str());
  }
  std::vector<std::size_t> ops;
  for (std::size_t op = 0; op < 256; ++op)
    if (s.by_opcode[op].packets) ops.push_back(op);
  std::sort(ops.begin(), ops.end(), [&](auto a, auto b) { return s.by_opcode[a].packets > s.by_opcode[b].packets; });
  if (!ops.empty()) {
    out << "\nBy opcode:\n";
    for (auto op : ops) {
      const auto name = opcode_info(static_cast<std::uint8_t>(op)).name;
      out << fmt("  0x%02zx %-34.*s %10llu packets %12s\n", op, static_cast<int>(name.size()), name.data(),
                 static_cast<unsigned long long>(s.by_opcode[op].packets), human_bytes(s.by_opcode[op].bytes).c_str());
    }
  }
  out << fmt("\nQueue pairs seen: %zu%s\n", s.queue_pairs(), s.queue_pairs_capped() ? " (tracking capped)" : "");
  if (s.mads) out << fmt("MADs: %llu (CM messages: %llu)\n", static_cast<unsigned long long>(s.mads), static_cast<unsigned long long>(s.cm_messages));
  const auto crc_line = [&](const char* name, const CrcCounts& c) {
    out << fmt("%s: %llu ok, %llu bad, %llu unverifiable (snap length)\n", name, static_cast<unsigned long long>(c.ok),
               static_cast<unsigned long long>(c.bad), static_cast<unsigned long long>(c.unverifiable));
  };
  crc_line("ICRC", s.icrc);
  if (const std::uint64_t n = report.analyzer ? report.analyzer->transport().icrc_not_wire_packets() : 0)
    out << fmt("  of the bad, %llu not the wire's: a sender whose ICRCs the capture sees before they are computed "
               "(icrc_not_wire below), not corruption\n", static_cast<unsigned long long>(n));
  if (s.vcrc.ok + s.vcrc.bad + s.vcrc.unverifiable) crc_line("VCRC", s.vcrc);
  bool any = false;
  for (std::size_t i = 0; i < s.diags.size(); ++i) {
    const DiagSummary& d = s.diags[i];
    if (!d.count) continue;
    if (!any) out << "\nDiagnostics:\n";
    any = true;
    std::string frames;
    for (std::size_t k = 0; k < d.first_count; ++k) frames += (k ? ", " : "") + std::to_string(d.first_frames[k]);
    out << fmt("  %-8s %-26s %8llu  first frames: %s%s\n", std::string(to_string(d.severity)).c_str(),
               std::string(to_string(static_cast<DiagCode>(i))).c_str(), static_cast<unsigned long long>(d.count),
               frames.c_str(), d.count > d.first_count ? ", ..." : "");
  }
  if (!any) out << "\nDiagnostics: none\n";
  if (report.analyzer) {
    write_flow_table(out, report.analyzer->transport());
    write_problems(out, *report.analyzer);
    write_iwarp_text(out, report.analyzer->iwarp());
    write_pfc_text(out, report.analyzer->pfc());
    write_congestion_text(out, report.analyzer->congestion());
  }
}

}  // namespace rdmadiag::exporters
