// A progress bar with rate and ETA on standard error, for long runs (analyze on
// a large file, a perftest sweep). Draws only when standard error is a
// terminal; redraws at most ten times a second and erases itself when done.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace rdmadiag::exporters {

class ProgressBar {
 public:
  // enabled: the caller's choice (e.g. not --quiet); the bar still stays off unless stderr is a terminal.
  explicit ProgressBar(bool enabled);
  ~ProgressBar();
  // done/total in bytes (total 0: unknown, shows the count and rate only); `items` counted for the rate.
  void update(const std::string& label, std::uint64_t done, std::uint64_t total, std::uint64_t items);
  void clear();
  bool on() const { return on_; }

 private:
  bool on_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// One line on stderr ("perftest write-lat: size 4096 (12/23)") when stderr is a terminal.
void progress_note(const std::string& text, bool enabled);

}  // namespace rdmadiag::exporters
