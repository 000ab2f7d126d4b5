// Which pairs of hosts `rdmadiag-mesh` tests, and when: rounds of disjoint pairs
// (a round-robin tournament, the "circle method"), so no host is in two tests at
// once and every pair of N hosts is tested exactly once per sweep.
#pragma once
#include <cstdint>
#include <vector>

namespace rdmadiag::perftest {

// One test: host `client` (the lower rank) against host `server`.
struct MeshPair {
  int client = 0;
  int server = 0;
  bool operator==(const MeshPair&) const = default;
};

struct MeshRound {
  std::vector<MeshPair> pairs;  // disjoint: no host twice
  int idle_host = -1;           // odd N: the host with a bye this round, else -1
};

// N >= 2 hosts: N-1 rounds of N/2 pairs (even N) or N rounds of (N-1)/2 pairs and one
// idle host (odd N). Deterministic. Throws std::invalid_argument for N < 2.
std::vector<MeshRound> round_robin_rounds(int hosts);

// For very large N: keep `keep` of the rounds, chosen by a seeded shuffle (the same seed
// gives the same choice on every rank). Whole rounds are kept, so every host still tests
// `keep` peers (one fewer in an odd-N round where it is idle): coverage stays even, which
// the per-host outlier test needs. keep >= rounds.size() keeps everything.
std::vector<MeshRound> sample_rounds(std::vector<MeshRound> rounds, std::size_t keep, std::uint64_t seed);

}  // namespace rdmadiag::perftest
