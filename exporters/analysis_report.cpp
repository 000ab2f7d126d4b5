#include "exporters/analysis_report.h"

#include "exporters/iwarp_json.h"
#include "exporters/congestion_report.h"
#include "exporters/pfc_report.h"
#include "exporters/text_format.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {

const FlowSummary* flow_at(const TransportAnalyzer& t, std::uint32_t index) {
  const auto& flows = t.flows();
  auto it = std::lower_bound(flows.begin(), flows.end(), index, [](const FlowSummary& f, std::uint32_t i) { return f.index < i; });
  return it != flows.end() && it->index == index ? &*it : nullptr;
}

Json latency_json(const LatencyStats& l) {
  return {{"count", l.count()}, {"min", l.min()}, {"p50", l.percentile(50)}, {"p99", l.percentile(99)},
          {"max", l.max()}, {"mean", l.mean()}};
}

std::string psn_range(std::uint32_t first, std::uint32_t count) {
  if (count <= 1) return fmt("%u", first);
  return fmt("%u-%u", first, (first + count - 1) & kPsnMask);
}

const char* retransmission_cause(const Anomaly& a) {
  if (a.expected_psn == -2) return "ack_lost";
  if (a.cause == ResendCause::corrupt) return "corruption";
  if (a.cause == ResendCause::answer_corrupt) return "ack_corrupt";
  if (a.cause == ResendCause::response_loss) return "read_response_lost";
  if (a.cause == ResendCause::response_lost_after) return "read_response_lost_after_capture";
  if (a.cause == ResendCause::no_answer_captured) return "no_answer_captured";
  return a.related_count ? "nak_or_gap" : "timeout";
}

std::string frames(const Anomaly& a) {
  std::string s;
  for (std::size_t i = 0; i < a.related_count; ++i) s += (i ? ", " : "") + std::to_string(a.related[i]);
  return s;
}

}  // namespace

std::string address_string(const FlowKey& k, bool source) {
  const auto& a = source ? k.src : k.dst;
  char buf[64];
  if (k.addr_len == 4) return inet_ntop(AF_INET, a.data(), buf, sizeof buf) ? buf : "?";
  if (k.addr_len == 16) return inet_ntop(AF_INET6, a.data(), buf, sizeof buf) ? buf : "?";
  return fmt("LID %u", static_cast<unsigned>(a[0] << 8 | a[1]));
}

Json flows_json(const TransportAnalyzer& t) {
  Json arr = Json::array();
  for (const FlowSummary& f : t.flows()) {
    Json j;
    j["flow"] = f.index;
    j["transport"] = to_string(f.key.transport);
    j["src"] = address_string(f.key, true);
    j["dst"] = address_string(f.key, false);
    j["dest_qp"] = f.key.dest_qp;
    if (f.key.src_qp) j["src_qp"] = f.key.src_qp;
    if (f.key.point) j["capture_point"] = f.key.point - 1;
    j["transport_service"] = to_string(f.service);
    if (f.peer >= 0) {
      j["peer_flow"] = f.peer;
      j["peer_qp"] = f.peer_qp;
    }
    j["pairing"] = to_string(f.pairing);
    j["packets"] = f.packets;
    j["bytes"] = f.bytes;
    j["payload_bytes"] = f.payload_bytes;
    j["requests"] = f.requests;
    j["responses"] = f.responses;
    j["first_frame"] = f.first_frame;
    j["last_frame"] = f.last_frame;
    j["duration_s"] = f.last_ts - f.first_ts;
    j["pmtu"] = f.pmtu;
    j["pmtu_source"] = f.pmtu_from_cm ? "cm" : f.pmtu ? "inferred_from_segments" : "unknown";
    const FlowFaults& x = f.faults();
    j["psn"] = {{"gaps", x.gaps}, {"missing", x.missing}, {"gaps_recovered", x.gaps_recovered},
                {"duplicates", x.duplicates}, {"out_of_order", x.out_of_order},
                {"retransmissions", x.retransmissions}, {"retransmission_episodes", x.retransmission_episodes},
                {"timeout_retransmissions", x.timeout_retransmissions},
                {"spurious_retransmissions", x.spurious_retransmissions},
                {"lost_resends", x.lost_resends}, {"resent_responses", x.resent_responses}};
    j["acks"] = f.acks;
    j["naks"] = {{"psn_seq_error", x.naks[0]}, {"invalid_request", x.naks[1]}, {"remote_access", x.naks[2]},
                 {"remote_op", x.naks[3]}, {"invalid_rd_request", x.naks[4]}, {"rnr", x.rnr_naks}};
    Json lat = Json::object();
    for (std::size_t i = 0; i < f.latency.size(); ++i)
      if (f.latency[i].count()) lat[std::string(to_string(static_cast<OpClass>(i)))] = latency_json(f.latency[i]);
    j["latency_us"] = lat;
    if (f.recovery.count()) j["recovery_us"] = latency_json(f.recovery);
    j["ecn_ect"] = f.ecn_ect;
    j["ecn_ce"] = f.ecn_ce;
    j["cnp"] = f.cnp;
    j["fecn"] = f.fecn;
    j["becn"] = f.becn;
    j["icrc_bad"] = x.icrc_bad;
    j["bad_opcode_sequence"] = x.bad_opcode_sequence;
    j["length_mismatches"] = x.length_mismatches;
    j["pkey_changes"] = x.pkey_changes;
    arr.push_back(std::move(j));
  }
  return arr;
}

