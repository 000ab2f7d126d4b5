#include "decode/iwarp_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "decode/crc32c.h"
#include "decode/ddp_sequence.h"
#include "decode/endpoints.h"
#include "decode/flow_ring.h"
#include "decode/mpa_direction.h"

namespace rdmadiag::decode {

std::string_view to_string(MpaCrcStatus s) {
  switch (s) {
    case MpaCrcStatus::ok: return "ok";
    case MpaCrcStatus::bad: return "bad";
    case MpaCrcStatus::unverifiable: return "unverifiable";
    case MpaCrcStatus::not_negotiated: return "not_negotiated";
  }
  return "?";
}

namespace {

constexpr std::size_t kMaxBuffered = 256u << 10;     // bytes held per direction while not framing
constexpr std::size_t kHuntKeep = 128u << 10;        // bytes kept while hunting for a boundary
constexpr std::uint64_t kHuntGiveUp = 4u << 20;      // bytes scanned before a stream is declared not MPA
// CRC work a hunt may spend: this many octets per stream octet, plus a start.
// Each candidate boundary costs a CRC over its FPDU (up to 64 KB), so without a
// bound a stream of plausible headers made hunting quadratic (fuzz_iwarp).
constexpr std::uint64_t kHuntCrcPerByte = 64;
constexpr std::uint64_t kHuntCrcStart = 1u << 20;
constexpr std::size_t kMaxUncapturedRanges = 64;
constexpr std::uint32_t kMaxMarkerStride = 8192;     // largest marker stride looked for (RFC 5044: 512)
constexpr std::size_t kStrideDecideBytes = 64u << 10;  // bytes after which the stride is decided on what was seen

struct Endpoint {
  std::array<std::uint8_t, 16> addr{};
  std::uint16_t port = 0;
  auto operator<=>(const Endpoint&) const = default;
};

// The connection's key whichever way the segment travels.
IwarpConnKey connection_key(const Endpoint& src, const Endpoint& dst, std::uint16_t point) {
  const bool src_low = src <= dst;
  const Endpoint& lo = src_low ? src : dst;
  const Endpoint& hi = src_low ? dst : src;
  return IwarpConnKey{lo.addr, hi.addr, lo.port, hi.port, point};
}

// The cheap checks a byte position must pass to be taken for an FPDU header
// while resynchronising: ULPDU length, DDP control (DV 1, reserved 0), RDMAP
// control (RV 1, reserved 0, a known opcode of the right buffer model), the
// queue number an untagged opcode uses. 1: plausible, 0: not, -1: need more bytes.
int plausible_header(const ByteReader& r, std::size_t at) {
  if (!r.has(at, 4)) return -1;
  const std::uint16_t len = r.be16(at);
  const std::uint8_t ddp = r.u8(at + 2), rdmap = r.u8(at + 3);
  if ((ddp & 0x3F) != 0x01 || (rdmap & 0xF0) != 0x40) return 0;
  const std::uint8_t op = rdmap & 0x0F;
  if (!rdmap_opcode_known(op)) return 0;
  const bool tagged = ddp & 0x80;
  const int queue = rdmap_expected_queue(op);
  if (tagged != (queue < 0)) return 0;
  if (len < (tagged ? kDdpTaggedHeaderLen : kDdpUntaggedHeaderLen)) return 0;
  if (tagged) return 1;
  if (!r.has(at, 2 + kDdpUntaggedHeaderLen)) return -1;
  return r.be32(at + 2 + 6) == static_cast<std::uint32_t>(queue) ? 1 : 0;
}

}  // namespace

std::size_t IwarpConnKeyHash::operator()(const IwarpConnKey& k) const {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over both endpoints
  for (auto b : k.lo_addr) h = (h ^ b) * 1099511628211ull;
  for (auto b : k.hi_addr) h = (h ^ b) * 1099511628211ull;
  h = (h ^ k.lo_port) * 1099511628211ull;
  h = (h ^ k.hi_port) * 1099511628211ull;
  return static_cast<std::size_t>(k.point ? (h ^ k.point) * 1099511628211ull : h);
}

struct IwarpAnalyzer::Connection {
  struct Direction final : TcpStreamSink {
    using Mode = MpaMode;
    IwarpAnalyzer* an = nullptr;
    Connection* conn = nullptr;
    int index = 0;
    Endpoint src, dst;
    TcpStream tcp;
    MpaDirState mpa;  // the framing mode (mpa_direction.h)
    bool fin = false;
    bool markers = false;
    bool marker_base_known = false;
    std::uint32_t marker_base = 0;
    std::uint32_t marker_stride = kMpaMarkerInterval;
    bool stride_settled = false;   // the markers were checked against the stream once
    bool crc = false, crc_known = false;
    bool resynced = false;
    bool header_uncaptured = false;  // an FPDU header was cut by the snap length: a request may be unseen
    std::uint32_t after_negotiation = 0;
    std::vector<std::uint8_t> buf;
    std::size_t off = 0;
    bool have_seq = false;
    std::uint32_t seq = 0;     // of buf[off]
    std::vector<std::pair<std::uint32_t, std::uint32_t>> uncaptured;  // [begin, end)
    FlowRing<std::pair<std::uint32_t, std::uint64_t>> segment_ends;  // (end seq, frame) of buffered segments
    std::size_t hunt_from = 0;
    std::uint64_t hunted = 0;
    std::uint64_t stream_bytes = 0;     // octets this direction carried (captured or not)
    std::uint64_t hunt_crc_spent = 0;  // octets CRC-checked by hunts
    std::uint64_t frame = 0;   // the segment being processed
    std::int64_t ts_ns = 0;  // of that segment: latencies are differences of exact stamps
    DdpDirState ddp;  // DDP/RDMAP sequencing (ddp_sequence.h)
    struct DamagedCopy {  // the last segment of this direction captured with a damaged port
      std::uint32_t seq = 0, len = 0;
      std::uint64_t frame = 0;
    } damaged;

    explicit Direction(TcpBufferBudget* b) : tcp(b) {}
    Direction& peer();
    std::uint32_t flow() const;
    IwarpFlowInfo* info();
    std::size_t avail() const { return buf.size() - off; }
    Bytes view() const { return Bytes(buf.data() + off, avail()); }

