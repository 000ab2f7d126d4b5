// Liveness between rdmadiag-mesh ranks: how a rank waiting on a peer tells a peer that is
// alive but late (still busy with an earlier pair, or in a long measurement) from a hung
// one. The waiter asks "are you alive?" every few hundred milliseconds; a thread of every
// rank answers with the step (sweep x rounds + round) its main thread is on. A peer is
// given up on only after `silence` without a message or an answer that still promises our
// pair (its step not past ours). Fixed waits cannot do this: a healthy rank that waited out
// a hung partner reaches its next pair as late as its partner's own limit, so equal limits
// made healthy pairs time out too (issue 19: a hung rank also got rank 0 named).
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "perftest/mesh_mpi.h"

namespace rdmadiag::perftest {

// This rank's side: answers pings from another thread, so it answers during a measurement
// (verbs, no MPI) too. It vouches for the main thread only while the current step is younger
// than vouch_limit_s: a main thread stuck for good (say, in a kernel call) must not keep its
// peers waiting forever.
class LivenessResponder {
 public:
  LivenessResponder(MPI_Comm alive_comm, int vouch_limit_s);
  ~LivenessResponder();
  LivenessResponder(const LivenessResponder&) = delete;
  LivenessResponder& operator=(const LivenessResponder&) = delete;
  void start_thread();
  void enter_step(std::uint64_t step);
  // Stops answering for good (the end of the run; --debug-stall-rank's hung host).
  void stop();
  // Answers the pings that have arrived (also called by the waits of the main thread).
  void answer_pings();

 private:
  MPI_Comm comm_;
  std::uint64_t vouch_limit_ns_;
  std::atomic<std::uint64_t> step_{0}, step_started_ns_{0};
  std::atomic<bool> stopping_{false};
  MpiSendQueue answers_;
  std::thread thread_;
};

// The waiting side, for one wait on one peer at one step.
class PeerWatch {
 public:
  PeerWatch(MPI_Comm alive_comm, int peer, std::uint64_t step, int silence_ms, MpiSendQueue& sends);
  // The peer sent us something: the silence starts again.
  void heard();
  // Pings when due and reads answers; false once the peer has been silent for silence_ms.
  bool alive();

 private:
  MPI_Comm comm_;
  int peer_;
  std::uint64_t step_, silence_ns_, ping_every_ns_;
  std::uint64_t last_heard_ns_, last_ping_ns_ = 0;
  MpiSendQueue& sends_;
};

}  // namespace rdmadiag::perftest