namespace {
// The capture point of an anomaly's flow, when the input has several (0: none).
std::uint16_t point_of(const Anomaly& a, const TransportAnalyzer& t) {
  const FlowSummary* f = is_iwarp_kind(a.kind) || is_pause_kind(a.kind) ? nullptr : flow_at(t, a.flow);
  return f ? f->key.point : 0;
}

template <typename Explain, typename PointOf>
Json anomalies_json_with(const AnomalyLog& log, Explain explain_one, PointOf point) {
  Json arr = Json::array();
  for (const Anomaly& a : log.items()) {
    if (a.retracted) continue;
    Json j;
    j["kind"] = to_string(a.kind);
    j["severity"] = to_string(severity_of(a.kind));
    j["frame"] = a.frame;
    if (a.flow != UINT32_MAX) j["flow"] = a.flow;
    if (const std::uint16_t p = point(a)) j["capture_point"] = p - 1;
    if (is_pause_kind(a.kind)) {
      j["priority"] = a.priority;
      j["mac"] = mac_string(a.mac);
    }
    if (is_iwarp_kind(a.kind)) {
      add_iwarp_anomaly_fields(a, j);
    } else {
      j["dest_qp"] = a.dest_qp;
      j["psn"] = a.psn;
      if (a.kind == AnomalyKind::icrc_not_wire) {
        if (a.expected_psn > 0) j["not_replayed"] = a.expected_psn;
      } else if (a.expected_psn >= 0 && a.kind != AnomalyKind::payload_length_mismatch) {
        j["expected_psn"] = a.expected_psn;
      }
      if (a.kind == AnomalyKind::retransmission) j["cause"] = retransmission_cause(a);
      if (a.late) j["reordered"] = true;
      if (a.count) j[a.kind == AnomalyKind::icrc_bad ? "udp_dst_port" : "count"] = a.count;
    }
    if (a.duration_us >= 0) j["duration_us"] = a.duration_us;
    Json rel = Json::array();
    for (std::size_t i = 0; i < a.related_count; ++i) rel.push_back(a.related[i]);
    j["related_frames"] = rel;
    j["text"] = explain_one(a);
    arr.push_back(std::move(j));
  }
  return arr;
}
}  // namespace

Json anomalies_json(const AnomalyLog& log, const TransportAnalyzer& t) {
  return anomalies_json_with(
      log, [&](const Anomaly& a) { return explain(a, t); }, [&](const Anomaly& a) { return point_of(a, t); });
}