    void stream_data(std::uint32_t s, Bytes captured, std::uint32_t wire_len, std::uint64_t f, std::int64_t t) override;
    void stream_hole(const TcpHoleEvent& hole) override;
    void consume(std::size_t n);
    void process();
    class FramingReport;
    void step(MpaUnit::Kind kind, std::uint32_t count = 0);
    bool negotiation_not_captured();
    void negotiation_done(const MpaNegotiation& m);
    void settle_framing(bool use_markers, bool use_crc, std::uint32_t first_fpdu);
    enum class Cut : std::uint8_t { ok, need_more, bad };
    struct Fpdu {
      std::size_t wire_len = 0;
      std::uint16_t ulpdu_len = 0;
      std::uint32_t crc_wire = 0, crc_computed = 0;
      std::uint32_t markers = 0, marker_errors = 0;
      bool uncaptured = false;
      Bytes ulpdu;
    };
    Cut cut(std::size_t pos, Fpdu& f);
    Cut cut_marked(std::size_t pos, Fpdu& f);
    enum class Probe : std::uint8_t { fits, need_more, fails };
    Probe probe_stride(std::uint32_t stride) const;
    Probe settle_marker_stride();
    bool frame_one();
    bool hunt();
    bool hunt_by_markers();
    void accept_resync(std::size_t pos, bool crc_verified);
    void emit(const Fpdu& f);
    void keep_payload_head(const Fpdu& f, IwarpPdu& u) const;
    void keep_long_head(const Fpdu& f, const IwarpPdu& u) const;
    class DdpReport;
    void sequence_checks(IwarpPdu& u);
    void header_not_captured();
    Anomaly make_anomaly(AnomalyKind k, std::uint64_t fr) const;
    void anomaly(AnomalyKind k, std::uint64_t fr, std::uint32_t count = 0);
    bool overlaps_uncaptured(std::uint32_t b, std::uint32_t e) const;
    std::uint64_t frame_of_end(std::uint32_t end) const;
  };

  std::array<std::unique_ptr<Direction>, 2> dir;
  bool negotiated = false;
  bool have_request = false;
  MpaNegotiation request;
  std::uint32_t flow_base = UINT32_MAX;  // flows_[flow_base + direction]
  std::uint16_t point = 0;               // the capture point that saw it (IwarpConnKey::point)
  std::uint64_t created_frame = 0;
  double last_ts = 0;  // of its last segment (the least recently active are retired at the cap)
  IwarpAnalyzer* an = nullptr;

  Connection(IwarpAnalyzer* a, const Endpoint& s, const Endpoint& d) : an(a) {
    for (int i = 0; i < 2; ++i) {
      dir[i] = std::make_unique<Direction>(&a->budget_);
      dir[i]->an = a;
      dir[i]->conn = this;
      dir[i]->index = i;
    }
    dir[0]->src = s;
    dir[0]->dst = d;
    dir[1]->src = d;
    dir[1]->dst = s;
  }
  bool iwarp_known() const { return flow_base != UINT32_MAX; }
  void identify(bool ipv6, std::uint64_t frame) {
    if (iwarp_known()) return;
    flow_base = static_cast<std::uint32_t>(an->flows_.size());
    for (int i = 0; i < 2; ++i) {
      IwarpFlowInfo fi;
      fi.src = dir[i]->src.addr;
      fi.dst = dir[i]->dst.addr;
      fi.src_port = dir[i]->src.port;
      fi.dst_port = dir[i]->dst.port;
      fi.ipv6 = ipv6;
      fi.point = point;
      fi.first_frame = frame;
      an->flows_.push_back(fi);
      an->flow_order_keys_.push_back(an->log_.order_key());
    }
    ++an->stats_.connections;
  }
  // Retiring it loses nothing a report would show: it carries no MPA, holds no bytes.
  bool idle_state() const {
    return !iwarp_known() && !dir[0]->tcp.held_bytes() && !dir[1]->tcp.held_bytes() && dir[0]->buf.empty() &&
           dir[1]->buf.empty();
  }
  bool ipv6 = false;
};

using Conn = IwarpAnalyzer::Connection;
using Dir = Conn::Direction;

Dir& Dir::peer() { return *conn->dir[1 - index]; }
std::uint32_t Dir::flow() const { return conn->iwarp_known() ? conn->flow_base + static_cast<std::uint32_t>(index) : UINT32_MAX; }
IwarpFlowInfo* Dir::info() { return conn->iwarp_known() ? &an->flows_[flow()] : nullptr; }

Anomaly Dir::make_anomaly(AnomalyKind k, std::uint64_t fr) const {
  Anomaly a{};
  a.kind = k;
  a.frame = fr;
  a.flow = flow();
  return a;
}

void Dir::anomaly(AnomalyKind k, std::uint64_t fr, std::uint32_t count) {
  Anomaly a = make_anomaly(k, fr);
  a.count = count;
  an->log_.add(a);
}

bool Dir::overlaps_uncaptured(std::uint32_t b, std::uint32_t e) const {
  for (const auto& [ub, ue] : uncaptured)
    if (seq_lt(b, ue) && seq_lt(ub, e)) return true;
  return false;
}

void Dir::consume(std::size_t n) {
  off += n;
  seq += static_cast<std::uint32_t>(n);
  hunt_from = hunt_from > n ? hunt_from - n : 0;
  if (off == buf.size()) {
    buf.clear();
    off = 0;
  } else if (off > (64u << 10) && off * 2 > buf.size()) {
    buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(off));
    off = 0;
  }
  std::erase_if(uncaptured, [&](const auto& r) { return seq_leq(r.second, seq); });
  while (segment_ends.size() > 1 && seq_leq(segment_ends.front().first, seq)) segment_ends.pop_front();
}

// The frame that carried the byte before sequence number `end`.
std::uint64_t Dir::frame_of_end(std::uint32_t end) const {
  for (const auto& [e, f] : segment_ends)
    if (seq_leq(end, e)) return f;
  return frame;
}

void Dir::stream_data(std::uint32_t s, Bytes captured, std::uint32_t wire_len, std::uint64_t f, std::int64_t t) {
  if (mpa.mode == Mode::not_iwarp) return;
  if (!have_seq || avail() == 0) {
    have_seq = true;
    seq = s - static_cast<std::uint32_t>(avail());
  }
  frame = f;
  ts_ns = t;
  stream_bytes += wire_len;
  buf.insert(buf.end(), captured.begin(), captured.end());
  if (segment_ends.size() >= 4096) segment_ends.pop_front();
  segment_ends.push_back({s + wire_len, f});
  if (captured.size() < wire_len) {  // cut by the snap length: keep the place, mark the bytes unknown
    const std::uint32_t missing = wire_len - static_cast<std::uint32_t>(captured.size());
    buf.insert(buf.end(), missing, 0);
    const std::uint32_t from = s + static_cast<std::uint32_t>(captured.size());
    // Full: widen the last range. Captured bytes may then count as lost, never
    // zeros as captured (a hunt took them for FPDU headers with CRC 0).
    if (uncaptured.size() < kMaxUncapturedRanges) uncaptured.emplace_back(from, s + wire_len);
    else uncaptured.back().second = s + wire_len;
  }
  process();
}

