// Liveness pings between rdmadiag-mesh ranks (mesh_liveness.h). Its own communicator and
// tags, so a ping or an answer is never read as a pair's exchange or a result.
#include "perftest/mesh_liveness.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "perftest/clock.h"

namespace rdmadiag::perftest {

namespace {

constexpr int kPingTag = 1;    // waiter -> peer: 8 bytes, the step the waiter is on
constexpr int kAnswerTag = 2;  // peer -> waiter: 16 bytes, that step echoed, the peer's own step

std::vector<char> encode(std::initializer_list<std::uint64_t> values) {
  std::vector<char> out;
  for (std::uint64_t v : values)
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

std::uint64_t decode(const char* bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

constexpr std::uint64_t kNsPerMs = 1000000ull;

}  // namespace

LivenessResponder::LivenessResponder(MPI_Comm alive_comm, int vouch_limit_s)
    : comm_(alive_comm), vouch_limit_ns_(static_cast<std::uint64_t>(vouch_limit_s) * 1000 * kNsPerMs) {
  step_started_ns_ = monotonic_ns();
}

LivenessResponder::~LivenessResponder() { stop(); }

void LivenessResponder::start_thread() {
  thread_ = std::thread([this] {
    while (!stopping_) {
      answer_pings();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
}

void LivenessResponder::enter_step(std::uint64_t step) {
  step_started_ns_ = monotonic_ns();
  step_ = step;
}

void LivenessResponder::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  answers_.drain(1000);
}

void LivenessResponder::answer_pings() {
  MpiLock lock(mesh_mpi_mutex());
  const bool vouch = !stopping_ && monotonic_ns() - step_started_ns_ < vouch_limit_ns_;
  for (;;) {
    int flag = 0;
    MPI_Status status{};
    MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, comm_, &flag, &status);
    if (!flag) break;
    std::array<char, 8> ping{};
    MPI_Recv(ping.data(), static_cast<int>(ping.size()), MPI_BYTE, status.MPI_SOURCE, kPingTag, comm_, MPI_STATUS_IGNORE);
    if (vouch) answers_.send(comm_, status.MPI_SOURCE, kAnswerTag, encode({decode(ping.data()), step_.load()}));
  }
  answers_.reap();
}

PeerWatch::PeerWatch(MPI_Comm alive_comm, int peer, std::uint64_t step, int silence_ms, MpiSendQueue& sends)
    : comm_(alive_comm), peer_(peer), step_(step), silence_ns_(static_cast<std::uint64_t>(silence_ms) * kNsPerMs),
      // Several pings per silence limit: one answer delayed by load does not end the wait.
      ping_every_ns_(std::clamp<std::uint64_t>(silence_ns_ / 5, 50 * kNsPerMs, 1000 * kNsPerMs)),
      last_heard_ns_(monotonic_ns()), sends_(sends) {}

void PeerWatch::heard() { last_heard_ns_ = monotonic_ns(); }

bool PeerWatch::alive() {
  MpiLock lock(mesh_mpi_mutex());
  for (;;) {
    int flag = 0;
    MPI_Status status{};
    MPI_Iprobe(peer_, kAnswerTag, comm_, &flag, &status);
    if (!flag) break;
    std::array<char, 16> answer{};
    MPI_Recv(answer.data(), static_cast<int>(answer.size()), MPI_BYTE, peer_, kAnswerTag, comm_, MPI_STATUS_IGNORE);
    // Alive and not yet past our step: it still has our pair (or our results) ahead of it.
    if (decode(answer.data()) == step_ && decode(answer.data() + 8) <= step_) heard();
  }
  const std::uint64_t now = monotonic_ns();
  if (now - last_heard_ns_ > silence_ns_) return false;
  if (now - last_ping_ns_ >= ping_every_ns_) {
    sends_.send(comm_, peer_, kPingTag, encode({step_}));
    last_ping_ns_ = now;
  }
  return true;
}

}  // namespace rdmadiag::perftest