Json anomalies_json(const Analyzer& analyzer) {
  const auto& iwarp_flows = analyzer.iwarp().flows();
  return anomalies_json_with(
      analyzer.anomalies(), [&](const Anomaly& a) { return explain(a, analyzer); },
      [&](const Anomaly& a) -> std::uint16_t {
        if (!is_iwarp_kind(a.kind)) return point_of(a, analyzer.transport());
        return a.flow < iwarp_flows.size() ? iwarp_flows[a.flow].point : 0;
      });
}

std::string explain(const Anomaly& a, const Analyzer& analyzer) {
  return is_iwarp_kind(a.kind) ? explain_iwarp(a, analyzer.iwarp()) : explain(a, analyzer.transport());
}

Json analysis_json(const PacketAnalysis& a) {
  Json j;
  if (a.flow != UINT32_MAX) j["flow"] = a.flow;
  if (a.expected_psn >= 0) j["expected_psn"] = a.expected_psn;
  if (a.gap) j["gap"] = a.gap;
  j["duplicate"] = a.duplicate;
  j["out_of_order"] = a.out_of_order;
  j["retransmission"] = a.retransmission;
  if (a.spurious_retransmission) j["spurious_retransmission"] = true;
  if (a.request_frame) j["request_frame"] = a.request_frame;
  if (a.response_frame) j["response_frame"] = a.response_frame;
  if (a.latency_us >= 0) j["latency_us"] = a.latency_us;
  if (a.nak_gap_frame) j["nak_gap_frame"] = a.nak_gap_frame;
  if (a.ecn_ce) j["ecn_ce"] = true;
  if (a.cnp) j["cnp"] = true;
  if (a.icrc_not_wire) j["icrc_not_wire"] = true;
  if (a.cnp_response_us >= 0) {
    j["cnp_response_us"] = a.cnp_response_us;
    j["cnp_mark_frame"] = a.cnp_mark_frame;
  }
  if (a.cc_verdict == CcVerdict::slowed || a.cc_verdict == CcVerdict::kept_rate) {
    j["cc_verdict"] = a.cc_verdict == CcVerdict::slowed ? "slowed" : "kept_rate";
    j["cc_cnp_frame"] = a.cc_cnp_frame;
  }
  if (a.anomaly_count) j["anomalies"] = a.anomaly_count;
  return j;
}

