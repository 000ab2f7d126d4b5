#include "exporters/iwarp_json.h"
#include "exporters/text_format.h"

#include <cstdio>

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {
Json ddp_json(const DdpHeader& d) {
  Json j;
  j["tagged"] = d.tagged;
  j["last"] = d.last;
  j["version"] = d.version;
  if (d.tagged) {
    j["stag"] = hex(d.stag, 8);
    j["to"] = hex(d.to, 16);
  } else {
    j["qn"] = d.qn;
    j["msn"] = d.msn;
    j["mo"] = d.mo;
  }
  return j;
}

Json read_request_json(const RdmaReadRequest& r, Json j) {
  j["sink_stag"] = hex(r.sink_stag, 8);
  j["sink_to"] = hex(r.sink_to, 16);
  j["read_size"] = r.read_size;
  j["src_stag"] = hex(r.src_stag, 8);
  j["src_to"] = hex(r.src_to, 16);
  return j;
}

Json rdmap_json(const DdpSegment& s) {
  const std::uint8_t op = s.ddp.opcode();
  Json j;
  j["version"] = s.ddp.rdmap_version();
  j["opcode"] = op;
  j["opcode_name"] = rdmap_opcode_name(op);
  if (op == 4 || op == 6) j["inval_stag"] = hex(s.ddp.ulp, 8);
  if (s.has_read_request) j = read_request_json(s.read, j);
  if (s.has_terminate) {
    const RdmapTerminate& t = s.term;
    j["term_layer"] = t.layer;
    j["term_layer_name"] = terminate_layer_name(t.layer);
    j["term_etype"] = t.error_type;
    j["term_errcode"] = t.error_code;
    j["term_error"] = terminate_error_name(t.layer, t.error_type, t.error_code);
    j["term_hdrct"] = {{"m", t.hdr_m}, {"d", t.hdr_d}, {"r", t.hdr_r}};
    if (t.has_ddp) {
      Json d = ddp_json(t.ddp);
      d["segment_length"] = t.ddp_segment_length;
      d["rdmap_opcode"] = t.ddp.opcode();
      d["rdmap_opcode_name"] = rdmap_opcode_name(t.ddp.opcode());
      j["terminated_ddp"] = d;
    }
    if (t.has_rdma) j["terminated_rdmap"] = read_request_json(t.rdma, Json::object());
  }
  if (s.has_immediate) j["immediate"] = hex(s.immediate, 16);
  if (s.has_atomic_request) {
    const AtomicRequest& a = s.atomic;
    j["atomic"] = {{"aopcode", a.aopcode}, {"request_id", a.request_id}, {"remote_stag", hex(a.remote_stag, 8)},
                   {"remote_to", hex(a.remote_to, 16)}, {"add_swap", hex(a.add_swap, 16)},
                   {"add_swap_mask", hex(a.add_swap_mask, 16)}, {"compare", hex(a.compare, 16)},
                   {"compare_mask", hex(a.compare_mask, 16)}};
  }
  if (s.has_atomic_response)
    j["atomic_response"] = {{"request_id", s.atomic_resp.request_id}, {"original_value", hex(s.atomic_resp.original_value, 16)}};
  j["payload_len"] = s.payload_len;
  return j;
}

std::string crc_counts_text(const IwarpCrcCounts& c) {
  return fmt("%llu ok, %llu bad, %llu unverifiable, %llu not negotiated", static_cast<unsigned long long>(c.ok),
             static_cast<unsigned long long>(c.bad), static_cast<unsigned long long>(c.unverifiable),
             static_cast<unsigned long long>(c.not_negotiated));
}

Json crc_counts_json(const IwarpCrcCounts& c) {
  return {{"ok", c.ok}, {"bad", c.bad}, {"unverifiable", c.unverifiable}, {"not_negotiated", c.not_negotiated}};
}

std::string flow_address(const IwarpFlowInfo& f, bool source) {
  const auto& a = source ? f.src : f.dst;
  const std::uint16_t port = source ? f.src_port : f.dst_port;
  if (!f.ipv6) return fmt("%u.%u.%u.%u:%u", a[12], a[13], a[14], a[15], port);
  std::string s = "[";
  for (int i = 0; i < 16; i += 2) s += fmt(i ? ":%x" : "%x", a[i] << 8 | a[i + 1]);
  return s + fmt("]:%u", port);
}
}  // namespace

