// The MPI control plane of rdmadiag-mesh: perftest's out-of-band exchange (version
// preamble, key messages, barriers) carried by MPI point-to-point messages between the
// two ranks of a pair instead of a TCP connection, with a silence limit on every receive
// (mesh_liveness.h) so a hung peer ends the pair's test instead of the whole mesh. Only control data goes over
// MPI; the measurement is verbs traffic of the perftest engine (engine.h).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "perftest/oob_channel.h"

namespace rdmadiag::perftest {

// Every MPI call of rdmadiag-mesh after MPI_Init holds this lock: the liveness thread
// (mesh_liveness.h) and the main thread share one MPI library initialised with
// MPI_THREAD_SERIALIZED. Recursive: a locked section may send through an MpiSendQueue.
std::recursive_mutex& mesh_mpi_mutex();
using MpiLock = std::lock_guard<std::recursive_mutex>;

// Sends that must outlive the call that started them (MPI_Isend keeps using the buffer).
class MpiSendQueue {
 public:
  void send(MPI_Comm comm, int dest, int tag, std::vector<char> bytes);
  // Frees the completed sends; true when none is left.
  bool reap();
  // Waits up to timeout_ms for every send to complete; false if some did not.
  bool drain(int timeout_ms);

 private:
  struct Pending {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::list<Pending> pending_;
};

class LivenessResponder;

// What every pair's transport of a rank shares.
struct MpiLink {
  MPI_Comm pair_comm = MPI_COMM_NULL;   // the pairs' exchanges, one tag per step
  MPI_Comm alive_comm = MPI_COMM_NULL;  // liveness pings and answers (mesh_liveness.h)
  MpiSendQueue* sends = nullptr;
  // Without MPI thread support there is no answering thread: the waits answer pings.
  LivenessResponder* answer_in_waits = nullptr;
};

class MpiPairTransport : public OobTransport {
 public:
  // step: sweep x rounds + round; its tag is unique per round, so a late message of an
  // earlier round is never read as this one's. A receive gives up once the peer has been
  // silent for its timeout: no message, and no liveness answer promising our pair.
  MpiPairTransport(const MpiLink& link, int peer_rank, std::uint64_t step, bool is_client, std::string peer_label);
  bool is_client() const override { return is_client_; }
  const std::string& peer() const override { return peer_label_; }
  void send(std::span<const char> bytes, const std::string& step) override;
  // Throws RunError containing kMpiTimeoutText when the peer stays silent for timeout_ms.
  std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms) override;
  std::vector<char> receive_message(const std::string& step, int timeout_ms) override;
  bool message_based() const override { return false; }
  std::vector<char> drain(int wait_ms) override;

 private:
  bool pull_one();
  MpiLink link_;
  int peer_rank_, tag_;
  std::uint64_t step_;
  bool is_client_;
  std::string peer_label_;
  std::vector<char> received_;
};

// The MPI tag of a step's pair exchange (tags below kMaxPairTag; the rest are other messages).
inline constexpr int kMaxPairTag = 30000;
inline int pair_tag(std::uint64_t step) { return 1 + static_cast<int>(step % kMaxPairTag); }

inline constexpr char kMpiTimeoutText[] = "timed out waiting for rank";

}  // namespace rdmadiag::perftest
