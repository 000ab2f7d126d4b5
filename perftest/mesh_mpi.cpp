// MPI transport of rdmadiag-mesh (see mesh_mpi.h). Receives poll with MPI_Iprobe rather
// than a blocking MPI_Recv, so every wait has a deadline and nothing is left posted
// (a cancelled receive could otherwise swallow a later message).
#include "perftest/mesh_mpi.h"

#include <algorithm>
#include <thread>

#include "perftest/clock.h"
#include "perftest/errors.h"

namespace rdmadiag::perftest {

void MpiSendQueue::send(MPI_Comm comm, int dest, int tag, std::vector<char> bytes) {
  reap();
  pending_.push_back({std::move(bytes), MPI_REQUEST_NULL});
  auto& p = pending_.back();
  if (MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dest, tag, comm, &p.request) != MPI_SUCCESS)
    throw RunError("MPI_Isend to rank " + std::to_string(dest) + " failed");
}

bool MpiSendQueue::reap() {
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

MpiPairTransport::MpiPairTransport(MPI_Comm comm, int peer_rank, int tag, bool is_client, std::string peer_label,
                                   MpiSendQueue& sends, int first_contact_ms)
    : comm_(comm), peer_rank_(peer_rank), tag_(tag), is_client_(is_client), peer_label_(std::move(peer_label)), sends_(sends),
      first_contact_ms_(first_contact_ms) {}

void MpiPairTransport::send(std::span<const char> bytes, const std::string& /*step*/) {
  sends_.send(comm_, peer_rank_, tag_, std::vector<char>(bytes.begin(), bytes.end()));
}

bool MpiPairTransport::pull_one(std::uint64_t deadline_ns) {
  for (;;) {
    int flag = 0;
    MPI_Status status{};
    MPI_Iprobe(peer_rank_, tag_, comm_, &flag, &status);
    if (flag) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      std::vector<char> chunk(static_cast<std::size_t>(std::max(count, 0)));
      MPI_Recv(chunk.data(), count, MPI_BYTE, peer_rank_, tag_, comm_, MPI_STATUS_IGNORE);
      received_.insert(received_.end(), chunk.begin(), chunk.end());
      return true;
    }
    if (monotonic_ns() > deadline_ns) return false;
    sends_.reap();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<char> MpiPairTransport::receive(std::size_t size, const std::string& step, int timeout_ms) {
  if (!contacted_) timeout_ms = std::max(timeout_ms, first_contact_ms_);
  contacted_ = true;
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(timeout_ms) * 1000000ull;
  while (received_.size() < size)
    if (!pull_one(deadline))
      throw RunError(step + ": " + kMpiTimeoutText + " " + std::to_string(peer_rank_) + " (" + peer_label_ + ") for " +
                     std::to_string(timeout_ms / 1000) + " s");
  std::vector<char> out(received_.begin(), received_.begin() + static_cast<std::ptrdiff_t>(size));
  received_.erase(received_.begin(), received_.begin() + static_cast<std::ptrdiff_t>(size));
  return out;
}

std::vector<char> MpiPairTransport::receive_message(const std::string& step, int /*timeout_ms*/) {
  throw RunError(step + ": the MPI exchange is a byte stream, not message based");
}

std::vector<char> MpiPairTransport::drain(int wait_ms) {
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(wait_ms) * 1000000ull;
  while (pull_one(deadline)) {
  }
  std::vector<char> out;
  out.swap(received_);
  return out;
}

}  // namespace rdmadiag::perftest