namespace {
std::string explain_retransmission(const Anomaly& a, const std::string& who, const std::string& rel) {
  std::string s = fmt("%s retransmitted from PSN %u at frame %llu (%u packets resent, go-back-N)", who.c_str(), a.psn,
                      static_cast<unsigned long long>(a.frame), a.count);
  if (a.expected_psn == -2)
    s += "; the ACK of the original never reached the capture point (lost): transport timeout";
  else if (a.cause == ResendCause::answer_corrupt)
    s += "; the ACK/response of the original was captured corrupt (bad ICRC, frame " + rel +
         ") and dropped by the requester: transport timeout";
  else if (a.cause == ResendCause::corrupt)
    s += "; the original was corrupted (bad ICRC)" + (rel.empty() ? std::string() : ", frames " + rel);
  else if (a.cause == ResendCause::response_loss)
    s += "; READ re-issued: its response packets were lost before the capture point" +
         (rel.empty() ? std::string() : " (frames " + rel + ")");
  else if (a.cause == ResendCause::response_lost_after)
    s += "; READ re-issued from a response the capture holds intact, in order: lost (or held up) after the "
         "capture point, before the requester";
  else if (a.cause == ResendCause::no_answer_captured)
    s += "; no NAK before it, and no ACK, NAK or response of this queue pair is in the capture: a transport "
         "timeout, or the capture does not see the responder's direction";
  else
    s += rel.empty() ? "; no NAK before it: transport timeout" : "; after frames " + rel;
  if (a.duration_us >= 0) s += fmt("; recovered in %.0f us", a.duration_us);
  return s;
}

// The NAKs that put the queue pair in the error state.
std::string explain_fatal_nak(const Anomaly& a, const std::string& who, const std::string& rel) {
  static const char* kWhat[] = {"invalid request", "remote access error (bad R_Key, address or permissions)",
                                "remote operational error", "invalid RD request"};
  const int i = a.kind == AnomalyKind::nak_invalid_request ? 0 : a.kind == AnomalyKind::nak_remote_access ? 1
                : a.kind == AnomalyKind::nak_remote_op ? 2 : 3;
  return fmt("%s NAK %s at frame %llu for PSN %u%s%s: the QP goes to the error state", who.c_str(), kWhat[i],
             static_cast<unsigned long long>(a.frame), a.psn, rel.empty() ? "" : "; request at frame ", rel.c_str());
}

std::string explain_icrc_bad(const Anomaly& a, const std::string& who, const std::string& rel) {
  if (a.count)  // decode's udp_port_bit_error: the port, not the payload, took the bit error
    return fmt("%s ICRC bad at frame %llu (PSN %u): UDP destination port %u is 4791 with one bit flipped, its ICRC holds "
               "with 4791: corrupted in flight (a bit error, not a drop); the receiver does not take it as RoCE%s%s",
               who.c_str(), static_cast<unsigned long long>(a.frame), a.psn, a.count,
               rel.empty() ? "" : "; NAK/resend at frames ", rel.c_str());
  return fmt("%s ICRC bad at frame %llu (PSN %u): corrupted in flight (a bit error, not a drop); the receiver drops it%s%s",
             who.c_str(), static_cast<unsigned long long>(a.frame), a.psn,
             rel.empty() ? "" : "; NAK/resend at frames ", rel.c_str());
}

std::string explain_icrc_not_wire(const Anomaly& a, const std::string& who) {
  std::string s = fmt("%s: this sender's ICRCs to this receiver are not the wire's: %u packets from frame %llu "
                      "(PSN %u) on carry a bad ICRC in the capture, but the receiver took them (its answer at "
                      "frame %llu names one); the capture sees them before the ICRC is computed (offload) or "
                      "damaged its copies: not counted as corruption, and this direction's ICRCs are not checked",
                      who.c_str(), a.count, static_cast<unsigned long long>(a.frame), a.psn,
                      static_cast<unsigned long long>(a.related[0]));
  if (a.expected_psn > 0)
    s += fmt("; %lld more before that answer, past the bound on packets kept to analyse again, stay reported "
             "as corrupt", static_cast<long long>(a.expected_psn));
  if (a.related_count > 1)
    s += fmt("; an intact packet at frame %llu contradicts it: checked again from there",
             static_cast<unsigned long long>(a.related[1]));
  return s;
}
}  // namespace