Json iwarp_pdu_json(const IwarpPdu& u, std::uint64_t frame) {
  Json j;
  j["flow"] = u.flow;
  j["seq"] = u.seq;
  if (u.end_frame && u.end_frame != frame) j["end_frame"] = u.end_frame;
  if (u.kind != IwarpPdu::Kind::fpdu) {
    const MpaNegotiation& m = u.negotiation;
    Json n = {{"type", u.kind == IwarpPdu::Kind::mpa_request ? "request" : "reply"},
              {"marker", m.marker}, {"crc", m.crc}, {"reject", m.reject}, {"res", m.res},
              {"revision", m.revision}, {"pd_length", m.pd_length}};
    if (m.enhanced)
      n["enhanced"] = {{"ird", m.ird}, {"ord", m.ord}, {"peer_to_peer", m.peer_to_peer},
                       {"zero_length_rtr", m.zero_length_rtr}, {"rtr_write", m.rtr_write}, {"rtr_read", m.rtr_read}};
    j["mpa_negotiation"] = n;
    return j;
  }
  j["mpa"] = {{"ulpdu_len", u.ulpdu_len}, {"pad", u.pad}, {"crc", hex(u.crc, 8)},
              {"crc_status", to_string(u.crc_status)}, {"markers", u.markers}};
  if (u.crc_status == MpaCrcStatus::bad) j["mpa"]["crc_computed"] = hex(u.crc_computed, 8);
  if (u.header_decoded) {
    j["ddp"] = ddp_json(u.seg.ddp);
    j["rdmap"] = rdmap_json(u.seg);
  }
  if (u.request_frame) j["request_frame"] = u.request_frame;
  if (u.latency_us >= 0) j["latency_us"] = u.latency_us;
  if (u.resync) j["resync"] = true;
  return j;
}

void add_iwarp_packet_json(const IwarpFrame& f, std::uint64_t frame, Json& packet) {
  if (f.empty()) return;
  packet["transport"] = "iwarp";
  Json a = Json::array();
  for (const IwarpPdu& u : f) a.push_back(iwarp_pdu_json(u, frame));
  packet["iwarp"] = std::move(a);
  if (f.overflow) packet["iwarp_not_listed"] = f.overflow;
}

