#include "exporters/json_report.h"

#include "decode/transport_analysis.h"
#include "exporters/analysis_report.h"
#include "exporters/iwarp_json.h"
#include "exporters/congestion_report.h"
#include "exporters/pfc_report.h"

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {

Json diagnostics_json(const DiagList& diags) {
  Json a = Json::array();
  for (const Diagnostic& d : diags)
    a.push_back({{"code", to_string(d.code)}, {"severity", to_string(d.severity)}, {"offset", d.offset}});
  return a;
}

void ib_headers_json(const DecodedPacket& p, Json& j) {
  const IbTransport& t = p.ib;
  const OpcodeInfo& info = opcode_info(t.bth.opcode);
  j["opcode"] = t.bth.opcode;
  j["opcode_name"] = info.name;
  j["service"] = to_string(info.service);
  j["se"] = t.bth.solicited_event;
  j["mig_req"] = t.bth.mig_req;
  j["pad_count"] = t.bth.pad_count;
  j["tver"] = t.bth.tver;
  j["pkey"] = t.bth.pkey;
  j["fecn"] = t.bth.fecn;
  j["becn"] = t.bth.becn;
  j["dest_qp"] = t.bth.dest_qp;
  j["ack_req"] = t.bth.ack_req;
  j["psn"] = t.bth.psn;
  if (t.has(kRdeth)) j["rdeth"] = {{"ee_context", t.rdeth_ee_context}};
  if (t.has(kDeth)) j["deth"] = {{"qkey", t.deth.qkey}, {"src_qp", t.deth.src_qp}};
  if (t.has(kXrceth)) j["xrceth"] = {{"xrc_srq", t.xrc_srq}};
  if (t.has(kFeth)) j["feth"] = {{"selectivity_level", t.feth.selectivity_level}, {"placement_type", t.feth.placement_type}};
  if (t.has(kReth)) j["reth"] = {{"va", t.reth.va}, {"rkey", t.reth.rkey}, {"dma_len", t.reth.dma_len}};
  if (t.has(kAtomicEth))
    j["atomic_eth"] = {{"va", t.atomic_eth.va}, {"rkey", t.atomic_eth.rkey},
                       {"swap_add", t.atomic_eth.swap_add}, {"compare", t.atomic_eth.compare}};
  if (t.has(kAeth)) {
    Json a = {{"syndrome", t.aeth.syndrome}, {"msn", t.aeth.msn}, {"kind", t.aeth.kind_name()}};
    switch (t.aeth.kind()) {
      case AethKind::ack: a["credits"] = t.aeth.value(); break;
      case AethKind::rnr_nak: a["rnr_timer_ms"] = t.aeth.rnr_timer_ms(); break;
      case AethKind::nak: a["nak_code"] = t.aeth.value(); break;
      case AethKind::reserved: break;
    }
    j["aeth"] = a;
  }
  if (t.has(kAtomicAckEth)) j["atomic_ack_eth"] = {{"orig_remote_data", t.atomic_ack_orig_data}};
  if (t.has(kImmDt)) j["imm"] = t.immediate;
  if (t.has(kIeth)) j["ieth"] = {{"rkey", t.invalidate_rkey}};
  j["payload_len"] = p.payload_len;
}

}  // namespace

