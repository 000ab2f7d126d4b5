// What the IB/RoCE transport analysis reports per flow (one direction of
// traffic to one queue pair), and the flow's key: the result types shared by
// the analyzer (transport_analysis.h), its per-flow sequence machines
// (rc_requester.h, rc_responder.h, unreliable_sequence.h) and the exporters.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "decode/packet.h"

namespace rdmadiag::decode {

// An owning pointer whose copies copy what it points to (null stays null):
// lazily made parts of a value type stay value types.
template <class T>
class CopyingPtr : public std::unique_ptr<T> {
 public:
  using std::unique_ptr<T>::unique_ptr;
  using std::unique_ptr<T>::operator=;
  CopyingPtr() = default;
  CopyingPtr(const CopyingPtr& o) : std::unique_ptr<T>(o ? std::make_unique<T>(*o) : nullptr) {}
  CopyingPtr& operator=(const CopyingPtr& o) {
    if (this != &o) std::unique_ptr<T>::operator=(o ? std::make_unique<T>(*o) : nullptr);
    return *this;
  }
  CopyingPtr(CopyingPtr&&) noexcept = default;
  CopyingPtr& operator=(CopyingPtr&&) noexcept = default;
};

// Latency samples of one kind of operation: exact min/max/count, and a bounded
// deterministic reservoir for the percentiles.
// Allocated at its first sample: a flow has six of these (four op classes,
// recovery) and most flows of a many-QP capture fill none or one, so an empty
// one is a null pointer (8 bytes, not ~100).
class LatencyStats {
 public:
  static constexpr std::size_t kReservoir = 8192;
  void add(double us);
  std::uint64_t count() const { return d_ ? d_->count : 0; }
  double min() const { return d_ ? d_->min : 0; }
  double max() const { return d_ ? d_->max : 0; }
  double mean() const { return d_ ? d_->sum / static_cast<double>(d_->count) : 0; }
  double percentile(double p) const;  // p in [0, 100]; exact while count <= kReservoir

 private:
  struct Data {
    std::vector<float> samples;
    std::uint64_t count = 0;
    double min = 0, max = 0, sum = 0;
    std::uint64_t rng = 0x9E3779B97F4A7C15ULL;
    bool sorted = true;
    std::vector<float> sorted_copy;
  };
  CopyingPtr<Data> d_;  // mutable through a const LatencyStats: percentile() sorts a copy once
};

enum class OpClass : std::uint8_t { write, read, send, atomic, count_ };
std::string_view to_string(OpClass c);

enum class Pairing : std::uint8_t { none, cm, inferred_psn, inferred_only_flow };
std::string_view to_string(Pairing p);

struct FlowKey {
  Transport transport = Transport::other;
  std::uint8_t addr_len = 0;  // 2 (LID), 4 (IPv4), 16 (IPv6 / GID)
  std::uint16_t point = 0;    // DecodedPacket::capture_point (0: the input's only one)
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
  std::uint32_t dest_qp = 0;
  std::uint32_t src_qp = 0;  // UD only (from the DETH); 0 otherwise
  // Sets transport, addr_len and point in one 4-byte store: the comparison below
  // loads them as one word, which narrower stores just before could not forward
  // (a stall on every packet's look-up).
  void set_kind(Transport t, std::uint8_t len, std::uint16_t capture_point = 0);
  // Field by field as the defaulted one, the addresses as two 8-byte words each: the
  // defaulted comparison called memcmp twice per look-up (2 % of analyze's instructions).
  [[gnu::always_inline]] friend bool operator==(const FlowKey& a, const FlowKey& b) {
    return a.transport == b.transport && a.addr_len == b.addr_len && a.point == b.point && a.dest_qp == b.dest_qp &&
           a.src_qp == b.src_qp &&
           same_16(a.src, b.src) && same_16(a.dst, b.dst);
  }

