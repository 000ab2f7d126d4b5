// MPI transport of rdmadiag-mesh (see mesh_mpi.h). Receives poll with MPI_Iprobe rather
// than a blocking MPI_Recv, so every wait has a limit and nothing is left posted (a
// cancelled receive could otherwise swallow a later message), and the lock is held only
// per call (the liveness thread answers in between).
#include "perftest/mesh_mpi.h"

#include <algorithm>
#include <thread>

#include "perftest/clock.h"
#include "perftest/errors.h"
#include "perftest/mesh_liveness.h"

namespace rdmadiag::perftest {

std::recursive_mutex& mesh_mpi_mutex() {
  static std::recursive_mutex m;
  return m;
}

void MpiSendQueue::send(MPI_Comm comm, int dest, int tag, std::vector<char> bytes) {
  MpiLock lock(mesh_mpi_mutex());
  reap();
  pending_.push_back({std::move(bytes), MPI_REQUEST_NULL});
  auto& p = pending_.back();
  if (MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dest, tag, comm, &p.request) != MPI_SUCCESS)
    throw RunError("MPI_Isend to rank " + std::to_string(dest) + " failed");
}

bool MpiSendQueue::reap() {
  MpiLock lock(mesh_mpi_mutex());
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? pending_.erase(it) : std::next(it);
  }
  return pending_.empty();
}

bool MpiSendQueue::drain(int timeout_ms) {
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(timeout_ms) * 1000000ull;
  while (!reap()) {
    if (monotonic_ns() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

MpiPairTransport::MpiPairTransport(const MpiLink& link, int peer_rank, std::uint64_t step, bool is_client, std::string peer_label)
    : link_(link), peer_rank_(peer_rank), tag_(pair_tag(step)), step_(step), is_client_(is_client),
      peer_label_(std::move(peer_label)) {}

void MpiPairTransport::send(std::span<const char> bytes, const std::string& /*step*/) {
  link_.sends->send(link_.pair_comm, peer_rank_, tag_, std::vector<char>(bytes.begin(), bytes.end()));
}

// One message of this pair, if one has arrived.
bool MpiPairTransport::pull_one() {
  MpiLock lock(mesh_mpi_mutex());
  int flag = 0;
  MPI_Status status{};
  MPI_Iprobe(peer_rank_, tag_, link_.pair_comm, &flag, &status);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<char> chunk(static_cast<std::size_t>(std::max(count, 0)));
  MPI_Recv(chunk.data(), count, MPI_BYTE, peer_rank_, tag_, link_.pair_comm, MPI_STATUS_IGNORE);
  received_.insert(received_.end(), chunk.begin(), chunk.end());
  return true;
}

std::vector<char> MpiPairTransport::receive(std::size_t size, const std::string& step, int timeout_ms) {
  PeerWatch watch(link_.alive_comm, peer_rank_, step_, timeout_ms, *link_.sends);
  while (received_.size() < size) {
    if (pull_one()) {
      watch.heard();
      continue;
    }
    if (!watch.alive())
      throw RunError(step + ": " + kMpiTimeoutText + " " + std::to_string(peer_rank_) + " (" + peer_label_ + "), silent for " +
                     std::to_string(timeout_ms / 1000) + " s");
    if (link_.answer_in_waits) link_.answer_in_waits->answer_pings();
    link_.sends->reap();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<char> out(received_.begin(), received_.begin() + static_cast<std::ptrdiff_t>(size));
  received_.erase(received_.begin(), received_.begin() + static_cast<std::ptrdiff_t>(size));
  return out;
}

std::vector<char> MpiPairTransport::receive_message(const std::string& step, int /*timeout_ms*/) {
  throw RunError(step + ": the MPI exchange is a byte stream, not message based");
}

std::vector<char> MpiPairTransport::drain(int wait_ms) {
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(wait_ms) * 1000000ull;
  for (;;) {
    if (pull_one()) continue;
    if (monotonic_ns() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<char> out;
  out.swap(received_);
  return out;
}

}  // namespace rdmadiag::perftest
