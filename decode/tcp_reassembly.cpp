#include "decode/tcp_reassembly.h"

#include <algorithm>

namespace rdmadiag::decode {

TcpStream::~TcpStream() { release(held_bytes_); }

TcpStream::TcpStream(TcpStream&& o) noexcept
    : budget_(o.budget_), started_(o.started_), saw_syn_(o.saw_syn_), next_(o.next_), held_(std::move(o.held_)),
      held_bytes_(o.held_bytes_), gap_open_(o.gap_open_), gap_seq_(o.gap_seq_), gap_frame_(o.gap_frame_),
      gap_ts_ns_(o.gap_ts_ns_), gap_fill_(o.gap_fill_), stats_(o.stats_) {
  o.held_bytes_ = 0;
  o.held_.clear();
}

void TcpStream::release(std::size_t n) {
  held_bytes_ -= n;
  if (budget_) budget_->used -= n;
}

void TcpStream::syn(std::uint32_t seq) {
  if (started_ && saw_syn_ && next_ == seq + 1) return;  // a retransmitted SYN
  release(held_bytes_);
  held_.clear();
  gap_open_ = false;
  started_ = true;
  saw_syn_ = true;
  next_ = seq + 1;
}

void TcpStream::deliver(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t frame, std::int64_t ts_ns,
                        TcpStreamSink& sink) {
  stats_.bytes += wire_len;
  next_ = seq + wire_len;
  sink.stream_data(seq, captured, wire_len, frame, ts_ns);
}

void TcpStream::segment(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t frame, std::int64_t ts_ns,
                        TcpStreamSink& sink, std::int32_t ip_id) {
  if (wire_len == 0) return;
  ++stats_.segments;
  if (!started_) {  // the capture started after the SYN: take this segment as the stream's start
    started_ = true;
    next_ = seq;
  }
  if (seq_leq(seq + wire_len, next_)) {
    ++stats_.retransmitted_segments;
    stats_.retransmitted_bytes += wire_len;
    return;
  }
  if (seq_lt(seq, next_)) {  // overlaps what was delivered: keep only the new tail
    const std::uint32_t trim = next_ - seq;
    stats_.overlap_bytes += trim;
    captured = captured.subspan(std::min<std::size_t>(trim, captured.size()));
    seq += trim;
    wire_len -= trim;
  }
  if (seq == next_) {
    if (gap_open_) note_fill(ip_id);
    deliver(seq, captured, wire_len, frame, ts_ns, sink);
    drain(frame, ts_ns, sink);
    return;
  }
  // Beyond a gap: hold a copy until the gap is filled.
  ++stats_.out_of_order_segments;
  auto it = std::lower_bound(held_.begin(), held_.end(), seq, [](const Held& h, std::uint32_t s) { return seq_lt(h.seq, s); });
  if (it != held_.end() && it->seq == seq) {
    if (it->wire_len >= wire_len) {
      ++stats_.retransmitted_segments;
      stats_.retransmitted_bytes += wire_len;
      return;
    }
    release(it->data.size());
    it = held_.erase(it);
  }
  Held h{seq, wire_len, frame, ts_ns, ip_id, std::vector<std::uint8_t>(captured.begin(), captured.end())};
  held_bytes_ += h.data.size();
  if (budget_) budget_->used += h.data.size();
  held_.insert(it, std::move(h));
  if (!gap_open_) open_gap();
  while (!held_.empty() && (held_bytes_ > kMaxOutOfOrderBytes || held_.size() > kMaxOutOfOrderSegments ||
                            (budget_ && budget_->used > budget_->limit)))
    give_up_first_gap(frame, ts_ns, sink);
}

void TcpStream::open_gap() {
  gap_open_ = true;
  gap_seq_ = next_;
  gap_fill_ = TcpGapFill::unknown;
  // Detected by the first segment captured beyond it.
  const auto first = std::min_element(held_.begin(), held_.end(), [](const Held& a, const Held& b) { return a.frame < b.frame; });
  gap_frame_ = first->frame;
  gap_ts_ns_ = first->ts_ns;
}

void TcpStream::note_fill(std::int32_t ip_id) {
  const std::int32_t after = held_.front().ip_id;
  if (ip_id < 0 || after < 0 || ip_id == after) {
    gap_fill_ = TcpGapFill::unknown;
    return;
  }
  const bool newer = static_cast<std::int16_t>(static_cast<std::uint16_t>(ip_id - after)) > 0;
  gap_fill_ = newer ? TcpGapFill::retransmission : TcpGapFill::reordering;
}

// The bytes before held_.front() have all arrived: the gap is recovered.
void TcpStream::close_gap(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink) {
  gap_open_ = false;
  ++stats_.holes_recovered;
  const TcpHoleEvent ev{gap_seq_, held_.front().seq - gap_seq_, gap_frame_, gap_ts_ns_, frame, ts_ns, true, gap_fill_};
  sink.stream_hole(ev);
}

void TcpStream::drain(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink) {
  while (!held_.empty() && seq_leq(held_.front().seq, next_)) {
    if (gap_open_) close_gap(frame, ts_ns, sink);
    Held h = std::move(held_.front());
    held_.erase(held_.begin());
    release(h.data.size());
    const std::uint32_t end = h.seq + h.wire_len;
    if (seq_leq(end, next_)) {
      stats_.overlap_bytes += h.wire_len;
      continue;
    }
    const std::uint32_t trim = next_ - h.seq;
    stats_.overlap_bytes += trim;
    Bytes data(h.data);
    data = data.subspan(std::min<std::size_t>(trim, data.size()));
    deliver(next_, data, h.wire_len - trim, h.frame, h.ts_ns, sink);
  }
  if (!gap_open_ && !held_.empty()) open_gap();  // the next gap, further on
}

void TcpStream::give_up_first_gap(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink) {
  if (held_.empty()) return;
  const std::uint32_t missing = held_.front().seq - next_;
  ++stats_.holes_lost;
  stats_.bytes_lost += missing;
  stats_.bytes += missing;
  const TcpHoleEvent ev{next_, missing, gap_frame_, gap_ts_ns_, frame, ts_ns, false, TcpGapFill::unknown};
  gap_open_ = false;
  next_ = held_.front().seq;
  sink.stream_hole(ev);
  drain(frame, ts_ns, sink);
}

void TcpStream::peer_ack(std::uint32_t ack, std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink) {
  while (!held_.empty() && seq_lt(next_, ack) && seq_leq(held_.front().seq, ack)) give_up_first_gap(frame, ts_ns, sink);
}

void TcpStream::flush(std::uint64_t frame, std::int64_t ts_ns, TcpStreamSink& sink) {
  while (!held_.empty()) give_up_first_gap(frame, ts_ns, sink);
}

}  // namespace rdmadiag::decode
