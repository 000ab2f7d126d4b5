// One rdmadiag-mesh run on one MPI rank: sweeps of rounds of pair tests; rank 0 gathers,
// judges (mesh_outliers.h) and writes the outputs (exporters/mesh_report.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace rdmadiag::perftest {

struct MeshOptions {
  std::string test = "write-lat";
  std::uint64_t size = 2;
  std::uint64_t iterations = 1000;
  std::string device;
  int ib_port = 1;
  std::optional<int> gid_index;
  int round_timeout_s = 30;
  std::size_t max_rounds = 0;
  std::uint64_t seed = 1;
  double k = 5.0;
  double min_relative_spread = 0.1;
  bool control_only = false;
  int interval_s = 0;
  std::uint64_t sweeps = 1;
  std::string json, csv, html, metrics_file, metrics_listen;
  int stall_rank = -1;       // testing: this rank hangs (answers nothing) at the first sweep
  int late_rank = -1;        // testing: this rank starts its first sweep late_s late (alive meanwhile)
  int late_s = 0;
};

// Exit status: 0 every pair ok and no outlier; 1 findings (failed pairs, bad hosts or links);
// 2 an output could not be written; kMeshIncomplete when a rank never reported (the caller
// must MPI_Abort: MPI_Finalize would wait for it).
inline constexpr int kMeshIncomplete = 3;
// mpi_threads: MPI_Init_thread provided MPI_THREAD_SERIALIZED (the liveness answers then
// come from a thread of their own, also during a measurement).
int run_mesh(const MeshOptions& options, int rank, int size, bool mpi_threads);

}  // namespace rdmadiag::perftest
