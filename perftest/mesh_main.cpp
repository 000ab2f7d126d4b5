// rdmadiag-mesh (issue 19): an all-pairs RDMA latency/bandwidth matrix, launched by MPI
// (mpirun, or srun with PMI). MPI carries only control data: host descriptions
// (MPI_Allgather), each pair's perftest out-of-band exchange (point-to-point, mesh_mpi.h)
// and the results (to rank 0). The traffic measured is verbs, run by the perftest engine.
// A separate binary, not `rdmadiag mesh`: linking libmpi into the main CLI would make
// every `rdmadiag analyze` load Open MPI and initialise it outside mpirun.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include "perftest/mesh_run.h"

using namespace rdmadiag;
using namespace rdmadiag::perftest;

namespace {

void add_options(CLI::App& app, MeshOptions& o) {
  app.add_option("--test", o.test, "write-lat, read-lat, send-lat or write-bw")
      ->check(CLI::IsMember({"write-lat", "read-lat", "send-lat", "write-bw"}));
  app.add_option("-s,--size", o.size, "message size in bytes")->check(CLI::Range(1, 1 << 23));
  app.add_option("-n,--iterations", o.iterations, "iterations per pair")->check(CLI::Range(5, 10000000));
  app.add_option("-d,--ib-dev", o.device, "RDMA device (default: the first)");
  app.add_option("-i,--ib-port", o.ib_port, "port")->check(CLI::Range(1, 255));
  app.add_option("-x,--gid-index", o.gid_index, "GID index (default: perftest's choice)");
  app.add_option("--round-timeout", o.round_timeout_s, "seconds a pair may wait for its peer before it is reported")
      ->check(CLI::Range(1, 3600));
  app.add_option("--max-rounds", o.max_rounds, "run only this many of the N-1 rounds (sampling for large N; 0: all)");
  app.add_option("--seed", o.seed, "seed of the round sampling");
  app.add_option("--k", o.k, "outlier threshold in robust standard deviations")->check(CLI::PositiveNumber);
  app.add_option("--min-spread", o.min_relative_spread, "smallest deviation, as a fraction of the median")
      ->check(CLI::Range(0.0, 10.0));
  app.add_flag("--control-only", o.control_only, "exercise the MPI control plane only: no RDMA, no measurement");
  app.add_option("--interval", o.interval_s, "continuous mode: start a sweep every S seconds")->check(CLI::Range(1, 86400));
  app.add_option("--sweeps", o.sweeps, "sweeps to run (default 1; with --interval 0 means until stopped)");
  app.add_option("--json", o.json, "write the matrix as JSON (rank 0; replaced after each sweep)");
  app.add_option("--csv", o.csv, "write one CSV row per pair");
  app.add_option("--html", o.html, "write a self-contained HTML heatmap");
  app.add_option("--metrics-file", o.metrics_file, "write Prometheus text (node exporter's textfile collector)");
  app.add_option("--metrics-listen", o.metrics_listen, "serve Prometheus text on HOST:PORT /metrics (rank 0)");
  app.add_option("--debug-stall-rank", o.stall_rank, "testing: this rank stops answering (a hung host)")->group("");
  app.add_option("--debug-late-rank", o.late_rank, "testing: this rank starts late (a slow but healthy host)")->group("");
  app.add_option("--debug-late-seconds", o.late_s, "testing: how late")->group("");
}

}  // namespace

int main(int argc, char** argv) {
  int threads = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &threads);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"rdmadiag-mesh: all-pairs RDMA latency/bandwidth matrix; run under mpirun -np N or srun"};
  MeshOptions options;
  add_options(app, options);
  try {
    app.parse(argc, argv);
    if (options.interval_s == 0 && options.sweeps == 0) throw CLI::ValidationError("--sweeps 0 needs --interval");
    if (size < 2) throw CLI::ValidationError("a mesh needs at least 2 MPI ranks (mpirun -np N, N >= 2)");
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return code == 0 ? 0 : 2;
  }
  const int status = run_mesh(options, rank, size, threads >= MPI_THREAD_SERIALIZED);
  if (status == kMeshIncomplete) MPI_Abort(MPI_COMM_WORLD, kMeshIncomplete);  // a hung rank would block MPI_Finalize
  MPI_Finalize();
  return status;
}