Json iwarp_report_json(const IwarpAnalyzer& an) {
  const IwarpStats& s = an.stats();
  Json j;
  j["connections"] = s.connections;
  j["negotiated"] = s.negotiated;
  j["rejected"] = s.rejected;
  if (s.retired_at_cap) j["connections_retired_at_cap"] = s.retired_at_cap;
  j["frames"] = s.frames;
  j["fpdus"] = s.fpdus;
  j["crc"] = crc_counts_json(s.crc);
  j["markers"] = s.markers;
  j["resyncs"] = s.resyncs;
  Json ops = Json::object();
  for (std::size_t op = 0; op < s.by_opcode.size(); ++op)
    if (s.by_opcode[op])
      ops[std::string(rdmap_opcode_name(static_cast<std::uint8_t>(op)))] = {
          {"opcode", op}, {"fpdus", s.by_opcode[op]}, {"payload_bytes", s.bytes_by_opcode[op]}};
  j["by_opcode"] = ops;
  Json rl = {{"count", s.reads_matched}};
  if (s.reads_matched) {
    rl["min_us"] = s.read_latency_min_us;
    rl["avg_us"] = s.read_latency_sum_us / static_cast<double>(s.reads_matched);
    rl["max_us"] = s.read_latency_max_us;
  }
  j["read_latency"] = rl;
  j["atomics_matched"] = s.atomics_matched;
  j["tcp"] = {{"holes_recovered", s.tcp_holes_recovered}, {"holes_lost", s.tcp_holes_lost},
              {"bytes_lost", s.tcp_bytes_lost}, {"retransmitted_segments", s.tcp_retransmitted_segments}};
  Json flows = Json::array();
  for (std::size_t i = 0; i < an.flows().size(); ++i) {
    const IwarpFlowInfo& f = an.flows()[i];
    flows.push_back({{"index", i}, {"src", flow_address(f, true)}, {"dst", flow_address(f, false)},
                     {"first_frame", f.first_frame}, {"initiator", f.initiator}, {"negotiated", f.negotiated},
                     {"rejected", f.rejected}, {"markers", f.markers}, {"crc", f.crc}, {"crc_inferred", f.crc_inferred},
                     {"resyncs", f.resyncs}, {"fpdus", f.fpdus}, {"payload_bytes", f.payload_bytes},
                     {"crc_counts", crc_counts_json(f.crc_counts)},
                     {"tcp", {{"segments", f.tcp.segments}, {"bytes", f.tcp.bytes},
                              {"retransmitted_segments", f.tcp.retransmitted_segments},
                              {"out_of_order_segments", f.tcp.out_of_order_segments},
                              {"holes_recovered", f.tcp.holes_recovered}, {"holes_lost", f.tcp.holes_lost},
                              {"bytes_lost", f.tcp.bytes_lost}}}});
    if (f.point) flows.back()["capture_point"] = f.point - 1;
  }
  j["flows"] = flows;
  return j;
}

std::string iwarp_packet_text(const IwarpFrame& f) {
  std::string s;
  for (const IwarpPdu& u : f) {
    if (u.kind != IwarpPdu::Kind::fpdu) {
      const MpaNegotiation& m = u.negotiation;
      s += fmt(" MPA %s rev=%u%s%s%s", u.kind == IwarpPdu::Kind::mpa_request ? "Request" : "Reply", m.revision,
               m.marker ? " M" : "", m.crc ? " C" : "", m.reject ? " REJECT" : "");
      if (m.enhanced) s += fmt(" IRD=%u ORD=%u", m.ird, m.ord);
      continue;
    }
    s += " |";
    if (!u.header_decoded) {
      s += fmt(" FPDU len=%u (headers not captured)", u.ulpdu_len);
      continue;
    }
    const DdpHeader& d = u.seg.ddp;
    const auto name = rdmap_opcode_name(d.opcode());
    s += fmt(" %.*s", static_cast<int>(name.size()), name.data());
    if (d.tagged) s += fmt(" STag=0x%08x TO=0x%llx", d.stag, static_cast<unsigned long long>(d.to));
    else s += fmt(" QN=%u MSN=%u MO=%u", d.qn, d.msn, d.mo);
    if (d.last) s += " L";
    if (u.seg.has_read_request)
      s += fmt(" sink=0x%08x@0x%llx size=%u", u.seg.read.sink_stag, static_cast<unsigned long long>(u.seg.read.sink_to),
               u.seg.read.read_size);
    if (u.seg.has_terminate) {
      const auto e = terminate_error_name(u.seg.term.layer, u.seg.term.error_type, u.seg.term.error_code);
      s += fmt(" %.*s: %.*s", static_cast<int>(terminate_layer_name(u.seg.term.layer).size()),
               terminate_layer_name(u.seg.term.layer).data(), static_cast<int>(e.size()), e.data());
    }
    s += fmt(" len=%u", u.seg.payload_len);
    if (u.crc_status != MpaCrcStatus::not_negotiated) s += std::string(" CRC ") + std::string(to_string(u.crc_status));
    if (u.latency_us >= 0) s += fmt(" (%.1f us after frame %llu)", u.latency_us, static_cast<unsigned long long>(u.request_frame));
    if (u.resync) s += " [resync]";
  }
  if (f.overflow) s += fmt(" | +%u more", f.overflow);
  return s;
}

