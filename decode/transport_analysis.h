// IB / RoCE transport analysis: the stateful pass over decode results that
// Wireshark's InfiniBand dissector lacks. Rules from IBA Vol 1 ch. 9.7
// (reliable service: PSN sequencing, ACK/NAK generation and go-back-N
// retransmission, RDMA READ PSN reservation) and 9.8 (unreliable services),
// plus RoCEv2 congestion signals (Annex A17.9: ECN and CNP).
//
// A flow is one direction of traffic to one destination QP: (source address,
// destination address, destination QP) for RoCE, (SLID, DLID, destination QP)
// for native IB, plus the source QP for UD. Requests on a flow use the
// requester's PSN space; responses and ACKs travel on the reverse flow in that
// same space. Memory is bounded by the live flows (idle ones are retired into
// summaries, and those are capped too), never by the number of packets.
#pragma once
#include <array>
#include <cstdint>
#include <compare>
#include <cstddef>
#include <deque>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/analyzer.h"
#include "decode/flow_slots.h"
#include "decode/flow_summary.h"
#include "decode/icrc_origin.h"
#include "decode/seq_sink.h"

namespace rdmadiag::decode {

struct SeqPacket;
struct SeqFacts;
struct RequesterState;

// Every flow's summary, in creation order (TransportAnalyzer::flows()): the
// retired flows' as the analyzer kept them and the live flows' where they are,
// in their cells. Copying each live flow's summary into one list at the end was
// 8 MB of fresh memory written with 16K connections (32 MB at the cap) for
// reports that read each summary once.
class FlowList {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = FlowSummary;
    using difference_type = std::ptrdiff_t;
    using pointer = const FlowSummary*;
    using reference = const FlowSummary&;
    iterator() = default;
    explicit iterator(FlowSummary* const* at) : at_(at) {}
    reference operator*() const { return **at_; }
    pointer operator->() const { return *at_; }
    reference operator[](difference_type n) const { return *at_[n]; }
    iterator& operator++() { ++at_; return *this; }
    iterator operator++(int) { iterator t = *this; ++at_; return t; }
    iterator& operator--() { --at_; return *this; }
    iterator operator--(int) { iterator t = *this; --at_; return t; }
    iterator& operator+=(difference_type n) { at_ += n; return *this; }
    iterator& operator-=(difference_type n) { at_ -= n; return *this; }
    friend iterator operator+(iterator i, difference_type n) { return i += n; }
    friend iterator operator+(difference_type n, iterator i) { return i += n; }
    friend iterator operator-(iterator i, difference_type n) { return i -= n; }
    friend difference_type operator-(iterator a, iterator b) { return a.at_ - b.at_; }
    friend bool operator==(iterator a, iterator b) { return a.at_ == b.at_; }
    friend auto operator<=>(iterator a, iterator b) { return a.at_ <=> b.at_; }

   private:
    FlowSummary* const* at_ = nullptr;
  };
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const FlowSummary& operator[](std::size_t i) const { return *items_[i]; }
  const FlowSummary& at(std::size_t i) const { return *items_.at(i); }
  iterator begin() const { return iterator(items_.data()); }
  iterator end() const { return iterator(items_.data() + items_.size()); }

 private:
  friend class TransportAnalyzer;
  std::vector<FlowSummary*> items_;
};

class TransportAnalyzer {
 public:
  static constexpr std::size_t kMaxLiveFlows = 1 << 16;
  static constexpr std::size_t kMaxRetiredFlows = 1 << 17;
  // The pairing index files unpaired requesters by PSN in buckets of
  // 2^kPsnBucketBits PSNs (2^(24 - kPsnBucketBits) buckets per pair of ends).
  static constexpr unsigned kPsnBucketBits = 12;
  // How far below a requester's first unanswered request a response's PSN may
  // name a request the capture point missed and still pair with it (a NAK for a
  // burst lost before the capture point). Farther, the PSN is as likely another
  // connection's: the response waits for one that pairs surely.
  static constexpr std::int32_t kUnseenBelow = 256;
  static constexpr double kIdleRetireSeconds = 120.0;

