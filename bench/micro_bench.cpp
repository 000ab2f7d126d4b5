// Google Benchmark micro-benchmarks of the hot paths of `rdmadiag analyze`:
// link-to-BTH decode, ICRC (and the CRC-32 under it, ISA-L's against libdeflate's and zlib's),
// PSN tracking (the stateful analysis), flow lookup, and JSON packet output.
// Frames come from the synthetic generator (capture_gen.h), in memory.
#include <benchmark/benchmark.h>
#include <libdeflate.h>
#include <zlib.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <streambuf>
#include <vector>

#include "bench/capture_gen.h"
#include "decode/analyzer.h"
#include "decode/crc.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"
#include "exporters/json_report.h"

namespace {

using rdmadiag::decode::Bytes;
namespace decode = rdmadiag::decode;

// Generated frames, back to back in one buffer.
struct Frames {
  std::uint32_t linktype = 0;
  std::vector<std::uint8_t> data;
  std::vector<std::pair<std::size_t, std::size_t>> at;  // (offset, length)
  std::vector<double> ts;
  std::uint64_t bytes = 0;
  Bytes frame(std::size_t i) const { return Bytes(data.data() + at[i].first, at[i].second); }
};

const Frames& frames(const std::string& encap, std::uint32_t qps, std::uint32_t min_pay, std::uint32_t max_pay) {
  static std::vector<std::pair<std::string, std::unique_ptr<Frames>>> cache;
  const std::string key = encap + "/" + std::to_string(qps) + "/" + std::to_string(min_pay) + "/" + std::to_string(max_pay);
  for (auto& [k, f] : cache)
    if (k == key) return *f;
  auto f = std::make_unique<Frames>();
  rdmadiag::bench::GenOptions o;
  o.encap = encap;
  o.packets = 100'000;
  o.qps = qps;
  o.min_payload = min_pay;
  o.max_payload = max_pay;
  f->linktype = rdmadiag::bench::generate(o, [&](std::uint64_t ts_ns, Bytes b) {
    f->at.emplace_back(f->data.size(), b.size());
    f->data.insert(f->data.end(), b.begin(), b.end());
    f->ts.push_back(static_cast<double>(ts_ns) * 1e-9);
    f->bytes += b.size();
  });
  cache.emplace_back(key, std::move(f));
  return *cache.back().second;
}

void BM_DecodeFrame(benchmark::State& state, const char* encap) {
  const Frames& f = frames(encap, 64, 64, 1024);
  decode::DecodeOptions opts;
  decode::DecodedPacket p;
  std::size_t i = 0;
  for (auto _ : state) {
    decode::decode_frame(f.linktype, f.frame(i), static_cast<std::uint32_t>(f.at[i].second), opts, p);
    benchmark::DoNotOptimize(p.icrc);
    if (++i == f.at.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (f.bytes / f.at.size())));
}
BENCHMARK_CAPTURE(BM_DecodeFrame, roce_v2, "roce_v2");
BENCHMARK_CAPTURE(BM_DecodeFrame, roce_v2_ipv6, "roce_v2_ipv6");
BENCHMARK_CAPTURE(BM_DecodeFrame, roce_v1, "roce_v1");
BENCHMARK_CAPTURE(BM_DecodeFrame, ib, "ib");

// A RoCEv2/IPv4 packet with a 4 KB payload (the largest PMTU).
const Frames& roce_4k() { return frames("roce_v2", 1, 4096, 4096); }

void BM_Icrc4K(benchmark::State& state) {
  const Frames& f = roce_4k();
  std::size_t i = 0;
  while (f.at[i].second < 4096) ++i;  // a full-PMTU WRITE/SEND segment
  const Bytes fr = f.frame(i);
  decode::IcrcInput in{decode::IcrcInput::Kind::roce_v2_ipv4, fr.subspan(14, 20), fr.subspan(34, 8), fr.subspan(42, 12),
                       fr.subspan(54, fr.size() - 54 - 4), {}};
  for (auto _ : state) benchmark::DoNotOptimize(decode::compute_icrc(in));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * fr.size()));
}
BENCHMARK(BM_Icrc4K);

std::vector<std::uint8_t> buffer(std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 131 + 7);
  return b;
}

