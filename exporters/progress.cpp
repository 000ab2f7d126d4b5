#include "exporters/progress.h"

#include <unistd.h>

#include <cstdio>

namespace rdmadiag::exporters {

ProgressBar::ProgressBar(bool enabled)
    : on_(enabled && isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()), last_(start_) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::update(const std::string& label, std::uint64_t done, std::uint64_t total, std::uint64_t items) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  // Nothing for runs that end within a second: no flicker on small files.
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < 1.0) return;
  last_ = now;
  const double rate = static_cast<double>(items) / elapsed;
  char line[256];
  if (total > 0 && done <= total) {
    const double frac = static_cast<double>(done) / static_cast<double>(total);
    constexpr int kWidth = 30;
    std::string bar(kWidth, ' ');
    for (int i = 0; i < static_cast<int>(frac * kWidth); ++i) bar[static_cast<std::size_t>(i)] = '#';
    const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    std::snprintf(line, sizeof line, "\r%s [%s] %5.1f%% %.0f pkt/s ETA %02d:%02d\033[K", label.c_str(), bar.c_str(), frac * 100,
                  rate, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  } else {
    std::snprintf(line, sizeof line, "\r%s %llu packets, %.0f pkt/s\033[K", label.c_str(), static_cast<unsigned long long>(items), rate);
  }
  std::fputs(line, stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void progress_note(const std::string& text, bool enabled) {
  if (!enabled || !isatty(STDERR_FILENO)) return;
  std::fprintf(stderr, "%s\n", text.c_str());
}

}  // namespace rdmadiag::exporters
