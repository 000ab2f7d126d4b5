// Round-robin tournament by the circle method: one position stays fixed, the others
// rotate by one each round; position i plays position M-1-i. With an odd number of
// hosts a phantom position is added and whoever meets it sits the round out.
#include "perftest/mesh_schedule.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace rdmadiag::perftest {

std::vector<MeshRound> round_robin_rounds(int hosts) {
  if (hosts < 2) throw std::invalid_argument("a mesh needs at least 2 hosts");
  const int slots = hosts % 2 == 0 ? hosts : hosts + 1;  // slot `hosts` (odd N) is the bye
  std::vector<int> order(static_cast<std::size_t>(slots));
  for (int i = 0; i < slots; ++i) order[static_cast<std::size_t>(i)] = i;
  std::vector<MeshRound> rounds;
  for (int r = 0; r < slots - 1; ++r) {
    MeshRound round;
    for (int i = 0; i < slots / 2; ++i) {
      const int a = order[static_cast<std::size_t>(i)];
      const int b = order[static_cast<std::size_t>(slots - 1 - i)];
      if (a == hosts || b == hosts) {
        round.idle_host = a == hosts ? b : a;
        continue;
      }
      round.pairs.push_back({std::min(a, b), std::max(a, b)});
    }
    std::sort(round.pairs.begin(), round.pairs.end(),
              [](const MeshPair& x, const MeshPair& y) { return x.client < y.client; });
    rounds.push_back(std::move(round));
    // Keep slot 0 fixed, rotate slots 1..M-1 by one.
    std::rotate(order.begin() + 1, order.end() - 1, order.end());
  }
  return rounds;
}

std::vector<MeshRound> sample_rounds(std::vector<MeshRound> rounds, std::size_t keep, std::uint64_t seed) {
  if (keep >= rounds.size()) return rounds;
  // std::shuffle's result depends on the library; a Fisher-Yates over mt19937_64 does not.
  std::mt19937_64 rng(seed);
  for (std::size_t i = rounds.size() - 1; i > 0; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % (i + 1));
    std::swap(rounds[i], rounds[j]);
  }
  rounds.resize(keep);
  return rounds;
}

}  // namespace rdmadiag::perftest