std::string explain(const Anomaly& a, const TransportAnalyzer& t) {
  if (is_pause_kind(a.kind)) return explain_pause(a);  // link level: no queue pair
  std::string who = fmt("QP 0x%06x", a.dest_qp);
  if (const FlowSummary* f = flow_at(t, a.flow))
    who += fmt(" %s -> %s%s", address_string(f->key, true).c_str(), address_string(f->key, false).c_str(),
               point_label(f->key.point).c_str());
  const std::string rel = frames(a);
  switch (a.kind) {
    case AnomalyKind::psn_gap:
      // A late gap names only the PSNs still missing; the others it named came late.
      return fmt("%s lost PSN %s (%u missing) before frame %llu%s%s%s", who.c_str(),
                 psn_range(static_cast<std::uint32_t>(a.expected_psn), a.count).c_str(), a.count,
                 static_cast<unsigned long long>(a.frame), rel.empty() ? "; never resent in this capture" : "; NAK/resend at frames ",
                 rel.c_str(), a.late ? "; other PSNs missing there arrived late (reordered on the path)" : "");
    case AnomalyKind::psn_duplicate:
      return fmt("%s PSN %u seen again at frame %llu (expected %lld): a duplicate copy, not a retransmission",
                 who.c_str(), a.psn, static_cast<unsigned long long>(a.frame), static_cast<long long>(a.expected_psn));
    case AnomalyKind::psn_out_of_order:
      return fmt("%s PSN %u arrived late at frame %llu (after PSN %lld was expected): reordered on the path",
                 who.c_str(), a.psn, static_cast<unsigned long long>(a.frame), static_cast<long long>(a.expected_psn) - 1);
    case AnomalyKind::retransmission:
      return explain_retransmission(a, who, rel);
    case AnomalyKind::nak_psn_seq_error:
      return fmt("%s NAK PSN sequence error at frame %llu: responder expects PSN %u%s%s", who.c_str(),
                 static_cast<unsigned long long>(a.frame), a.psn,
                 !rel.empty() ? "; answers the gap at frame "
                 : a.count == 1 ? "; its last copy passed the capture point (lost or discarded after it)"
                 : a.count == 2 ? "; not captured, and no gap showed it (lost before the capture point or before the capture began)"
                                : "; the queue pair's requests are not in the capture (or not paired with it): where "
                                  "the PSN was lost cannot be told",
                 rel.c_str());
    case AnomalyKind::rnr_nak:
      return fmt("%s RNR NAK at frame %llu for PSN %u: receiver not ready (no receive posted), retry after %.2f ms%s%s",
                 who.c_str(), static_cast<unsigned long long>(a.frame), a.psn, a.duration_us / 1000.0,
                 rel.empty() ? "" : "; request at frame ", rel.c_str());
    case AnomalyKind::nak_invalid_request:
    case AnomalyKind::nak_remote_access:
    case AnomalyKind::nak_remote_op:
    case AnomalyKind::nak_invalid_rd_request:
      return explain_fatal_nak(a, who, rel);
    case AnomalyKind::icrc_bad:
      return explain_icrc_bad(a, who, rel);
    case AnomalyKind::vcrc_bad:
      return fmt("%s VCRC bad at frame %llu: corrupted on the last link", who.c_str(), static_cast<unsigned long long>(a.frame));
    case AnomalyKind::bad_opcode_sequence:
      return fmt("%s invalid opcode sequence at frame %llu (PSN %u): a message part out of place (MIDDLE/LAST without FIRST, or a new message before LAST)",
                 who.c_str(), static_cast<unsigned long long>(a.frame), a.psn);
    case AnomalyKind::payload_length_mismatch:
      if (a.expected_psn == 0)
        return fmt("%s payload of %u bytes plus pad is not a multiple of 4 at frame %llu", who.c_str(), a.count,
                   static_cast<unsigned long long>(a.frame));
      return fmt("%s length mismatch at frame %llu: %u bytes where %lld were expected (PMTU-sized FIRST/MIDDLE, or the RETH length)",
                 who.c_str(), static_cast<unsigned long long>(a.frame), a.count, static_cast<long long>(a.expected_psn));
    case AnomalyKind::cc_no_reaction:
      return explain_no_reaction(a, who);
    case AnomalyKind::icrc_not_wire:
      return explain_icrc_not_wire(a, who);
    case AnomalyKind::pkey_change:
      return fmt("%s P_Key changed to 0x%04x at frame %llu", who.c_str(), a.count, static_cast<unsigned long long>(a.frame));
    default:
      return fmt("%s %.*s at frame %llu", who.c_str(), static_cast<int>(to_string(a.kind).size()), to_string(a.kind).data(),
                 static_cast<unsigned long long>(a.frame));
  }
}