void Dir::stream_hole(const TcpHoleEvent& h) {
  if (mpa.mode == Mode::not_iwarp) return;
  if (conn->iwarp_known()) {
    Anomaly a = make_anomaly(AnomalyKind::tcp_hole, h.frame_detected);
    a.count = h.bytes;
    a.psn = h.seq;
    if (h.frame_resolved != h.frame_detected) a.relate(h.frame_resolved);
    if (h.recovered) a.duration_us = static_cast<double>(h.ts_resolved_ns - h.ts_detected_ns) * 1e-3;
    if (h.recovered) a.expected_psn = static_cast<std::int64_t>(h.fill);
    if (h.recovered && damaged.frame && seq_leq(damaged.seq, h.seq) &&
        seq_leq(h.seq + h.bytes, damaged.seq + damaged.len)) {  // captured, damaged: not lost
      a.expected_psn = static_cast<std::int64_t>(TcpGapFill::corruption);
      a.relate(damaged.frame);
    }
    an->log_.add(a);
    if (an->cur_out_ && an->cur_out_->tcp_holes < UINT8_MAX) ++an->cur_out_->tcp_holes;
    if (h.recovered) ++an->stats_.tcp_holes_recovered;
    else {
      ++an->stats_.tcp_holes_lost;
      an->stats_.tcp_bytes_lost += h.bytes;
    }
  }
  if (h.recovered) return;
  // Bytes are gone: whatever was buffered cannot be completed; find the next boundary.
  buf.clear();
  off = 0;
  uncaptured.clear();
  segment_ends.clear();
  have_seq = true;
  seq = h.seq + h.bytes;
  hunt_from = 0;
  step(MpaUnit::Kind::bytes_lost);
}

// What the framing machine finds goes to the anomaly log, the flow and the DDP state.
class Dir::FramingReport final : public MpaDirSink {
 public:
  explicit FramingReport(Dir& dir) : dir_(dir) {}
  void identified() override { dir_.conn->identify(dir_.conn->ipv6, dir_.frame); }
  void framing_started() override {
    if (IwarpFlowInfo* fi = dir_.info()) {
      fi->markers = dir_.markers;
      fi->crc = dir_.crc;
    }
  }
  void bad_framing(std::uint32_t wrong_markers) override {
    dir_.anomaly(AnomalyKind::mpa_bad_framing, dir_.frame, wrong_markers);
  }
  void resync(std::uint32_t bytes_skipped) override { dir_.anomaly(AnomalyKind::iwarp_resync, dir_.frame, bytes_skipped); }
  void reset_ddp(bool msns_known) override { ddp_reset(dir_.ddp, msns_known); }  // RFC 5041 section 5.3: MSNs from 1

 private:
  Dir& dir_;
};

void Dir::step(MpaUnit::Kind kind, std::uint32_t count) {
  mpa.identified = conn->iwarp_known();  // a connection's, set by either direction
  const MpaStep st = mpa_dir_classify(mpa, MpaUnit{kind, count});
  FramingReport report(*this);
  mpa_dir_apply(mpa, st, report);
}

void Dir::process() {
  for (;;) {
    switch (mpa.mode) {
      case Mode::not_iwarp:
        buf.clear();
        off = 0;
        return;
      case Mode::start:
        switch (mpa_classify_start(view(), tcp.saw_syn())) {
          case MpaStreamStart::need_more: return;
          case MpaStreamStart::negotiation: step(MpaUnit::Kind::start_negotiation); break;
          case MpaStreamStart::hunt: step(MpaUnit::Kind::start_mid_stream); break;
          case MpaStreamStart::not_mpa: step(MpaUnit::Kind::start_not_mpa); break;
        }
        break;
      case Mode::negotiation: {
        if (negotiation_not_captured()) break;
        MpaNegotiation m;
        const auto st = parse_mpa_negotiation(view(), m);
        if (st == ParseStatus::truncated) return;
        if (st == ParseStatus::malformed) {
          step(MpaUnit::Kind::negotiation_malformed);
          break;
        }
        consume(m.total_length());
        negotiation_done(m);
        break;
      }
      case Mode::await_reply:
        if (avail() > kMaxBuffered) step(MpaUnit::Kind::reply_overdue);
        else return;
        break;
      case Mode::fpdu:
        if (!frame_one()) return;
        break;
      case Mode::hunting:
        if (!hunt()) return;
        break;
    }
  }
}

// The snap length cut the Request/Reply's fixed header: its flags and lengths
// are unknown, not wrong. This side, and an initiator waiting for a Reply it
// cannot read, find the framing from the FPDU headers.
bool Dir::negotiation_not_captured() {
  if (avail() < kMpaReqRepHeaderLen || !overlaps_uncaptured(seq, seq + kMpaReqRepHeaderLen)) return false;
  step(MpaUnit::Kind::negotiation_not_captured);
  Dir& other = peer();
  if (other.mpa.mode == Mode::await_reply) {
    other.step(MpaUnit::Kind::negotiation_not_captured);
    other.process();
  }
  return true;
}

void Dir::negotiation_done(const MpaNegotiation& m) {
  const bool request = m.type == MpaFrameType::request;
  const MpaSettlement settled = request ? MpaSettlement{} : mpa_settle(conn->have_request ? &conn->request : nullptr, m);
  if (!request && !settled.rejected) {  // before FPDU mode starts: the flow shows the settled framing
    after_negotiation = seq;
    settle_framing(settled.markers_from_responder, settled.crc, seq);
  }
  step(request ? MpaUnit::Kind::request : settled.rejected ? MpaUnit::Kind::reply_rejected : MpaUnit::Kind::reply_accepted);
  IwarpFlowInfo* fi = info();
  fi->negotiated = true;
  if (IwarpPdu* u = an->cur_out_ ? an->cur_out_->push() : nullptr) {
    u->kind = request ? IwarpPdu::Kind::mpa_request : IwarpPdu::Kind::mpa_reply;
    u->flow = flow();
    u->end_frame = frame;
    u->seq = seq - m.total_length();
    u->negotiation = m;
  }
  an->note_unit();
  if (request) {
    fi->initiator = true;
    conn->have_request = true;
    conn->request = m;
    after_negotiation = seq;
    return;
  }
  Dir& ini = peer();
  if (settled.rejected) {
    fi->rejected = true;
    ++an->stats_.rejected;
    ini.step(MpaUnit::Kind::peer_rejected);
    return;
  }
  if (!conn->negotiated) ++an->stats_.negotiated;
  conn->negotiated = true;
  if (!conn->have_request) return;
  ini.settle_framing(settled.markers_from_initiator, settled.crc, ini.after_negotiation);
  const bool waiting = ini.mpa.mode == Mode::await_reply;
  ini.step(MpaUnit::Kind::peer_accepted);
  if (waiting) ini.process();
}

// Framing as the negotiation settled it; markers count from the first FPDU.
void Dir::settle_framing(bool use_markers, bool use_crc, std::uint32_t first_fpdu) {
  markers = use_markers;
  marker_base_known = true;
  marker_base = first_fpdu;
  crc = use_crc;
  crc_known = true;
}