void add_iwarp_anomaly_fields(const Anomaly& a, Json& j) {
  switch (a.kind) {
    case AnomalyKind::ddp_msn_gap:
      j["qn"] = a.dest_qp;
      j["msn"] = a.psn;
      j["expected_msn"] = a.expected_psn;
      break;
    case AnomalyKind::ddp_mo_discontinuity:
      j["qn"] = a.dest_qp;
      j["msn"] = a.psn;
      j["mo"] = a.count;
      j["expected_mo"] = a.expected_psn;
      return;  // count is the MO
    case AnomalyKind::ddp_to_discontinuity:
      j["stag"] = a.psn;
      j["expected_stag"] = a.expected_psn;
      j["to_offset"] = static_cast<std::int32_t>(a.count);
      return;
    case AnomalyKind::rdmap_read_size_mismatch:
      j["read_size"] = a.expected_psn;
      break;
    case AnomalyKind::tcp_hole:
      j["tcp_seq"] = a.psn;
      if (a.duration_us >= 0) {
        const auto fill = static_cast<TcpGapFill>(a.expected_psn);
        j["fill"] = fill == TcpGapFill::retransmission ? "retransmission"
                    : fill == TcpGapFill::reordering   ? "reordering"
                    : fill == TcpGapFill::corruption   ? "corruption"
                                                       : "unknown";
      }
      break;
    default:
      break;
  }
  if (a.count) j["count"] = a.count;
}

namespace {
// A tcp_hole: given up, or filled (by what, as TcpGapFill says).
std::string explain_tcp_hole(const Anomaly& a, const std::string& who, unsigned long long fr, unsigned long long rel) {
  const std::string bytes = fmt("TCP sequence %u..%u (%u bytes)", a.psn, a.psn + a.count - 1, a.count);
  if (a.duration_us < 0)
    return fmt("%s %s missing before frame %llu: never seen in this capture; FPDU boundaries found again after it",
               who.c_str(), bytes.c_str(), fr);
  switch (static_cast<TcpGapFill>(a.expected_psn)) {
    case TcpGapFill::retransmission:
      return fmt("%s %s missing at frame %llu (lost before the capture point), retransmitted in frame %llu after %.0f us",
                 who.c_str(), bytes.c_str(), fr, rel, a.duration_us);
    case TcpGapFill::reordering:
      return fmt("%s %s arrived late in frame %llu, %.0f us after frame %llu carried bytes beyond them (reordered on the path: its IP ID is older)",
                 who.c_str(), bytes.c_str(), rel, a.duration_us, fr);
    case TcpGapFill::corruption:
      return fmt("%s %s captured damaged in frame %llu (a bit error in its TCP port: the checksum holds with this "
                 "connection's port), so its receiver dropped it; missing at frame %llu, retransmitted in frame %llu after %.0f us",
                 who.c_str(), bytes.c_str(), static_cast<unsigned long long>(a.related[a.related_count - 1]), fr, rel,
                 a.duration_us);
    case TcpGapFill::unknown: break;
  }
  return fmt("%s %s missing at frame %llu, filled by frame %llu after %.0f us (a retransmission or a late segment: no IPv4 ID tells which)",
             who.c_str(), bytes.c_str(), fr, rel, a.duration_us);
}
}  // namespace