Json packet_json(const DecodedPacket& p, std::uint64_t frame, double ts) {
  Json j;
  j["frame"] = frame;
  j["ts"] = ts;
  j["caplen"] = p.caplen;
  j["len"] = p.wirelen;
  j["transport"] = to_string(p.transport);
  const std::string src = src_address(p), dst = dst_address(p);
  if (!src.empty()) j["src"] = src;
  if (!dst.empty()) j["dst"] = dst;
  if (p.udp) j["udp"] = {{"src_port", p.udp->src_port}, {"dst_port", p.udp->dst_port}, {"length", p.udp->length}};
  if (p.tcp) j["tcp"] = {{"src_port", p.tcp->src_port}, {"dst_port", p.tcp->dst_port}, {"seq", p.tcp->seq},
                         {"ack", p.tcp->ack}, {"flags", p.tcp->flags}, {"payload_len", p.tcp_payload_len}};
  if (p.ipv4) j["ecn"] = p.ipv4->ecn;
  else if (p.ipv6) j["ecn"] = p.ipv6->ecn();
  if (p.mac_control) j["mac_control"] = mac_control_json(p);
  if (p.lrh)
    j["lrh"] = {{"vl", p.lrh->vl}, {"lver", p.lrh->lver}, {"sl", p.lrh->sl}, {"lnh", static_cast<int>(p.lrh->lnh)},
                {"dlid", p.lrh->dlid}, {"slid", p.lrh->slid}, {"pkt_len", p.lrh->pkt_len_words}};
  if (p.grh && p.transport != Transport::other)
    j["grh"] = {{"traffic_class", p.grh->traffic_class}, {"flow_label", p.grh->flow_label},
                {"payload_length", p.grh->payload_length}, {"next_header", p.grh->next_header},
                {"hop_limit", p.grh->hop_limit}};
  if (p.has_bth) ib_headers_json(p, j);
  if (p.mad) {
    j["mad"] = {{"mgmt_class", p.mad->mgmt_class}, {"class_name", mgmt_class_name(p.mad->mgmt_class)},
                {"method", p.mad->method}, {"response", p.mad->response}, {"status", p.mad->status},
                {"transaction_id", p.mad->transaction_id}, {"attribute_id", p.mad->attribute_id},
                {"attribute_name", attribute_name(p.mad->mgmt_class, p.mad->attribute_id)}};
  }
  if (p.cm) {
    Json c = {{"type", to_string(p.cm->type)}, {"local_comm_id", p.cm->local_comm_id}};
    if (p.cm->type != CmMessageType::req) c["remote_comm_id"] = p.cm->remote_comm_id;
    if (p.cm->type == CmMessageType::req || p.cm->type == CmMessageType::rep) {
      c["local_qpn"] = p.cm->local_qpn;
      c["starting_psn"] = p.cm->starting_psn;
    }
    if (p.cm->type == CmMessageType::req) {
      c["service_id"] = p.cm->service_id;
      c["transport_service"] = p.cm->transport_service;
      c["pkey"] = p.cm->pkey;
      c["path_mtu"] = p.cm->path_mtu;
    }
    if (p.cm->type == CmMessageType::dreq) c["remote_qpn"] = p.cm->local_qpn;
    if (p.cm->type == CmMessageType::rej) c["reason"] = p.cm->reject_reason;
    j["cm"] = c;
  }
  if (p.icrc != CrcStatus::not_present) {
    j["icrc"] = to_string(p.icrc);
    if (p.icrc != CrcStatus::unverifiable) {
      j["icrc_wire"] = hex(p.icrc_wire, 8);
      j["icrc_computed"] = hex(p.icrc_computed, 8);
    }
  }
  if (p.vcrc != CrcStatus::not_present) {
    j["vcrc"] = to_string(p.vcrc);
    if (p.vcrc != CrcStatus::unverifiable) {
      j["vcrc_wire"] = hex(p.vcrc_wire, 4);
      j["vcrc_computed"] = hex(p.vcrc_computed, 4);
    }
  }
  if (p.truncated) j["truncated"] = true;
  if (!p.diags.empty()) j["diagnostics"] = diagnostics_json(p.diags);
  return j;
}

Json summary_json(const CaptureSummary& s) {
  Json j;
  j["packets"] = s.packets;
  j["bytes"] = s.bytes;
  j["duration_s"] = s.duration_s();
  j["truncated_packets"] = s.truncated_packets;
  Json bt = Json::object();
  for (std::size_t i = 0; i < s.by_transport.size(); ++i)
    bt[std::string(to_string(static_cast<Transport>(i)))] = s.by_transport[i].packets;
  j["by_transport"] = bt;
  Json bt_bytes = Json::object();
  for (std::size_t i = 0; i < s.by_transport.size(); ++i)
    bt_bytes[std::string(to_string(static_cast<Transport>(i)))] = s.by_transport[i].bytes;
  j["bytes_by_transport"] = bt_bytes;
  Json bo = Json::object();
  for (std::size_t op = 0; op < s.by_opcode.size(); ++op) {
    if (!s.by_opcode[op].packets) continue;
    bo[std::string(opcode_info(static_cast<std::uint8_t>(op)).name)] = {
        {"opcode", op}, {"packets", s.by_opcode[op].packets}, {"bytes", s.by_opcode[op].bytes}};
  }
  j["by_opcode"] = bo;
  j["queue_pairs"] = s.queue_pairs();
  if (s.queue_pairs_capped()) j["queue_pairs_capped"] = true;
  j["icrc"] = {{"ok", s.icrc.ok}, {"bad", s.icrc.bad}, {"unverifiable", s.icrc.unverifiable}};
  j["vcrc"] = {{"ok", s.vcrc.ok}, {"bad", s.vcrc.bad}, {"unverifiable", s.vcrc.unverifiable}};
  j["mads"] = s.mads;
  j["cm_messages"] = s.cm_messages;
  Json d = Json::object();
  for (std::size_t i = 0; i < s.diags.size(); ++i) {
    const DiagSummary& ds = s.diags[i];
    if (!ds.count) continue;
    Json frames = Json::array();
    for (std::size_t k = 0; k < ds.first_count; ++k) frames.push_back(ds.first_frames[k]);
    d[std::string(to_string(static_cast<DiagCode>(i)))] = {
        {"count", ds.count}, {"severity", to_string(ds.severity)}, {"first_frames", frames}};
  }
  j["diagnostics"] = d;
  return j;
}