// Cuts the FPDU that starts `pos` bytes into the buffer, removing markers.
Dir::Cut Dir::cut(std::size_t pos, Fpdu& f) {
  const ByteReader r(view());
  const std::uint32_t start = seq + static_cast<std::uint32_t>(pos);
  f = Fpdu{};
  if (!markers) {
    if (!r.has(pos, 2)) return Cut::need_more;
    f.ulpdu_len = r.be16(pos);
    if (f.ulpdu_len < kDdpTaggedHeaderLen) return Cut::bad;
    const std::uint32_t total = mpa_fpdu_len(f.ulpdu_len);
    if (!r.has(pos, total)) return Cut::need_more;
    f.wire_len = total;
    f.crc_wire = r.le32(pos + total - kMpaCrcLen);
    f.crc_computed = crc32c(r.sub(pos, total - kMpaCrcLen));
    f.ulpdu = r.sub(pos + 2, f.ulpdu_len);
  } else {
    const Cut c = cut_marked(pos, f);
    if (c != Cut::ok) return c;
  }
  f.uncaptured = !uncaptured.empty() && overlaps_uncaptured(start, start + static_cast<std::uint32_t>(f.wire_len));
  return Cut::ok;
}

// The FPDU at `pos` with markers in use: a 4-octet marker sits at every
// stride-th sequence number and the CRC covers the markers inside the FPDU
// (RFC 5044 sections 4.3, 6). The walk steps from marker to marker, not byte
// by byte, and copies nothing until the whole FPDU is buffered: an FPDU still
// arriving over many segments costs one step per marker each time (a per-byte
// walk made a 64 KB FPDU in 1-byte segments quadratic; fuzz_iwarp timed out).
Dir::Cut Dir::cut_marked(std::size_t pos, Fpdu& f) {
  const ByteReader r(view());
  const std::uint32_t start = seq + static_cast<std::uint32_t>(pos);
  std::size_t i = pos, crc_start = 0;
  std::uint32_t need = 2, got = 0;
  std::uint8_t header[2] = {0, 0};
  while (got < need) {
    const std::uint32_t s = seq + static_cast<std::uint32_t>(i);
    if (marker_base_known && mpa_marker_at(s, marker_base, marker_stride)) {
      if (!r.has(i, kMpaMarkerLen)) return Cut::need_more;
      ++f.markers;
      if (r.be16(i) != 0 || r.be16(i + 2) != static_cast<std::uint16_t>(s - start)) ++f.marker_errors;
      i += kMpaMarkerLen;
      continue;
    }
    // Payload octets up to the next marker, the header's end or the CRC's start.
    std::uint32_t run = need - got;
    if (marker_base_known) run = std::min(run, mpa_next_marker(s, marker_base, marker_stride) - s);
    if (need > 2 && got < need - kMpaCrcLen) run = std::min(run, need - kMpaCrcLen - got);
    if (need > 2 && got == need - kMpaCrcLen) crc_start = i;
    if (!r.has(i, run)) return Cut::need_more;
    for (std::uint32_t k = 0; got + k < 2 && k < run; ++k) header[got + k] = r.u8(i + k);
    got += run;
    i += run;
    if (need == 2 && got == 2) {
      f.ulpdu_len = static_cast<std::uint16_t>(header[0] << 8 | header[1]);
      if (f.ulpdu_len < kDdpTaggedHeaderLen) return Cut::bad;
      need = mpa_fpdu_len(f.ulpdu_len);
    }
  }
  f.wire_len = i - pos;
  std::vector<std::uint8_t>& out = an->scratch_;  // the FPDU without its markers
  out.clear();
  for (std::size_t j = pos; out.size() < need;) {
    const std::uint32_t s = seq + static_cast<std::uint32_t>(j);
    if (marker_base_known && mpa_marker_at(s, marker_base, marker_stride)) {
      j += kMpaMarkerLen;
      continue;
    }
    std::size_t run = need - out.size();
    if (marker_base_known) run = std::min<std::size_t>(run, mpa_next_marker(s, marker_base, marker_stride) - s);
    const Bytes b = r.sub(j, run);
    out.insert(out.end(), b.begin(), b.end());
    j += run;
  }
  const ByteReader l{Bytes(out)};
  f.crc_wire = l.le32(need - kMpaCrcLen);
  f.crc_computed = crc32c(r.sub(pos, crc_start - pos));
  f.ulpdu = l.sub(2, f.ulpdu_len);
  return Cut::ok;
}

// Checks the markers a stride puts in the buffer, not the FPDUs (one of those
// may be corrupt): each must be 0x0000 and a distance back to the start of an
// FPDU (RFC 5044 section 4.3) whose ULPDU length is possible and whose wire
// length reaches the marker. Fits after two such markers.
Dir::Probe Dir::probe_stride(std::uint32_t stride) const {
  const ByteReader r(view());
  int checked = 0;
  for (std::uint32_t g = mpa_next_marker(seq, marker_base, stride); checked < 2; g += stride) {
    const std::size_t at = g - seq;
    if (!r.has(at, kMpaMarkerLen)) return Probe::need_more;
    if (r.be16(at) != 0) return Probe::fails;
    const std::uint32_t back = r.be16(at + 2), start = g - back;
    // The buffer starts at an FPDU: a marker in it points no further back.
    if (seq_lt(start, seq)) return Probe::fails;
    // An FPDU that starts on a marker position has its header after the marker.
    const std::size_t header = (start - seq) + (mpa_marker_at(start, marker_base, stride) ? kMpaMarkerLen : 0);
    if (!r.has(header, 4)) return Probe::need_more;
    const std::uint32_t len = mpa_fpdu_len(r.be16(header));
    if (r.be16(header) < kDdpTaggedHeaderLen || back >= len + kMpaMarkerLen * (len / stride + 2)) return Probe::fails;
    // DDP control (DV 1, reserved 0) and RDMAP version 1, unless a marker splits them.
    const std::uint32_t h = seq + static_cast<std::uint32_t>(header);
    const bool split = mpa_next_marker(h + 1, marker_base, stride) - h < 4;
    if (!split && ((r.u8(header + 2) & 0x3F) != 0x01 || (r.u8(header + 3) & 0xC0) != 0x40)) return Probe::fails;
    ++checked;
  }
  return Probe::fits;
}