std::string explain_iwarp(const Anomaly& a, const IwarpAnalyzer& iw) {
  std::string who = "iWARP";
  if (a.flow < iw.flows().size())
    who.append(" ").append(flow_address(iw.flows()[a.flow], true)).append(" -> ").append(flow_address(iw.flows()[a.flow], false))
        .append(point_label(iw.flows()[a.flow].point));
  const auto fr = static_cast<unsigned long long>(a.frame);
  const unsigned long long rel = a.related_count ? a.related[0] : 0;
  switch (a.kind) {
    case AnomalyKind::tcp_hole:
      return explain_tcp_hole(a, who, fr, rel);
    case AnomalyKind::mpa_crc_bad:
      return fmt("%s MPA CRC32c bad at frame %llu: the FPDU was corrupted; the receiver terminates the connection", who.c_str(), fr);
    case AnomalyKind::mpa_bad_framing:
      if (a.count)
        return fmt("%s MPA framing broken at frame %llu: %u marker%s not holding the distance back to the FPDU's header",
                   who.c_str(), fr, a.count, a.count == 1 ? "" : "s");
      return fmt("%s MPA framing broken at frame %llu: an impossible ULPDU length or DDP/RDMAP header; FPDU boundaries are searched for again",
                 who.c_str(), fr);
    case AnomalyKind::mpa_marker_stride:
      if (a.count)
        return fmt("%s MPA markers every %u octets of the TCP stream, not every 512 (RFC 5044 section 4.3), from frame %llu; FPDUs decoded with that stride",
                   who.c_str(), a.count, fr);
      return fmt("%s MPA markers negotiated but not every 512 octets of the TCP stream (RFC 5044 section 4.3), from frame %llu; no stride found, FPDU boundaries searched for without them",
                 who.c_str(), fr);
    case AnomalyKind::ddp_msn_gap: {
      const auto q = ddp_queue_name(a.dest_qp);
      const auto want = static_cast<std::uint32_t>(a.expected_psn);
      if (static_cast<std::int32_t>(a.psn - want) > 0)
        return fmt("%s DDP queue %u (%.*s) MSN %u at frame %llu where MSN %u was next: MSN %s never sent on this queue (the TCP stream before it is complete at the capture point)",
                   who.c_str(), a.dest_qp, static_cast<int>(q.size()), q.data(), a.psn, fr, want,
                   a.psn - want == 1 ? fmt("%u", want).c_str() : fmt("%u..%u", want, a.psn - 1).c_str());
      return fmt("%s DDP queue %u (%.*s) MSN %u at frame %llu where MSN %u was next: a message number used again on this queue",
                 who.c_str(), a.dest_qp, static_cast<int>(q.size()), q.data(), a.psn, fr, want);
    }
    case AnomalyKind::ddp_mo_discontinuity: {
      const auto q = ddp_queue_name(a.dest_qp);
      return fmt("%s DDP queue %u (%.*s) MSN %u at frame %llu: message offset %u where %llu was next",
                 who.c_str(), a.dest_qp, static_cast<int>(q.size()), q.data(), a.psn, fr, a.count,
                 static_cast<unsigned long long>(a.expected_psn));
    }
    case AnomalyKind::ddp_to_discontinuity: {
      const auto off = static_cast<std::int32_t>(a.count);
      const auto want = static_cast<std::uint32_t>(a.expected_psn);
      std::string s = a.related_count ? fmt("%s RDMA Read Response at frame %llu", who.c_str(), fr)
                                      : fmt("%s RDMA Write at frame %llu", who.c_str(), fr);
      if (a.psn != want) s += fmt(" to STag 0x%08x, not 0x%08x", a.psn, want);
      if (off) s += fmt(" at a tagged offset %+d bytes from where %s", off, a.related_count ? "it should continue" : "the message's previous segment ended");
      if (a.related_count) s += fmt(" (Read Request at frame %llu)", rel);
      return s;
    }
    case AnomalyKind::rdmap_terminate:
      return fmt("%s RDMAP Terminate at frame %llu: %s layer, error type %u, code 0x%02x (%s)", who.c_str(), fr,
                 std::string(terminate_layer_name(static_cast<std::uint8_t>(a.count >> 16))).c_str(), (a.count >> 8) & 0xFF,
                 a.count & 0xFF,
                 std::string(terminate_error_name(static_cast<std::uint8_t>(a.count >> 16), static_cast<std::uint8_t>(a.count >> 8),
                                                  static_cast<std::uint8_t>(a.count)))
                     .c_str());
    case AnomalyKind::iwarp_resync:
      return fmt("%s FPDU boundary found without the MPA negotiation at frame %llu (%u bytes skipped)", who.c_str(), fr, a.count);
    case AnomalyKind::rdmap_read_response_unmatched:
      return fmt("%s RDMA Read Response at frame %llu without an outstanding RDMA Read Request on this connection", who.c_str(), fr);
    case AnomalyKind::rdmap_read_size_mismatch:
      return fmt("%s RDMA Read Response ends at frame %llu after %u bytes; the RDMA Read Request at frame %llu asked for %llu",
                 who.c_str(), fr, a.count, rel, static_cast<unsigned long long>(a.expected_psn));
    default:
      return fmt("%s %s at frame %llu", who.c_str(), std::string(to_string(a.kind)).c_str(), fr);
  }
}

