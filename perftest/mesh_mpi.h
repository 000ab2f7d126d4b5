// The MPI control plane of rdmadiag-mesh: perftest's out-of-band exchange (version
// preamble, key messages, barriers) carried by MPI point-to-point messages between the
// two ranks of a pair instead of a TCP connection, with a deadline on every receive so a
// hung peer ends the pair's test instead of the whole mesh. Only control data goes over
// MPI; the measurement is verbs traffic of the perftest engine (engine.h).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "perftest/oob_channel.h"

namespace rdmadiag::perftest {

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

class MpiPairTransport : public OobTransport {
 public:
  // tag: unique per round, so a late message of an earlier round is never read as this one's.
  // first_contact_ms: how long the first receive waits (longer than the others: the peer may
  // still be waiting out a dead partner of its previous round; without it one dead host makes
  // the next pairs of its partners time out too, a cascade of false verdicts).
  MpiPairTransport(MPI_Comm comm, int peer_rank, int tag, bool is_client, std::string peer_label, MpiSendQueue& sends,
                   int first_contact_ms = 0);
  bool is_client() const override { return is_client_; }
  const std::string& peer() const override { return peer_label_; }
  void send(std::span<const char> bytes, const std::string& step) override;
  // Throws RunError containing kMpiTimeoutText when nothing arrives within timeout_ms.
  std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms) override;
  std::vector<char> receive_message(const std::string& step, int timeout_ms) override;
  bool message_based() const override { return false; }
  std::vector<char> drain(int wait_ms) override;

 private:
  bool pull_one(std::uint64_t deadline_ns);
  MPI_Comm comm_;
  int peer_rank_, tag_;
  bool is_client_;
  std::string peer_label_;
  MpiSendQueue& sends_;
  std::vector<char> received_;
  int first_contact_ms_;
  bool contacted_ = false;
};

inline constexpr char kMpiTimeoutText[] = "timed out waiting for rank";

}  // namespace rdmadiag::perftest