 private:
  static bool same_16(const std::array<std::uint8_t, 16>& x, const std::array<std::uint8_t, 16>& y) {
    std::uint64_t a[2], b[2];
    std::memcpy(a, x.data(), 16);
    std::memcpy(b, y.data(), 16);
    return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
  }
};
static_assert(sizeof(Transport) == 1 && offsetof(FlowKey, addr_len) == offsetof(FlowKey, transport) + 1 &&
              offsetof(FlowKey, point) == offsetof(FlowKey, transport) + 2 && sizeof(FlowKey) == 44);
inline void FlowKey::set_kind(Transport t, std::uint8_t len, std::uint16_t capture_point) {
  std::uint8_t bytes[4] = {static_cast<std::uint8_t>(t), len};
  std::memcpy(bytes + 2, &capture_point, 2);
  std::memcpy(reinterpret_cast<unsigned char*>(this) + offsetof(FlowKey, transport), bytes, 4);
}

// Word-at-a-time (the key's own bytes, zero past addr_len): this runs once per
// packet, inlined (a call was ~1 % of analyze's CPU).
struct FlowKeyHash {
  [[gnu::always_inline]] std::size_t operator()(const FlowKey& k) const {
    std::uint64_t w[4];
    std::memcpy(w, k.src.data(), 16);
    std::memcpy(w + 2, k.dst.data(), 16);
    std::uint64_t h =
        (static_cast<std::uint64_t>(k.transport) << 56) ^ (static_cast<std::uint64_t>(k.point) << 40) ^
        (static_cast<std::uint64_t>(k.src_qp) << 24) ^ k.dest_qp;
    const auto mix = [&h](std::uint64_t x) { h = (h ^ x) * 0x9E3779B97F4A7C15ULL + (h >> 31); };
    mix(w[0]);
    mix(w[2]);
    if (k.addr_len > 8) {  // IPv6, GIDs (a LID or an IPv4 address leaves these words zero)
      mix(w[1]);
      mix(w[3]);
    }
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return static_cast<std::size_t>(h ^ (h >> 32));
  }
};

// The same two ends (and transport) with other QP numbers; with none, the key
// of the two ends alone.
inline FlowKey with_qps(FlowKey k, std::uint32_t dest_qp = 0, std::uint32_t src_qp = 0) {
  k.dest_qp = dest_qp;
  k.src_qp = src_qp;
  return k;
}

// What a healthy flow never counts (sequence faults, NAKs, failed checks): a
// flow's FlowFaults is built at its first fault, so that a new flow writes, and
// a finished one copies, four cache lines of summary instead of seven.
struct FlowFaults {
  // PSN sequencing
  std::uint64_t gaps = 0, missing = 0, gaps_recovered = 0;
  std::uint64_t duplicates = 0, out_of_order = 0;
  std::uint64_t retransmissions = 0;           // packets resent
  std::uint64_t retransmission_episodes = 0;   // go-back-N bursts
  std::uint64_t timeout_retransmissions = 0;   // episodes with no NAK before them, resending lost packets
  // Resends of packets whose original passed the capture point, with no NAK and no
  // gap before them: the requester's ACK timer fired before the ACK came back (a
  // slow responder). Counted and flagged per packet, but not an anomaly: nothing was lost.
  std::uint64_t spurious_retransmissions = 0;
  // READ responses (and atomic ACKs) sent again with a PSN the capture already
  // held: the answers to a re-issued READ or a resent atomic (IBA 9.7.5.1.2). Not new data, not a gap.
  std::uint64_t resent_responses = 0;
  // PSNs a go-back-N resend after a NAK skipped although an earlier copy had passed
  // the capture point: the resent copy was lost before it (not counted in `missing`,
  // which counts PSNs the capture never held).
  std::uint64_t lost_resends = 0;
  // NAKs sent on this flow
  std::array<std::uint64_t, 5> naks{};         // by NakCode
  std::uint64_t rnr_naks = 0;
  // other checks
  std::uint64_t bad_opcode_sequence = 0, length_mismatches = 0, pkey_changes = 0, icrc_bad = 0;
};

// Counters and results of one flow, as reported.
struct FlowSummary {
  // What every packet of the flow updates comes first: the transport analysis'
  // live flow holds this struct near the start of its state, so that these
  // share the cache lines of the flow's key (decode/flow_slots.h).
  std::uint32_t index = 0;
  TransportService service = TransportService::reserved;
  Pairing pairing = Pairing::none;
  std::uint64_t packets = 0, bytes = 0, payload_bytes = 0;
  std::uint64_t last_frame = 0;
  double last_ts = 0;
  std::uint64_t requests = 0, responses = 0;
  std::uint64_t ecn_ect = 0;
  std::uint32_t pmtu = 0;            // inferred (largest FIRST/MIDDLE payload) or from CM
  bool pmtu_from_cm = false;
  FlowKey key;
  std::int64_t peer = -1;            // index of the reverse flow, when paired
  std::uint32_t peer_qp = 0;         // the QP at the source side (the reverse flow's destination QP)
  std::uint64_t first_frame = 0;
  double first_ts = 0;
  std::uint64_t acks = 0;            // ACKs sent on this flow
  // congestion
  std::uint64_t ecn_ce = 0, cnp = 0, fecn = 0, becn = 0;  // ECN-capable packets: ecn_ect, above
  CopyingPtr<FlowFaults> fault_counts;  // made at the first fault: use faults() / faults_for_update()
  std::array<LatencyStats, static_cast<std::size_t>(OpClass::count_)> latency{};  // requests on this flow
  LatencyStats recovery;             // gap seen -> gap filled, microseconds
  // The sequence faults, NAKs and failed checks (all zero on a healthy flow).
  const FlowFaults& faults() const {
    static const FlowFaults none{};
    return fault_counts ? *fault_counts : none;
  }
  FlowFaults& faults_for_update() {
    if (!fault_counts) fault_counts = std::make_unique<FlowFaults>();
    return *fault_counts;
  }
  std::uint64_t problems() const {
    const FlowFaults& f = faults();
    std::uint64_t n = f.gaps + f.duplicates + f.out_of_order + f.retransmission_episodes + f.rnr_naks +
                      f.bad_opcode_sequence + f.length_mismatches + f.pkey_changes + f.icrc_bad;
    for (auto c : f.naks) n += c;
    return n;
  }
};

}  // namespace rdmadiag::decode