// A marker error (or a bad CRC) with markers in use: before calling the framing
// broken, finds the stride the sender puts its markers at. A stride other than
// 512 is said once for the direction, and the stream decoded with it.
Dir::Probe Dir::settle_marker_stride() {
  std::uint32_t found = 0;
  // The smallest stride whose markers all check out (a multiple of it would too).
  for (std::uint32_t stride = 8; stride <= kMaxMarkerStride && !found; stride += 4) {
    const Probe p = probe_stride(stride);
    if (p == Probe::need_more && avail() < kStrideDecideBytes) return Probe::need_more;
    if (p == Probe::fits) found = stride;
  }
  stride_settled = true;
  if (found == marker_stride) return Probe::fits;
  anomaly(AnomalyKind::mpa_marker_stride, frame, found);
  if (found) {
    marker_stride = found;
    return Probe::fits;
  }
  mpa.quiet_framing = true;
  markers = false;  // hunt for FPDUs by their headers; those a marker falls in are lost
  return Probe::fails;
}

bool Dir::frame_one() {
  // The snap length cut the next FPDU's length: where the one after it starts
  // is unknown, not wrong. Framing is found again as after lost bytes.
  if (avail() >= kMpaLengthLen && overlaps_uncaptured(seq, seq + kMpaLengthLen)) {
    step(MpaUnit::Kind::bytes_lost);
    return true;
  }
  Fpdu f;
  Cut c = cut(0, f);
  if (c == Cut::need_more && !f.marker_errors) return false;
  if (markers && !stride_settled && (c != Cut::ok || f.marker_errors || (crc && f.crc_wire != f.crc_computed))) {
    const Probe p = settle_marker_stride();
    if (p == Probe::need_more) return false;
    c = cut(0, f);
  }
  if (c == Cut::need_more) return false;
  bool bad = c == Cut::bad;
  if (!bad && !f.uncaptured) {
    const int plausible = plausible_header(ByteReader(f.ulpdu.empty() ? Bytes() : Bytes(f.ulpdu.data() - 2, f.ulpdu.size() + 2)), 0);
    const bool crc_ok = crc && f.crc_wire == f.crc_computed;
    // Without a good CRC to vouch for it, a header that cannot be right means the framing is lost.
    if (plausible == 0 && !crc_ok) bad = true;
  }
  step(bad ? MpaUnit::Kind::not_an_fpdu : MpaUnit::Kind::fpdu, f.marker_errors);
  if (bad) {
    hunt_from = 1;
    return true;
  }
  emit(f);
  consume(f.wire_len);
  return true;
}

void Dir::accept_resync(std::size_t pos, bool crc_verified) {
  const bool infer_crc = !crc_known;
  if (infer_crc) {  // before FPDU mode starts: the flow shows it
    crc_known = true;
    crc = crc_verified;
  }
  resynced = true;
  step(MpaUnit::Kind::boundary_found, static_cast<std::uint32_t>(pos));
  ++an->stats_.resyncs;
  IwarpFlowInfo* fi = info();
  ++fi->resyncs;
  if (infer_crc) fi->crc_inferred = true;
  consume(pos);
}

// hunt() with markers at a known place: a marker points back at the header of
// the FPDU it sits in (RFC 5044 section 4.3).
bool Dir::hunt_by_markers() {
  const ByteReader r(view());
  Fpdu f;
  // A boundary before where this hunt starts was tried (after a bad FPDU at 0,
  // hunt_from is 1): taking it again framed the same bad FPDU forever.
  const std::uint32_t first_start = seq + static_cast<std::uint32_t>(hunt_from);
  for (;;) {
    const std::uint32_t m = mpa_next_marker(seq + static_cast<std::uint32_t>(hunt_from), marker_base, marker_stride);
    const std::size_t mo = m - seq;
    if (!r.has(mo, kMpaMarkerLen)) return false;
    const std::uint32_t start = m - r.be16(mo + 2);
    if (r.be16(mo) == 0 && seq_leq(first_start, start)) {
      // The search by headers' CRC budget (below) bounds this one too: with a
      // small stride (settle_marker_stride: down to 8) nearly every marker names
      // a candidate, and each resync that fails costs an FPDU's CRC for a few
      // bytes of progress (the fuzzer's 9 KB stream ran for minutes).
      const std::size_t at = start - seq;
      const std::uint64_t cost = r.has(at, 2) ? mpa_fpdu_len(r.be16(at)) : 0;
      if (hunt_crc_spent + cost > kHuntCrcStart + kHuntCrcPerByte * stream_bytes) return false;
      const Cut c = cut(at, f);
      if (c == Cut::need_more) return false;
      if (c == Cut::ok) {
        hunt_crc_spent += cost;
        accept_resync(at, crc && f.crc_wire == f.crc_computed);
        return true;
      }
    }
    hunt_from = mo + 1;
  }
}

// Finds the next FPDU boundary without the negotiation's help. Returns true when
// framing can go on (found), false when more bytes are needed.
bool Dir::hunt() {
  if (markers && marker_base_known) return hunt_by_markers();
  const ByteReader r(view());
  Fpdu f;
  const bool known = conn->iwarp_known();
  std::size_t first_incomplete = SIZE_MAX;
  std::size_t i = hunt_from;
  for (; i + 4 <= avail(); ++i) {
    const int h = plausible_header(r, i);
    if (h == 0) continue;
    if (h < 0) {
      first_incomplete = std::min(first_incomplete, i);
      continue;
    }
    // Out of CRC budget: wait for more of the stream before trying this one.
    const std::uint64_t cost = mpa_fpdu_len(r.be16(i));
    if (hunt_crc_spent + cost > kHuntCrcStart + kHuntCrcPerByte * stream_bytes) {
      first_incomplete = std::min(first_incomplete, i);
      break;
    }
    const Cut c = cut(i, f);
    if (c != Cut::ok) {
      if (c == Cut::need_more) first_incomplete = std::min(first_incomplete, i);
      continue;
    }
    hunt_crc_spent += cost;
    if (f.uncaptured) continue;
    if (f.crc_wire == f.crc_computed && (!crc_known || crc)) {  // 32 bits of evidence
      accept_resync(i, true);
      return true;
    }
    if (f.crc_wire != 0 || (crc_known && crc)) continue;
    bool pad_zero = true;
    for (std::size_t k = i + 2 + f.ulpdu_len; k < i + f.wire_len - kMpaCrcLen; ++k) pad_zero &= r.u8(k) == 0;
    if (!pad_zero) continue;
    // No CRC in use: the next FPDU header must be plausible too, or (on a
    // connection already known to carry MPA) the FPDU ends where the data does.
    const int next = plausible_header(r, i + f.wire_len);
    if (next == 1 || (next < 0 && known && i + f.wire_len == avail())) {
      accept_resync(i, false);
      return true;
    }
    if (next < 0) first_incomplete = std::min(first_incomplete, i);
  }
  hunted += i > hunt_from ? i - hunt_from : 0;
  if (first_incomplete != SIZE_MAX) {
    hunt_from = first_incomplete;
  } else {
    hunt_from = avail() > 3 ? avail() - 3 : 0;
  }
  if (!known && hunted > kHuntGiveUp) {
    step(MpaUnit::Kind::hunt_exhausted);
    buf.clear();
    off = 0;
    return false;
  }
  if (avail() > kHuntKeep && hunt_from > avail() / 2) consume(hunt_from - 3 > 0 ? hunt_from - 3 : 0);
  else if (avail() > kMaxBuffered) consume(avail() - kHuntKeep);
  return false;
}

