// Which hosts and links of a mesh are bad, by robust statistics: the median and the
// median absolute deviation (MAD, scaled by 1.4826 to estimate a standard deviation)
// are not moved by the few bad values they are meant to find.
//  1. Hosts: each host's pairs are compared with the pairs NOT involving it (so a slow
//     host does not raise its own baseline); a host is bad when more than half of its
//     (at least 2) tested pairs failed or lie beyond k robust deviations.
//  2. Links: the remaining pairs (no bad host in them) against their own median; each
//     one beyond k deviations, or failed, is a bad link.
// The deviation is at least min_relative_spread x median, so a fabric whose pairs agree
// to within noise does not turn noise into verdicts. Designed for a minority of faults.
#pragma once
#include <optional>
#include <vector>

#include "exporters/mesh_model.h"

namespace rdmadiag::perftest {

struct OutlierOptions {
  double k = 5.0;
  double min_relative_spread = 0.1;
};

// The value a pair is judged by: median latency, or average bandwidth; nullopt if not ok.
std::optional<double> mesh_pair_value(const exporters::MeshPairResult& pair);

exporters::MeshFindings find_mesh_outliers(int hosts, const std::vector<exporters::MeshPairResult>& pairs,
                                           const OutlierOptions& options);

// Median of a non-empty set (the mean of the middle two for an even count).
double median_of(std::vector<double> values);

}  // namespace rdmadiag::perftest