void write_flow_table(std::ostream& out, const TransportAnalyzer& t) {
  std::vector<const FlowSummary*> flows;
  for (const auto& f : t.flows()) flows.push_back(&f);
  if (flows.empty()) return;
  std::stable_sort(flows.begin(), flows.end(), [](const FlowSummary* a, const FlowSummary* b) { return a->problems() > b->problems(); });
  out << "\nQueue pairs (worst first):\n";
  out << fmt("  %-4s %-8s %-33s %-5s %8s %10s %5s %5s %5s %5s %6s %4s %9s %9s %5s %5s\n", "flow", "QP", "src -> dst", "svc",
             "packets", "bytes", "gaps", "lost", "dup", "ooo", "retx", "NAK", "lat p50", "lat p99", "CE", "CNP");
  for (const FlowSummary* f : flows) {
    const FlowFaults& x = f->faults();
    std::uint64_t naks = x.rnr_naks;
    for (auto c : x.naks) naks += c;
    // The request latency of the flow's most frequent operation.
    const LatencyStats* lat = nullptr;
    for (const auto& l : f->latency)
      if (l.count() && (!lat || l.count() > lat->count())) lat = &l;
    // A UD flow is keyed by its source QP (any destination QP): show that one.
    const std::string from = f->service == TransportService::ud ? fmt(" QP 0x%x", f->key.src_qp) : std::string();
    const std::string ends =
        address_string(f->key, true) + from + " -> " + address_string(f->key, false) + point_label(f->key.point);
    out << fmt("  %-4u 0x%06x %-33s %-5s %8llu %10llu %5llu %5llu %5llu %5llu %6llu %4llu %9s %9s %5llu %5llu\n", f->index,
               f->key.dest_qp, ends.c_str(), std::string(to_string(f->service)).c_str(),
               static_cast<unsigned long long>(f->packets), static_cast<unsigned long long>(f->bytes),
               static_cast<unsigned long long>(x.gaps), static_cast<unsigned long long>(x.missing),
               static_cast<unsigned long long>(x.duplicates), static_cast<unsigned long long>(x.out_of_order),
               static_cast<unsigned long long>(x.retransmissions), static_cast<unsigned long long>(naks),
               lat ? fmt("%.1fus", lat->percentile(50)).c_str() : "-", lat ? fmt("%.1fus", lat->percentile(99)).c_str() : "-",
               static_cast<unsigned long long>(f->ecn_ce), static_cast<unsigned long long>(f->cnp));
  }
  if (t.evicted_flows()) out << fmt("  (%llu more flows evicted: over the memory cap)\n", static_cast<unsigned long long>(t.evicted_flows()));
  if (t.cap_retired_flows())
    out << fmt("  (%llu flows retired while active: over %zu live flows; a later packet of one starts a new flow)\n",
               static_cast<unsigned long long>(t.cap_retired_flows()), TransportAnalyzer::kMaxLiveFlows);
}

namespace {
template <typename Explain>
void write_problems_with(std::ostream& out, const AnomalyLog& log, std::size_t max_lines, Explain explain_one) {
  if (log.total() == 0) {
    out << "\nProblems: none (no PSN gaps, duplicates, retransmissions, NAKs or CRC errors)\n";
    return;
  }
  out << fmt("\nProblems: %llu\n", static_cast<unsigned long long>(log.total()));
  for (std::size_t k = 0; k < static_cast<std::size_t>(AnomalyKind::count_); ++k) {
    const auto kind = static_cast<AnomalyKind>(k);
    if (log.count(kind))
      out << fmt("  %-24.*s %8llu\n", static_cast<int>(to_string(kind).size()), to_string(kind).data(),
                 static_cast<unsigned long long>(log.count(kind)));
  }
  out << "\n";
  std::size_t n = 0;
  for (const Anomaly& a : log.items()) {
    if (a.retracted) continue;
    if (n++ == max_lines) {
      out << fmt("  ... %zu more (see --json)\n", log.listed() - max_lines);
      break;
    }
    out << "  " << explain_one(a) << "\n";
  }
}
}  // namespace

void write_problems(std::ostream& out, const AnomalyLog& log, const TransportAnalyzer& t, std::size_t max_lines) {
  write_problems_with(out, log, max_lines, [&](const Anomaly& a) { return explain(a, t); });
}

void write_problems(std::ostream& out, const Analyzer& analyzer, std::size_t max_lines) {
  write_problems_with(out, analyzer.anomalies(), max_lines, [&](const Anomaly& a) { return explain(a, analyzer); });
}

}  // namespace rdmadiag::exporters