void Dir::emit(const Fpdu& f) {
  IwarpPdu tmp;
  IwarpPdu* u = an->cur_out_ ? an->cur_out_->push() : nullptr;
  if (!u) u = &tmp;
  u->kind = IwarpPdu::Kind::fpdu;
  u->flow = flow();
  u->end_frame = frame_of_end(seq + static_cast<std::uint32_t>(f.wire_len));
  u->seq = seq;
  u->resync = resynced;
  u->ulpdu_len = f.ulpdu_len;
  u->pad = static_cast<std::uint8_t>(mpa_pad(f.ulpdu_len));
  u->markers = static_cast<std::uint8_t>(std::min<std::uint32_t>(f.markers, 255));
  u->crc = f.crc_wire;
  u->crc_computed = f.crc_computed;
  if (!crc) u->crc_status = MpaCrcStatus::not_negotiated;
  else if (f.uncaptured) u->crc_status = MpaCrcStatus::unverifiable;
  else u->crc_status = f.crc_wire == f.crc_computed ? MpaCrcStatus::ok : MpaCrcStatus::bad;
  // The header's length depends on its opcode (and a Terminate's flags), all
  // inside the span it decodes from: lost when a byte of that span was not
  // captured (markers inside widen it), not when only the payload or CRC was.
  const bool decoded = decode_ddp_segment(f.ulpdu, u->seg) == ParseStatus::ok;
  const auto header_end = static_cast<std::uint32_t>(kMpaLengthLen + u->seg.header_len + 4 * std::size_t{f.markers});
  u->header_decoded = decoded && !(f.uncaptured && overlaps_uncaptured(seq, seq + header_end));
  if (!u->header_decoded) u->seg = DdpSegment{};  // nothing read from lost bytes is kept
  if (u->header_decoded) keep_payload_head(f, *u);
  if (u->header_decoded && u != &tmp && an->keep_long_heads_) keep_long_head(f, *u);

  IwarpStats& st = an->stats_;
  IwarpFlowInfo* fi = info();
  ++st.fpdus;
  st.markers += f.markers;
  ++fi->fpdus;
  auto count_crc = [&](IwarpCrcCounts& c) {
    switch (u->crc_status) {
      case MpaCrcStatus::ok: ++c.ok; break;
      case MpaCrcStatus::bad: ++c.bad; break;
      case MpaCrcStatus::unverifiable: ++c.unverifiable; break;
      case MpaCrcStatus::not_negotiated: ++c.not_negotiated; break;
    }
  };
  count_crc(st.crc);
  count_crc(fi->crc_counts);
  if (u->crc_status == MpaCrcStatus::bad) anomaly(AnomalyKind::mpa_crc_bad, frame);
  if (u->header_decoded) {
    const std::uint8_t op = u->seg.ddp.opcode();
    ++st.by_opcode[op];
    st.bytes_by_opcode[op] += u->seg.payload_len;
    fi->payload_bytes += u->seg.payload_len;
    sequence_checks(*u);
  } else if (f.uncaptured) {
    header_not_captured();
  }
  an->note_unit();
}

// Only bytes the capture holds (markers inside the range widen the check).
void Dir::keep_payload_head(const Fpdu& f, IwarpPdu& u) const {
  const std::size_t from = u.seg.header_len;
  const std::size_t n = std::min<std::size_t>(IwarpPdu::kPayloadHead, u.seg.payload_len);
  if (f.ulpdu.size() < from + n) return;
  const auto end = static_cast<std::uint32_t>(2 + from + n + 4 * std::size_t{f.markers});
  if (f.uncaptured && overlaps_uncaptured(seq, seq + end)) return;
  std::copy_n(f.ulpdu.begin() + static_cast<std::ptrdiff_t>(from), n, u.payload_head.begin());
  u.payload_head_len = static_cast<std::uint8_t>(n);
}

// The frame's first Read Response payload, or long Send (its first segment);
// only bytes the capture holds.
void Dir::keep_long_head(const Fpdu& f, const IwarpPdu& u) const {
  IwarpFrame& out = *an->cur_out_;
  const std::uint8_t op = u.seg.ddp.opcode();
  const bool read_response = op == static_cast<std::uint8_t>(RdmapOpcode::read_response);
  const bool long_send = !u.seg.ddp.tagged && u.seg.ddp.qn == kQueueSend && u.seg.ddp.mo == 0 &&
                         u.seg.payload_len > IwarpPdu::kPayloadHead;
  if (!out.long_head.empty() || (!read_response && !long_send)) return;
  const std::size_t from = u.seg.header_len;
  const std::size_t n = std::min<std::size_t>(IwarpFrame::kLongHead, u.seg.payload_len);
  if (n == 0 || f.ulpdu.size() < from + n) return;
  if (f.uncaptured && overlaps_uncaptured(seq, seq + static_cast<std::uint32_t>(f.wire_len))) return;
  const Bytes b = f.ulpdu.subspan(from, n);
  out.long_head.assign(b.begin(), b.end());
  out.long_head_unit = static_cast<std::uint8_t>(&u - out.items.data());
}

// What the DDP/RDMAP state machine finds, as anomalies and statistics of the
// analysis; requests go to the peer direction, which answers them.
class Dir::DdpReport final : public DdpSink {
 public:
  DdpReport(Dir& dir, IwarpPdu& pdu, IwarpStats& stats) : dir_(dir), pdu_(pdu), stats_(stats) {}

