// One NVMe queue's activity over time: see nvme_timeline.h.
#include "decode/nvme_timeline.h"

#include <algorithm>

namespace rdmadiag::decode {

// Two neighbouring bins become one twice as wide.
void NvmeTimeline::coarsen() {
  for (std::size_t i = 0; i < kBins / 2; ++i) {
    const Bin& a = bins_[2 * i];
    const Bin& b = bins_[2 * i + 1];
    bins_[i] = Bin{std::max(a.max_outstanding, b.max_outstanding), a.completions + b.completions, a.bytes + b.bytes};
  }
  std::fill(bins_.begin() + kBins / 2, bins_.end(), Bin{});
  used_ = (used_ + 1) / 2;
  bin_ns_ *= 2;
}

// The bin of `ts_ns`; the bins skipped on the way hold the outstanding count carried over.
NvmeTimeline::Bin& NvmeTimeline::at(std::int64_t ts_ns) {
  if (used_ == 0) {
    start_ns_ = ts_ns;
    used_ = 1;
  }
  // Frames out of time order (merged captures) count in the first bin.
  const std::int64_t offset = std::max<std::int64_t>(ts_ns - start_ns_, 0);
  while (offset / bin_ns_ >= static_cast<std::int64_t>(kBins)) coarsen();
  const auto i = static_cast<std::size_t>(offset / bin_ns_);
  for (; used_ <= i; ++used_) bins_[used_].max_outstanding = current_;
  return bins_[i];
}

void NvmeTimeline::outstanding(std::int64_t ts_ns, std::uint32_t outstanding) {
  Bin& b = at(ts_ns);
  current_ = outstanding;
  b.max_outstanding = std::max(b.max_outstanding, outstanding);
}

void NvmeTimeline::completion(std::int64_t ts_ns, std::uint64_t bytes) {
  Bin& b = at(ts_ns);
  ++b.completions;
  b.bytes += bytes;
}

}  // namespace rdmadiag::decode