// The CRC-32 decode uses (ISA-L's), against libdeflate's (decode's before
// session 47) and zlib's.
void BM_Crc32Isal(benchmark::State& state) {
  const auto b = buffer(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(decode::crc32_update(0, b));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * b.size()));
}
BENCHMARK(BM_Crc32Isal)->Arg(12)->Arg(64)->Arg(1024)->Arg(4096);

void BM_Crc32Libdeflate(benchmark::State& state) {
  const auto b = buffer(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(libdeflate_crc32(0, b.data(), b.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * b.size()));
}
BENCHMARK(BM_Crc32Libdeflate)->Arg(12)->Arg(64)->Arg(1024)->Arg(4096);

void BM_Crc32Zlib(benchmark::State& state) {
  const auto b = buffer(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(crc32(0, b.data(), static_cast<uInt>(b.size())));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * b.size()));
}
BENCHMARK(BM_Crc32Zlib)->Arg(12)->Arg(64)->Arg(1024)->Arg(4096);

// Pre-decoded packets, so that the analysis is measured alone.
struct Decoded {
  std::vector<decode::DecodedPacket> pkts;
  const Frames* frames = nullptr;
};
const Decoded& decoded(std::uint32_t qps) {
  static std::vector<std::pair<std::uint32_t, std::unique_ptr<Decoded>>> cache;
  for (auto& [k, d] : cache)
    if (k == qps) return *d;
  auto d = std::make_unique<Decoded>();
  d->frames = &frames("roce_v2", qps, 64, 1024);
  decode::DecodeOptions opts;
  d->pkts.resize(d->frames->at.size());
  for (std::size_t i = 0; i < d->pkts.size(); ++i)
    decode::decode_frame(d->frames->linktype, d->frames->frame(i), static_cast<std::uint32_t>(d->frames->at[i].second),
                         opts, d->pkts[i]);
  cache.emplace_back(qps, std::move(d));
  return *cache.back().second;
}

// Capture summary + PSN/transport analysis per packet (the Analyzer), over the
// generated sequence repeated with the frame numbers and times moving on.
void BM_Analyze(benchmark::State& state) {
  const Decoded& d = decoded(static_cast<std::uint32_t>(state.range(0)));
  auto a = std::make_unique<decode::Analyzer>();
  auto pa = std::make_unique<decode::PacketAnalysis>();
  std::size_t i = 0;
  std::uint64_t frame = 0;
  double base = 0;
  for (auto _ : state) {
    a->add(d.pkts[i], ++frame, base + d.frames->ts[i], *pa);
    if (++i == d.pkts.size()) {
      // A new pass: a new analyzer (the PSNs start over), outside the timing.
      state.PauseTiming();
      i = 0;
      a = std::make_unique<decode::Analyzer>();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_Analyze)->Arg(64)->Arg(1024);

// The flow lookup alone: TransportAnalyzer on packets that only touch their
// flow (CNPs would return right after the lookup; here: the whole per-packet
// path on a capture with many flows, minus the summary).
void BM_TransportAnalyzer(benchmark::State& state) {
  const Decoded& d = decoded(static_cast<std::uint32_t>(state.range(0)));
  decode::AnomalyLog log;
  auto t = std::make_unique<decode::TransportAnalyzer>(log);
  auto pa = std::make_unique<decode::PacketAnalysis>();
  std::size_t i = 0;
  std::uint64_t frame = 0;
  for (auto _ : state) {
    t->add(d.pkts[i], ++frame, d.frames->ts[i], *pa);
    if (++i == d.pkts.size()) {
      state.PauseTiming();
      i = 0;
      t = std::make_unique<decode::TransportAnalyzer>(log);
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_TransportAnalyzer)->Arg(64)->Arg(1024)->Arg(16384);

// One --packets JSON object per packet, to a stream that discards.
class NullBuf : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

void BM_JsonPacket(benchmark::State& state) {
  const Decoded& d = decoded(64);
  NullBuf buf;
  std::ostream out(&buf);
  rdmadiag::exporters::JsonReportWriter w(out, true);
  auto pa = std::make_unique<decode::PacketAnalysis>();
  pa->analysed = true;
  std::size_t i = 0;
  for (auto _ : state) {
    w.packet(d.pkts[i], *pa, i + 1, d.frames->ts[i]);
    if (++i == d.pkts.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_JsonPacket);

}  // namespace

BENCHMARK_MAIN();