  void finding(const DdpEvent& e, DdpFinding f, const DdpPendingRead* request) override {
    Anomaly a = dir_.make_anomaly(kind_of(f), dir_.frame);
    const DdpHeader& d = e.ddp;
    switch (f) {
      case kTerminate: {
        const RdmapTerminate& t = pdu_.seg.term;
        a.count = std::uint32_t{t.layer} << 16 | std::uint32_t{t.error_type} << 8 | t.error_code;
        break;
      }
      case kMsnGap:
        a.dest_qp = d.qn;
        a.psn = d.msn;
        a.expected_psn = e.expected_msn;
        a.count = d.msn - e.expected_msn;
        break;
      case kMoAtStart: case kMoJump:
        a.dest_qp = d.qn;
        a.psn = d.msn;
        a.count = d.mo;
        a.expected_psn = f == kMoAtStart ? 0 : e.expected_mo;
        break;
      case kToJump:
        a.psn = d.stag;
        a.expected_psn = e.expected_stag;
        a.count = static_cast<std::uint32_t>(d.to - e.expected_to);
        break;
      case kReadSizeMismatch:
        a.count = static_cast<std::uint32_t>(e.read_total);
        a.expected_psn = request->rq.read_size;
        break;
      case kUnmatchedResponse: break;
    }
    if (request) a.relate(request->frame);
    dir_.an->log_.add(a);
  }
  void read_requested(const RdmaReadRequest& rq) override {
    auto& pending = dir_.peer().ddp.reads;
    if (pending.size() >= DdpDirState::kMaxPendingRequests) pending.pop_front();
    pending.push_back(DdpPendingRead{rq, dir_.frame, dir_.ts_ns, 0});
  }
  void atomic_requested(std::uint32_t id) override {
    auto& pending = dir_.peer().ddp.atomics;
    if (pending.size() >= DdpDirState::kMaxPendingRequests) pending.pop_front();
    pending.push_back(DdpPendingAtomic{id, dir_.frame, dir_.ts_ns});
  }
  void read_answered(const DdpPendingRead& r) override {
    pdu_.request_frame = r.frame;
    pdu_.latency_us = static_cast<double>(dir_.ts_ns - r.ts_ns) * 1e-3;
    if (stats_.reads_matched == 0 || pdu_.latency_us < stats_.read_latency_min_us) stats_.read_latency_min_us = pdu_.latency_us;
    if (stats_.reads_matched == 0 || pdu_.latency_us > stats_.read_latency_max_us) stats_.read_latency_max_us = pdu_.latency_us;
    dir_.an->read_latency_sum_.add(pdu_.latency_us);
    stats_.read_latency_sum_us = dir_.an->read_latency_sum_.value();
    ++stats_.reads_matched;
  }
  void atomic_answered(const DdpPendingAtomic& r) override {
    pdu_.request_frame = r.frame;
    pdu_.latency_us = static_cast<double>(dir_.ts_ns - r.ts_ns) * 1e-3;
    ++stats_.atomics_matched;
  }

 private:
  static AnomalyKind kind_of(DdpFinding f) {
    switch (f) {
      case kMsnGap: return AnomalyKind::ddp_msn_gap;
      case kMoAtStart: case kMoJump: return AnomalyKind::ddp_mo_discontinuity;
      case kToJump: return AnomalyKind::ddp_to_discontinuity;
      case kReadSizeMismatch: return AnomalyKind::rdmap_read_size_mismatch;
      case kUnmatchedResponse: return AnomalyKind::rdmap_read_response_unmatched;
      case kTerminate: break;
    }
    return AnomalyKind::rdmap_terminate;
  }
  Dir& dir_;
  IwarpPdu& pdu_;
  IwarpStats& stats_;
};

// The snap length cut an FPDU's header: its queue, MSN or request are unknown.
// MSNs are followed again from the next header (as after lost bytes), and a
// response without a request seen is no longer an anomaly.
void Dir::header_not_captured() {
  ddp_reset(ddp, false);
  header_uncaptured = true;
}

void Dir::sequence_checks(IwarpPdu& u) {
  ddp.requests_complete = mpa.reliable && peer().mpa.reliable && !header_uncaptured && !peer().header_uncaptured;
  const DdpEvent e = ddp_classify(ddp, u.seg);
  DdpReport report(*this, u, an->stats_);
  ddp_apply(ddp, e, u.seg, report);
}

IwarpAnalyzer::IwarpAnalyzer(AnomalyLog& log) : log_(log), conns_(kMaxConnections) { scratch_.reserve(70000); }
IwarpAnalyzer::~IwarpAnalyzer() = default;

void IwarpAnalyzer::note_unit() { unit_in_frame_ = true; }

namespace {
// The address rule is endpoints.h's (a TCP segment has an IP header: IPv4 or IPv6).
Endpoint endpoint_of(const DecodedPacket& p, bool source) {
  Endpoint e;
  e.addr = address16(endpoints_of(p), source);
  e.port = source ? p.tcp->src_port : p.tcp->dst_port;
  return e;
}
}  // namespace

// Ends a connection's streams at the last frame; its flows keep their TCP counts.
void IwarpAnalyzer::close(Connection& c) {
  for (auto& d : c.dir) d->tcp.flush(last_frame_, last_ts_ns_, *d);
  if (c.iwarp_known())
    for (int i = 0; i < 2; ++i) flows_[c.flow_base + static_cast<std::uint32_t>(i)].tcp = c.dir[i]->tcp.stats();
  for (const auto& d : c.dir) stats_.tcp_retransmitted_segments += d->tcp.stats().retransmitted_segments;
}

// A new connection; the sender of its first segment (the key's lower endpoint
// or not) is its direction 0.
IwarpAnalyzer::Connection& IwarpAnalyzer::connection_for(const IwarpConnKey& key, bool from_lo, bool ipv6,
                                                         std::uint64_t frame) {
  const Endpoint lo{key.lo_addr, key.lo_port}, hi{key.hi_addr, key.hi_port};
  const std::uint32_t slot = conns_.emplace(
      key, [](const Connection& x) { return x.last_ts; },
      [this](std::uint32_t, Connection& x) {  // only at kMaxConnections
        ++stats_.retired_at_cap;
        close(x);
      },
      this, from_lo ? lo : hi, from_lo ? hi : lo);
  Connection& c = *conns_.at(slot);
  c.ipv6 = ipv6;
  c.point = key.point;
  c.created_frame = frame;
  return c;
}

void IwarpAnalyzer::add(const DecodedPacket& p, std::uint64_t frame, double ts, IwarpFrame& out, std::int64_t ts_ns) {
  if (ts_ns == kNoNs) ts_ns = std::llround(ts * 1e9);
  out.clear();
  if (!p.tcp || (!p.ipv4 && !p.ipv6)) return;
  last_frame_ = frame;
  last_ts_ = ts;
  last_ts_ns_ = ts_ns;
  const TcpHeader& t = *p.tcp;
  const Endpoint src = endpoint_of(p, true), dst = endpoint_of(p, false);
  const IwarpConnKey key = connection_key(src, dst, p.capture_point);
  constexpr std::uint32_t kNone = decltype(conns_)::kNone;
  std::uint32_t slot = conns_.find(key);
  // A new SYN on a tuple in use starts a new connection.
  if (slot != kNone && t.syn() && !t.ack_flag()) {
    const Connection& old = *conns_.at(slot);
    const Dir& od = *old.dir[old.dir[0]->src == src ? 0 : 1];
    if (od.tcp.started() && od.tcp.next_seq() != t.seq + 1) {
      conns_.erase(slot, [this](std::uint32_t, Connection& x) { close(x); });
      slot = kNone;
    }
  }
  if (slot == kNone && !t.syn() && p.tcp_payload_len == 0) return;
  if (slot == kNone && !t.syn() && adopt_damaged_port(p, frame)) return;
  Connection& c = slot != kNone ? *conns_.at(slot) : connection_for(key, src <= dst, p.ipv6.has_value(), frame);
  c.last_ts = ts;
  const int d = c.dir[0]->src == src ? 0 : 1;
  segment(c, d, p, frame, ts_ns, out);
  if (t.rst() || (c.dir[0]->fin && c.dir[1]->fin))
    conns_.erase(conns_.find(key), [this](std::uint32_t, Connection& x) { close(x); });
}

