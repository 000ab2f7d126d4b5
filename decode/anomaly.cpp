#include "decode/anomaly.h"

#include <algorithm>
#include <tuple>

namespace rdmadiag::decode {

std::string_view to_string(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::psn_gap: return "psn_gap";
    case AnomalyKind::psn_duplicate: return "psn_duplicate";
    case AnomalyKind::psn_out_of_order: return "psn_out_of_order";
    case AnomalyKind::nak_psn_seq_error: return "nak_psn_seq_error";
    case AnomalyKind::nak_invalid_request: return "nak_invalid_request";
    case AnomalyKind::nak_remote_access: return "nak_remote_access";
    case AnomalyKind::nak_remote_op: return "nak_remote_op";
    case AnomalyKind::nak_invalid_rd_request: return "nak_invalid_rd_request";
    case AnomalyKind::rnr_nak: return "rnr_nak";
    case AnomalyKind::retransmission: return "retransmission";
    case AnomalyKind::icrc_bad: return "icrc_bad";
    case AnomalyKind::vcrc_bad: return "vcrc_bad";
    case AnomalyKind::bad_opcode_sequence: return "bad_opcode_sequence";
    case AnomalyKind::payload_length_mismatch: return "payload_length_mismatch";
    case AnomalyKind::pkey_change: return "pkey_change";
    case AnomalyKind::response_without_request: return "response_without_request";
    case AnomalyKind::tcp_hole: return "tcp_hole";
    case AnomalyKind::mpa_crc_bad: return "mpa_crc_bad";
    case AnomalyKind::mpa_bad_framing: return "mpa_bad_framing";
    case AnomalyKind::ddp_msn_gap: return "ddp_msn_gap";
    case AnomalyKind::ddp_mo_discontinuity: return "ddp_mo_discontinuity";
    case AnomalyKind::rdmap_terminate: return "rdmap_terminate";
    case AnomalyKind::iwarp_resync: return "iwarp_resync";
    case AnomalyKind::ddp_to_discontinuity: return "ddp_to_discontinuity";
    case AnomalyKind::rdmap_read_size_mismatch: return "rdmap_read_size_mismatch";
    case AnomalyKind::rdmap_read_response_unmatched: return "rdmap_read_response_unmatched";
    case AnomalyKind::mpa_marker_stride: return "mpa_marker_stride";
    case AnomalyKind::pause_storm: return "pause_storm";
    case AnomalyKind::cc_no_reaction: return "cc_no_reaction";
    case AnomalyKind::icrc_not_wire: return "icrc_not_wire";
    case AnomalyKind::count_: break;
  }
  return "?";
}

Severity severity_of(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::icrc_bad: case AnomalyKind::vcrc_bad: case AnomalyKind::mpa_crc_bad:
    case AnomalyKind::nak_invalid_request: case AnomalyKind::nak_remote_access: case AnomalyKind::nak_remote_op:
    case AnomalyKind::nak_invalid_rd_request: case AnomalyKind::rdmap_terminate: case AnomalyKind::bad_opcode_sequence:
    case AnomalyKind::mpa_bad_framing: case AnomalyKind::mpa_marker_stride:
      return Severity::error;
    case AnomalyKind::iwarp_resync:
      return Severity::note;
    default:
      return Severity::warning;
  }
}

void AnomalyLog::merge(std::span<const AnomalyLog* const> parts, const FlowRenumber& flow_of) {
  struct Ref {
    std::uint64_t key;
    std::size_t part, pos;
  };
  std::vector<Ref> refs;
  std::uint64_t added = 0;
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const AnomalyLog& x = *parts[s];
    for (std::size_t k = 0; k < by_kind_.size(); ++k) by_kind_[k] += x.by_kind_[k];
    added += x.items_.size() + x.dropped_;
    for (std::size_t i = 0; i < x.items_.size(); ++i) refs.push_back({x.order_keys_[i], s, i});
    // A revision's flow renumbered as the entry it revises would be.
    const auto renumbered = [&](AnomalyKind kind, std::uint32_t flow, std::uint64_t frame) {
      Anomaly as_entry{kind};
      as_entry.flow = flow;
      as_entry.frame = frame;
      return flow_of(s, as_entry);
    };
    for (GapRevision r : x.revisions_) {
      r.flow = renumbered(AnomalyKind::psn_gap, r.flow, r.frame);
      note_revision(r);
    }
    for (SpuriousRevision r : x.spurious_revisions_) {
      r.flow = renumbered(AnomalyKind::retransmission, r.flow, r.first_frame);
      note_revision(r);
    }
    for (ReplayRevision r : x.replay_revisions_) {
      r.flow = renumbered(AnomalyKind::icrc_not_wire, r.flow, r.frame);
      note_revision(r);
    }
  }
  std::sort(refs.begin(), refs.end(),
            [](const Ref& a, const Ref& b) { return std::tie(a.key, a.part, a.pos) < std::tie(b.key, b.part, b.pos); });
  if (refs.size() > cap_) refs.resize(cap_);
  items_.reserve(items_.size() + refs.size());
  for (const Ref& r : refs) {
    Anomaly a = parts[r.part]->items_[r.pos];
    if (a.flow != UINT32_MAX) a.flow = flow_of(r.part, a);
    retracted_ += a.retracted;
    items_.push_back(a);
  }
  dropped_ += added - refs.size();
}

}  // namespace rdmadiag::decode