void write_iwarp_text(std::ostream& out, const IwarpAnalyzer& an) {
  const IwarpStats& s = an.stats();
  if (!s.connections && !s.fpdus) return;
  out << fmt("\niWARP: %llu connection%s (%llu with MPA negotiation, %llu rejected), %llu FPDUs in %llu frames\n",
             static_cast<unsigned long long>(s.connections), s.connections == 1 ? "" : "s",
             static_cast<unsigned long long>(s.negotiated), static_cast<unsigned long long>(s.rejected),
             static_cast<unsigned long long>(s.fpdus), static_cast<unsigned long long>(s.frames));
  out << "  MPA CRC32c: " << crc_counts_text(s.crc) << "\n";
  if (s.markers) out << fmt("  markers removed: %llu\n", static_cast<unsigned long long>(s.markers));
  if (s.retired_at_cap)
    out << fmt("  (%llu connections retired while active: over %zu live connections; a later segment of one starts a new connection)\n",
               static_cast<unsigned long long>(s.retired_at_cap), IwarpAnalyzer::kMaxConnections);
  if (s.resyncs)
    out << fmt("  FPDU boundaries found without the negotiation (resync): %llu time%s\n",
               static_cast<unsigned long long>(s.resyncs), s.resyncs == 1 ? "" : "s");
  for (std::size_t op = 0; op < s.by_opcode.size(); ++op) {
    if (!s.by_opcode[op]) continue;
    const auto name = rdmap_opcode_name(static_cast<std::uint8_t>(op));
    out << fmt("  %2zu %-42.*s %10llu FPDUs %12llu payload bytes\n", op, static_cast<int>(name.size()), name.data(),
               static_cast<unsigned long long>(s.by_opcode[op]), static_cast<unsigned long long>(s.bytes_by_opcode[op]));
  }
  if (s.reads_matched)
    out << fmt("  RDMA Read latency (request -> last response at the capture point): %llu reads, min %.1f / avg %.1f / max %.1f us\n",
               static_cast<unsigned long long>(s.reads_matched), s.read_latency_min_us,
               s.read_latency_sum_us / static_cast<double>(s.reads_matched), s.read_latency_max_us);
  if (s.tcp_holes_recovered + s.tcp_holes_lost)
    out << fmt("  TCP holes: %llu filled later (retransmitted or reordered: see the problems), %llu never filled (%llu bytes lost to the capture)\n",
               static_cast<unsigned long long>(s.tcp_holes_recovered), static_cast<unsigned long long>(s.tcp_holes_lost),
               static_cast<unsigned long long>(s.tcp_bytes_lost));
  for (std::size_t i = 0; i < an.flows().size(); ++i) {
    const IwarpFlowInfo& f = an.flows()[i];
    out << fmt("  [%zu] %s -> %s%s %s%s%s: %llu FPDUs, CRC %s\n", i, flow_address(f, true).c_str(),
               flow_address(f, false).c_str(), point_label(f.point).c_str(), f.negotiated ? (f.initiator ? "initiator" : "responder") : "mid-stream",
               f.markers ? ", markers" : "", f.crc ? (f.crc_inferred ? ", CRC (inferred)" : ", CRC") : "",
               static_cast<unsigned long long>(f.fpdus), crc_counts_text(f.crc_counts).c_str());
  }
}

}  // namespace rdmadiag::exporters