  explicit TransportAnalyzer(AnomalyLog& log);
  ~TransportAnalyzer();

  static constexpr std::int64_t kNoNs = INT64_MIN;  // `ts_ns` not given: taken from `ts`
  void add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out, std::int64_t ts_ns = kNoNs,
           const FlowAhead* ahead = nullptr);
  // The flow key of the packet add() had last, and its hash (the congestion
  // analysis keys its flows the same way, except UD: it need not hash it again).
  // `cc_slot`: a word in that flow's state for the congestion analysis to
  // remember its own slot for the flow (kept in a line the packet has already
  // loaded: a look-up in a second table misses the cache with many flows).
  struct KeyedFlow {
    FlowKey key;
    std::uint64_t hash = 0;
    std::uint32_t* cc_slot = nullptr;
    bool had_packets = false;  // the flow had packets before this one (not only a CM exchange)
  };
  const KeyedFlow& last_key() const { return last_key_; }
  // The congestion analysis that will see each packet next: its state for the
  // flow is loaded ahead as soon as the flow is found.
  void set_next_pass(const CongestionAnalyzer* cc) { cc_ahead_ = cc; }
  // Looking ahead over a batch of frames decoded before add() sees them (with
  // many flows each flow state is a miss; a batch's misses then overlap
  // instead of each stalling its packet). Three steps per frame, each once the
  // previous step's loads have had time to arrive: 0 computes the packet's flow
  // key and starts loading its index line, 1 the cells that may hold the flow,
  // 2 (the cell in) finds its slot and loads the states add() reads next. Only
  // loads and the key, hash and slot add() would compute (`a`, given to add()).
  void look_ahead(const DecodedPacket& p, FlowAhead& a, int step) const;
  // While the flow states fit a core's L2 cache a look-up seldom misses:
  // loading ahead would only repeat its work.
  static constexpr std::size_t kLookAheadFromBytes = 512 * 1024;
  bool looks_ahead() const;
  // Retires the flows idle for kIdleRetireSeconds at time `now` (the Analyzer
  // calls it every kSweepFrames frames, counted over the whole input, so that a
  // sharded analysis sweeps at the same points as one thread).
  void sweep(double now) { retire_idle(now); }
  // Lists every flow's summary in flows(), once (a second call does
  // nothing); no packet may follow. The live flows' states stay allocated
  // until the analyzer is destroyed (flows() reads their summaries there).
  void finish();

  // Every flow seen (live and retired), in creation order, after finish()
  // (empty before): valid as long as the analyzer.
  const FlowList& flows() const { return listed_; }
  std::uint64_t evicted_flows() const { return evicted_; }
  // Flows retired while still active because kMaxLiveFlows were live: each is
  // listed, but a later packet of it starts a new flow (its sequence restarts).
  std::uint64_t cap_retired_flows() const { return cap_retired_; }
  // Packets whose bad ICRC was found not the wire's (icrc_origin.h): of the
  // capture summary's bad ICRCs, those that are not corruption.
  std::uint64_t icrc_not_wire_packets() const { return icrc_not_wire_packets_; }
  // How many index buckets and candidate flows pairing responses with their
  // requesters has looked at: the test that this is O(1) per packet, whatever
  // the number of QPs between two ends, counts these.
  std::uint64_t pairing_probes() const { return pair_probes_; }
  std::uint32_t global_pmtu() const { return global_pmtu_; }
  // A path MTU the user knows (256..4096): used for every flow instead of the
  // inferred one (READ PSN reservations, FIRST/MIDDLE payload checks). 0: infer.
  void set_pmtu_override(std::uint32_t pmtu) { pmtu_override_ = pmtu; }
  // A shard of a sharded analysis: keep what AnalyzerMerge::cm_split checks.
  void track_cm_ids() { track_cm_ids_ = true; }
  // What a shard kept of the CM exchanges: REQ communication IDs, REPs that found no REQ.
  bool cm_ids_overflow() const { return cm_ids_overflow_; }
  std::span<const std::uint32_t> cm_req_ids() const { return cm_req_ids_; }
  std::span<const std::uint32_t> cm_unmatched_reps() const { return cm_unmatched_reps_; }
  // Corrupt packets that fitted no flow and were alone on their address pair
  // (a bit error in an address): one analyzer places them by the hosts one bit
  // away, a shard of a sharded analysis may not hold those hosts' flows.
  std::uint64_t unplaced_alone_on_pair() const { return unplaced_alone_; }

  // How close this analyzer came to its bounds (for a sharded analysis to tell
  // whether one analyzer would have reached them).
  struct Bounds {
    bool cap_reached = false;       // kMaxLiveFlows or kMaxRetiredFlows forced a retirement or eviction
    std::size_t peak_live = 0;      // most flows live at once
    std::size_t flows = 0;          // flows listed
  };
  Bounds bounds() const;

  // Into this analyzer (one that saw no frame; finished by it): the flows of
  // finished shards (their flows() are empty after), in creation order (the
  // frame that created each; ties by shard), peers renumbered, totals added.
  // flow_index[s][i]: the merged index of flow i of part s. The summaries are
  // listed where the parts hold them, not copied: the parts must outlive this
  // analyzer's flows() (cli/parallel_analysis.h keeps the shards to the exit).
  void merge(std::span<TransportAnalyzer* const> parts, std::vector<std::vector<std::uint32_t>>& flow_index);

  // Forward links found so far: request frame -> (response frame, latency µs).
  // Filled only when enabled (the two-pass --packets output uses it).
  void enable_forward_links(bool on) { forward_links_on_ = on; }
  struct ForwardLink {
    std::uint64_t response_frame;
    double latency_us;
  };
  const std::unordered_map<std::uint64_t, ForwardLink>& forward_links() const { return forward_; }

  struct Flow;  // state (transport_analysis.cpp)

 private:
  Flow& flow_for(const DecodedPacket& p, std::uint64_t frame, double ts, const FlowAhead* ahead);
  static TransportService flow_key(const DecodedPacket& p, FlowKey& k);
  void prefetch_states(const Flow& f) const;
  void prefetch_pairing(const DecodedPacket& p, const FlowKey& k) const;
  Flow& create_flow(const FlowKey& k, std::uint64_t hash, TransportService service, std::uint64_t frame, double ts);
  void count_packet(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out);
  void check_pkey(Flow& f, const DecodedPacket& p, std::uint64_t frame, PacketAnalysis& out);
  std::size_t report_bad_crc(Flow& f, const DecodedPacket& p, std::uint64_t frame, PacketAnalysis& out);
  void corrupt_packet(Flow& f, const DecodedPacket& p, SeqPacket& sp, IcrcOriginTracker::Direction* origin,
                      PacketAnalysis& out);
  IcrcOriginTracker::Direction* icrc_origin(Flow& f, std::uint64_t frame);
  void learn_icrc_origin(Flow& f, const DecodedPacket& p, const OpcodeInfo& info, std::uint64_t frame);
  void withdraw_corrupt_verdicts(IcrcOriginTracker::Direction& d, Flow& answer_flow);
  void replay_intact(Flow& f, const IcrcOriginTracker::Held& h);
  void requester(Flow& f, const SeqFacts& p, SeqPacket& sp, PacketAnalysis& out);
  void responder(Flow& f, const SeqFacts& p, const SeqPacket& sp, PacketAnalysis& out);
  void unreliable(Flow& f, const DecodedPacket& p, const SeqPacket& sp, PacketAnalysis& out);
  void set_span(const Flow& f, const SeqFacts& p, SeqPacket& sp) const;
  void cm_message(const DecodedPacket& p, std::uint64_t frame, double ts);
  void cm_message(const CmMessage& cm, const FlowKey& ends, std::uint64_t frame, double ts, bool replayed);
  void hold_cm(IcrcOriginTracker::Direction& d, const DecodedPacket& p, std::uint64_t frame, double ts);
  void note_cm_id(std::vector<std::uint32_t>& ids, std::uint32_t id);
  Flow* peer_requester(Flow& resp, std::uint32_t psn, bool seq_nak = false);
  Flow* one_bit_from(const Flow& f, const DecodedPacket& p);
  bool follows_unplaced(const Flow& f, std::uint64_t frame, bool ack) const;
  void place_corrupt_response(Flow& f, const DecodedPacket& p, const SeqPacket& sp);
  Flow* infer_peer(Flow& resp, std::uint32_t psn, bool seq_nak);
  struct Fits {  // the candidates a response's PSN fits, by how (psn_fit)
    Flow* holder = nullptr;
    Flow* unseen = nullptr;
    std::uint32_t holders = 0, unseens = 0;
  };
  void fits_in_bucket(const Flow& resp, std::uint64_t reverse, std::uint32_t bucket, std::uint32_t psn, bool seq_nak,
                      Fits& fits);
  void pair(Flow& a, Flow& b, Pairing how);
  void index_unpaired(Flow& f);
  void unindex_unpaired(Flow& f);
  std::uint32_t unpaired_bucket(std::uint64_t host_pair, std::uint32_t bucket);
  std::uint32_t pmtu_for(const Flow& f) const;
  void learn_pmtu(Flow& f, std::uint32_t payload);
  void note_path_pmtu(const Flow& f, std::uint32_t pmtu);
  void retire_idle(double now);
  void keep_summary(FlowSummary&& s);
  void retire(std::uint32_t slot, Flow& f);
  void settle_spurious(Flow& f);
  void note_unplaced_ack(RequesterState& q) const;
  void link_forward(std::uint64_t request_frame, std::uint64_t response_frame, double latency_us);

  AnomalyLog& log_;
  FlowSlots<FlowKey, FlowKeyHash, Flow> flows_;  // live flows (at most kMaxLiveFlows)
  // The pairing index: the live, started, still unpaired reliable requester flows
  // (the only candidates a response can be paired with), by (transport, source,
  // destination) and the PSN bucket of their next request PSN (high_next >>
  // kPsnBucketBits); and per (transport, source, destination) how many there are
  // and the XOR of their slots (with one, that is its slot). A response looks at
  // the buckets just above its PSN, never at the paired flows or other PSNs.
  // A bucket is a list threaded through its flows' links (links_, by slot); the
  // flat index holds its first flow's slot. Memory: one index entry per
  // non-empty bucket and one 24-byte link per slot of the live-flow table.
  struct BucketKeyHash {
    std::size_t operator()(std::uint64_t k) const { return static_cast<std::size_t>((k ^ (k >> 29)) * 0xBF58476D1CE4E5B9ULL); }
  };
  FlowTable<std::uint64_t, BucketKeyHash> unpaired_by_psn_;
  struct UnpairedEnds {
    std::uint32_t count = 0;
    std::uint32_t slot_xor = 0;
  };
  std::unordered_map<std::uint64_t, UnpairedEnds> unpaired_;
  // The buckets' lists, by slot: what a search reads of each flow in a bucket
  // (its ends, its neighbours, the PSNs its unanswered requests span while
  // indexed), apart from the flows' cells, so that passing over a bucket reads
  // this dense array instead of one cold cell per flow (with many QPs between
  // two ends, each a miss).
  struct PairLink {
    std::uint64_t host_pair = 0;
    std::uint32_t next = UINT32_MAX, prev = UINT32_MAX;
    std::uint32_t high_next = 0;
    std::uint32_t first_unanswered = 0;  // the first PSN of its first pending request, or high_next
  };
  std::vector<PairLink> links_;  // one per slot ever indexed (at most kMaxLiveFlows)
  PairLink& link_of(std::uint32_t slot);
  enum class PsnFit : std::uint8_t { holds, unseen, none };
  PsnFit psn_fit(const PairLink& l, std::uint32_t slot, std::uint32_t psn, bool seq_nak);
  std::uint64_t pair_probes_ = 0;  // candidate flows and buckets looked at while pairing (pairing_probes())
  std::vector<FlowSummary> summaries_;  // the retired flows' (after a merge: empty, the parts hold them)
  FlowList listed_;                     // after finish(): summaries_ and the live flows', in creation order
  std::uint64_t evicted_ = 0;       // flows past kMaxRetiredFlows: only counted
  bool finished_ = false;           // finish() ran: listed_ is complete
  std::uint64_t cap_retired_ = 0;   // flows retired at the live-flow cap (cap_retired_flows())
  std::uint64_t icrc_not_wire_packets_ = 0;
  std::uint32_t next_index_ = 0;
  std::uint32_t global_pmtu_ = 0;  // the largest PMTU learned on any flow (reported only)
  // No live flow's last_ts is below this (lowered as flows are made and
  // counted, recomputed by each sweep that walks them): a sweep at a time
  // within kIdleRetireSeconds of it has nothing to retire and skips the walk
  // over every flow's cell.
  double live_ts_floor_ = std::numeric_limits<double>::infinity();
  std::uint32_t pmtu_override_ = 0;
  // Per path (the unordered pair of endpoint addresses): the live flows on it and
  // the largest PMTU learned on any of them, the fallback for a flow that has
  // learned none. A path MTU is a property of the path; keeping it per path also
  // keeps every flow's analysis within its own address pair (analyze -j).
  struct PathState {
    std::uint32_t flows = 0;
    std::uint32_t pmtu = 0;
  };
  std::unordered_map<std::uint64_t, PathState> paths_;
  // Pending CM pairing: REQ (local comm id) -> requester side (address, QPN, PSN, MTU).
  struct CmSide {
    FlowKey from;  // addresses of the REQ sender (src) and receiver (dst)
    std::uint32_t qpn = 0, psn = 0;
    std::uint8_t mtu_code = 0;
  };
  std::unordered_map<std::uint64_t, CmSide> cm_reqs_;  // by Communication ID and capture point
  // Sharded analysis only (AnalyzerMerge::cm_split): the CM REQs seen and the
  // REPs that found no REQ, to tell when a REP answered a REQ sent between
  // other addresses (so in another shard). Bounded; past the bound the merge
  // cannot tell.
  bool track_cm_ids_ = false;
  bool cm_ids_overflow_ = false;
  std::vector<std::uint32_t> cm_req_ids_, cm_unmatched_reps_;
  bool forward_links_on_ = false;
  std::unordered_map<std::uint64_t, ForwardLink> forward_;
  // The last corrupt packet that fitted no started flow (a damaged QP number made
  // it look like a new one): the flow between the same hosts whose packet comes
  // right after it may miss the PSN it carried (not a loss).
  std::uint64_t unplaced_frame_ = 0;
  FlowKey unplaced_hosts_;
  bool unplaced_ack_ = false;  // it says it is an ACK or atomic ACK (what its requester would drop)
  std::uint32_t unplaced_psn_ = 0;
  // The last kRecentUnplaced of those packets that said they were requests, for
  // when the next packet between those hosts is another flow's (many QPs between
  // two ends): a later request of the flow that skips exactly the PSN one of them
  // carried is that packet's flow (a bit error in an address or QP number leaves
  // the PSN as sent). Each is used once; the oldest is overwritten.
  struct UnplacedRequest {
    std::uint64_t frame = 0;  // 0: empty
    FlowKey hosts;
    std::uint32_t psn = 0;
  };
  static constexpr std::size_t kRecentUnplaced = 8;
  std::array<UnplacedRequest, kRecentUnplaced> recent_unplaced_{};
  std::uint32_t recent_unplaced_count_ = 0;  // entries in use (a cheap per-packet test)
  std::uint32_t recent_unplaced_next_ = 0;   // the entry the next one overwrites
  std::uint64_t unplaced_alone_ = 0;         // unplaced_alone_on_pair()
  void remember_unplaced_request(const FlowKey& hosts, std::uint32_t psn, std::uint64_t frame);
  bool skips_unplaced_request(const Flow& f, std::uint32_t psn);
  // Whether each direction's captured ICRCs are the wire's (icrc_origin.h).
  IcrcOriginTracker origin_;
  SeqSink::LinkFn link_fn_;
  KeyedFlow last_key_;
  const CongestionAnalyzer* cc_ahead_ = nullptr;
};

}  // namespace rdmadiag::decode
