// One NVMe queue's activity over time (NVMe Base 1.4 section 4.1: a command is
// outstanding from its submission until its completion is posted; here, at the
// capture point, from its capsule to its response capsule): the most commands
// outstanding, the completions and the data bytes they moved, per time bin.
//
// Fixed memory: kBins bins, 1 ms wide at first; when the capture outgrows them
// the width doubles (neighbouring bins merge), so a long capture keeps the
// same number of bins, each covering more time.
#pragma once
#include <array>
#include <cstdint>

namespace rdmadiag::decode {

class NvmeTimeline {
 public:
  static constexpr std::size_t kBins = 128;
  static constexpr std::int64_t kFirstBinNs = 1'000'000;

  struct Bin {
    std::uint32_t max_outstanding = 0;
    std::uint32_t completions = 0;
    std::uint64_t bytes = 0;  // data of the completed reads and writes
  };

  // The queue holds `outstanding` commands from `ts_ns` on.
  void outstanding(std::int64_t ts_ns, std::uint32_t outstanding);
  void completion(std::int64_t ts_ns, std::uint64_t bytes);

  bool empty() const { return used_ == 0; }
  std::int64_t start_ns() const { return start_ns_; }
  std::int64_t bin_ns() const { return bin_ns_; }
  std::size_t bins() const { return used_; }
  const Bin& bin(std::size_t i) const { return bins_[i]; }

 private:
  Bin& at(std::int64_t ts_ns);
  void coarsen();

  std::array<Bin, kBins> bins_{};
  std::size_t used_ = 0;
  std::int64_t start_ns_ = 0;
  std::int64_t bin_ns_ = kFirstBinNs;
  std::uint32_t current_ = 0;  // outstanding now (carried into bins without a change)
};

}  // namespace rdmadiag::decode