Json inputs_json(const std::vector<InputInfo>& inputs) {
  Json a = Json::array();
  for (const InputInfo& in : inputs) {
    Json j = {{"path", in.path}};
    if (!in.error.empty()) {
      j["error"] = in.error;
    } else {
      j["linktype"] = in.linktype;
      j["linktype_name"] = linktype_name(in.linktype);
      j["snaplen"] = in.snaplen;
      j["records"] = in.records;
      j["complete"] = in.stop_reason.empty();
      if (!in.stop_reason.empty()) j["stop_reason"] = in.stop_reason;
    }
    a.push_back(j);
  }
  return a;
}

JsonReportWriter::JsonReportWriter(std::ostream& out, bool with_packets) : out_(out), with_packets_(with_packets) {
  const std::string header = json_text(report_header_json());
  out_ << header.substr(0, header.size() - 1);  // the object left open: members follow
  if (with_packets_) out_ << ",\"packets\":[";
}

void JsonReportWriter::packet(const DecodedPacket& p, std::uint64_t frame, double ts) {
  if (!with_packets_) return;
  out_ << (first_packet_ ? "\n" : ",\n") << json_text(packet_json(p, frame, ts));
  first_packet_ = false;
}

void JsonReportWriter::packet(const DecodedPacket& p, const PacketAnalysis& a, std::uint64_t frame, double ts) {
  if (!with_packets_) return;
  Json j = packet_json(p, frame, ts);
  if (a.analysed) j["analysis"] = analysis_json(a);
  add_iwarp_packet_json(a.iwarp, frame, j);
  out_ << (first_packet_ ? "\n" : ",\n") << json_text(j);
  first_packet_ = false;
}

Json report_members_json(const AnalyzeReport& report, const Json& extra) {
  Json j = Json::object();
  j["inputs"] = inputs_json(report.inputs);
  if (report.summary) {
    Json summary = summary_json(*report.summary);
    if (report.analyzer) {
      const auto& log = report.analyzer->anomalies();
      Json by_kind = Json::object();
      for (std::size_t k = 0; k < static_cast<std::size_t>(AnomalyKind::count_); ++k)
        if (log.count(static_cast<AnomalyKind>(k))) by_kind[std::string(to_string(static_cast<AnomalyKind>(k)))] = log.count(static_cast<AnomalyKind>(k));
      summary["anomalies"] = {{"total", log.total()}, {"by_kind", by_kind}, {"listed", log.listed()}};
      summary["flows"] = report.analyzer->transport().flows().size();
      if (const std::uint64_t n = report.analyzer->transport().icrc_not_wire_packets()) summary["icrc"]["not_wire"] = n;
      if (report.analyzer->transport().evicted_flows()) summary["flows_evicted"] = report.analyzer->transport().evicted_flows();
      if (report.analyzer->transport().cap_retired_flows())
        summary["flows_retired_at_cap"] = report.analyzer->transport().cap_retired_flows();
    }
    j["summary"] = std::move(summary);
  }
  if (!report.capture_points.empty()) {
    Json points = Json::array();
    for (const CapturePoint& p : report.capture_points) points.push_back({{"interface", p.interface}, {"name", p.name}});
    j["capture_points"] = std::move(points);
  }
  if (report.analyzer) {
    j["flows"] = flows_json(report.analyzer->transport());
    j["anomalies"] = anomalies_json(*report.analyzer);
    j["iwarp"] = iwarp_report_json(report.analyzer->iwarp());
    if (report.analyzer->pfc().any()) j["pfc"] = pfc_json(report.analyzer->pfc(), report.analyzer->summary().first_ts);
    if (report.analyzer->congestion().any()) j["congestion"] = congestion_json(report.analyzer->congestion());
  }
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

Json report_json(const AnalyzeReport& report, const Json& extra) {
  Json j = report_header_json();
  const Json members = report_members_json(report, extra);
  for (auto it = members.begin(); it != members.end(); ++it) j[it.key()] = it.value();
  return j;
}

Json report_header_json() {
  return {{"schema_version", kAnalyzeSchemaVersion}, {"tool", "rdmadiag analyze"}};
}

void JsonReportWriter::finish(const AnalyzeReport& report, const Json& extra) {
  if (with_packets_) out_ << "\n]";
  const Json members = report_members_json(report, extra);
  for (auto it = members.begin(); it != members.end(); ++it) out_ << ",\n" << json_text(Json(it.key())) << ":" << json_text(it.value());
  out_ << "}\n";
  out_.flush();
}

}  // namespace rdmadiag::exporters
