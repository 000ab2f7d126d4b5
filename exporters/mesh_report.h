// Outputs of `rdmadiag-mesh`: the matrix as JSON (schema "rdmadiag-mesh", docs/mesh.md),
// CSV (one row per pair), a self-contained HTML heatmap, and Prometheus text with
// per-pair series accumulated over the sweeps of continuous mode.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "exporters/mesh_model.h"

namespace rdmadiag::exporters {

inline constexpr const char* kMeshSchemaVersion = "1.0";

// "hostname/rank", the label of a host in metrics and messages.
std::string mesh_host_label(const MeshReport& report, int rank);

nlohmann::ordered_json mesh_pair_to_json(const MeshPairResult& pair);
// The inverse, for the results each rank sends to rank 0. Throws nlohmann::json::exception.
MeshPairResult mesh_pair_from_json(const nlohmann::json& j);

nlohmann::ordered_json render_mesh_json(const MeshReport& report);
std::string render_mesh_csv(const MeshReport& report);
std::string render_mesh_html(const MeshReport& report);

// Per-pair counters that grow sweep after sweep (Prometheus counters never go down).
class MeshMetrics {
 public:
  void add_sweep(const MeshReport& report);
  std::string render() const;

 private:
  struct PairSeries {
    std::string client, server;  // "hostname/rank"
    std::uint64_t probes = 0, failed = 0, timeouts = 0;
    MeshBuckets latency;
    std::optional<double> last_median_usec, last_bw_mb_per_sec;
    bool outlier = false;
  };
  std::map<std::pair<int, int>, PairSeries> pairs_;
  std::map<int, std::pair<std::string, bool>> hosts_;  // rank -> (label, bad host now)
  std::uint64_t sweeps_ = 0;
  std::string test_;
};

}  // namespace rdmadiag::exporters
