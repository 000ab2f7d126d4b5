// An exact sum of doubles (Shewchuk's non-overlapping partials, "Adaptive
// Precision Floating-Point Arithmetic", 1997; rounded once at the end, half to
// even). The rounded result does not depend on the order of the additions, so
// sums kept in several shards of an analysis merge into the very value one
// thread would have: a plain running double sum differs in its last digits.
// Fixed size, no heap: finite doubles never need more than ~40 partials.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>

namespace rdmadiag::decode {

class ExactSum {
 public:
  void add(double x) {
    if (!std::isfinite(x)) {
      special_ += x;
      return;
    }
    std::size_t i = 0;
    for (std::size_t j = 0; j < n_; ++j) {
      double y = partials_[j];
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0.0) partials_[i++] = lo;
      x = hi;
    }
    if (i == partials_.size()) {  // cannot happen for finite doubles; stay bounded regardless
      partials_[i - 1] += x;
      n_ = i;
      return;
    }
    partials_[i++] = x;
    n_ = i;
  }
  void add(const ExactSum& o) {
    for (std::size_t j = 0; j < o.n_; ++j) add(o.partials_[j]);
    special_ += o.special_;
  }
  // The exact sum, rounded once.
  double value() const {
    if (special_ != 0.0 || std::isnan(special_)) return special_;
    if (n_ == 0) return 0.0;
    std::size_t j = n_ - 1;
    double hi = partials_[j], lo = 0.0;
    while (j > 0) {
      const double x = hi;
      const double y = partials_[--j];
      hi = x + y;
      lo = y - (hi - x);
      if (lo != 0.0) break;
    }
    // Round half to even when the rest of the partials lean the same way.
    if (j > 0 && ((lo < 0 && partials_[j - 1] < 0) || (lo > 0 && partials_[j - 1] > 0))) {
      const double y = lo * 2;
      const double x = hi + y;
      if (y == x - hi) hi = x;
    }
    return hi;
  }

 private:
  std::array<double, 48> partials_{};  // increasing magnitude, non-overlapping
  std::size_t n_ = 0;
  double special_ = 0.0;  // infinities and NaNs
};

}  // namespace rdmadiag::decode