// A bit error in a TCP port makes a segment name no connection; its receiver drops it
// (the checksum covers the ports) and the sender resends it. Tie it back to the live
// connection one flipped port bit away whose checksum then holds, and keep it there as
// a damaged copy, so that the hole its loss leaves is not called a loss before the
// capture point. At most 32 lookups, only for data on a tuple no connection has.
bool IwarpAnalyzer::adopt_damaged_port(const DecodedPacket& p, std::uint64_t frame) {
  const Endpoint src = endpoint_of(p, true), dst = endpoint_of(p, false);
  for (unsigned bit = 0; bit < 32; ++bit) {
    Endpoint s = src, d = dst;
    (bit < 16 ? s : d).port ^= static_cast<std::uint16_t>(1u << (bit % 16));
    const std::uint32_t slot = conns_.find(connection_key(s, d, p.capture_point));
    if (slot == decltype(conns_)::kNone || !tcp_checksum_holds_with_ports(p, s.port, d.port)) continue;
    Connection& c = *conns_.at(slot);
    c.dir[c.dir[0]->src == s ? 0 : 1]->damaged = {p.tcp->seq, p.tcp_payload_len, frame};
    return true;
  }
  return false;
}

// One TCP segment of a live connection, in direction `d`.
void IwarpAnalyzer::segment(Connection& c, int d, const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns,
                            IwarpFrame& out) {
  const TcpHeader& t = *p.tcp;
  Dir& dir = *c.dir[d];
  cur_out_ = &out;
  unit_in_frame_ = false;
  if (t.syn()) dir.tcp.syn(t.seq);
  const std::uint32_t data_seq = t.syn() ? t.seq + 1 : t.seq;
  if (p.tcp_payload_len) {
    const std::uint64_t old_data = dir.tcp.stats().retransmitted_segments;
    dir.tcp.segment(data_seq, p.tcp_payload, p.tcp_payload_len, frame, ts_ns, dir, p.ipv4 ? std::int32_t{p.ipv4->id} : -1);
    if (dir.tcp.stats().retransmitted_segments != old_data && c.iwarp_known()) out.tcp_retransmissions = 1;
  }
  if (t.ack_flag()) {
    Dir& other = *c.dir[1 - d];
    if (other.tcp.held_bytes()) other.tcp.peer_ack(t.ack, frame, ts_ns, other);
  }
  if (unit_in_frame_) ++stats_.frames;
  cur_out_ = nullptr;
  peak_buffered_ = std::max(peak_buffered_, budget_.used);
  if (t.fin()) dir.fin = true;
}

void IwarpAnalyzer::sweep(double now) {
  conns_.retire_if([now](const Connection& c) { return now - c.last_ts > kIdleRetireSeconds && c.idle_state(); },
                   [this](std::uint32_t, Connection& c) { close(c); });
}

void IwarpAnalyzer::finish() {
  if (finished_) return;
  finished_ = true;
  // In creation order (slots are reused as connections close, so slot order
  // depends on the history); the results then do not depend on how the
  // connections were spread over the shards of analyze -j.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> open;
  conns_.for_each([&](std::uint32_t slot, const Connection& c) { open.emplace_back(c.created_frame, slot); });
  std::sort(open.begin(), open.end());
  for (const auto& [created, slot] : open) {
    log_.set_order_key(kFinishOrderKey + created);
    conns_.erase(slot, [this](std::uint32_t, Connection& c) { close(c); });
  }
}

IwarpAnalyzer::Bounds IwarpAnalyzer::bounds() const {
  return Bounds{conns_.peak(), conns_.cap_reached(), peak_buffered_, budget_.limit};
}

// Flows in order of identification (the log's order key then, ties by part and
// position); the totals summed, the READ latency sum exactly.
void IwarpAnalyzer::merge(std::span<const IwarpAnalyzer* const> parts, std::vector<std::vector<std::uint32_t>>& flow_index) {
  struct ConnRef {
    std::uint64_t key;
    std::size_t part, pos;  // pos: index of the connection's first flow
  };
  std::vector<ConnRef> conns;
  flow_index.assign(parts.size(), {});
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const IwarpAnalyzer& x = *parts[s];
    flow_index[s].assign(x.flows_.size(), UINT32_MAX);
    for (std::size_t i = 0; i + 1 < x.flows_.size(); i += 2) conns.push_back({x.flow_order_keys_[i], s, i});
    stats_.merge(x.stats_);
    read_latency_sum_.add(x.read_latency_sum_);
  }
  stats_.read_latency_sum_us = read_latency_sum_.value();
  std::sort(conns.begin(), conns.end(), [](const ConnRef& a, const ConnRef& b) {
    return std::tie(a.key, a.part, a.pos) < std::tie(b.key, b.part, b.pos);
  });
  for (const ConnRef& c : conns)
    for (std::size_t d = 0; d < 2; ++d) {
      flow_index[c.part][c.pos + d] = static_cast<std::uint32_t>(flows_.size());
      flows_.push_back(parts[c.part]->flows_[c.pos + d]);
      flow_order_keys_.push_back(c.key);
    }
  finished_ = true;
}

void IwarpStats::merge(const IwarpStats& o) {
  if (o.reads_matched) {
    if (reads_matched == 0 || o.read_latency_min_us < read_latency_min_us) read_latency_min_us = o.read_latency_min_us;
    if (reads_matched == 0 || o.read_latency_max_us > read_latency_max_us) read_latency_max_us = o.read_latency_max_us;
  }
  connections += o.connections;
  negotiated += o.negotiated;
  rejected += o.rejected;
  retired_at_cap += o.retired_at_cap;
  fpdus += o.fpdus;
  frames += o.frames;
  crc.merge(o.crc);
  for (std::size_t i = 0; i < by_opcode.size(); ++i) {
    by_opcode[i] += o.by_opcode[i];
    bytes_by_opcode[i] += o.bytes_by_opcode[i];
  }
  markers += o.markers;
  resyncs += o.resyncs;
  reads_matched += o.reads_matched;
  atomics_matched += o.atomics_matched;
  tcp_holes_recovered += o.tcp_holes_recovered;
  tcp_holes_lost += o.tcp_holes_lost;
  tcp_bytes_lost += o.tcp_bytes_lost;
  tcp_retransmitted_segments += o.tcp_retransmitted_segments;
}

}  // namespace rdmadiag::decode
