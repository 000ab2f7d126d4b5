// The NVMe over Fabrics report of `rdmadiag nvme` (decode/nvme_analysis.h):
// JSON (its own schema, "nvme_schema_version", docs/json-schema.md section
// "rdmadiag nvme"), text, and one tab-separated line per capsule (--capsules,
// what the cross-check against tshark reads).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "decode/nvme_analysis.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

inline constexpr const char* kNvmeSchemaVersion = "1.7";  // 1.7: capture_point on queues, slowest, unanswered

Json nvme_json(const decode::NvmeAnalyzer& a);
void write_nvme_text(std::ostream& out, const decode::NvmeAnalyzer& a);
// Header line of the --capsules table, then one line per capsule.
std::string nvme_capsule_header();
std::string nvme_capsule_line(const decode::NvmeCapsuleRecord& r);
// Header line of the --commands table, then one line per completed command
// (tab-separated; the same columns as fields for --csv).
std::string nvme_command_header();
std::string nvme_command_line(const decode::NvmeCommandResult& r);
std::vector<std::string> nvme_command_columns();
std::vector<std::string> nvme_command_fields(const decode::NvmeCommandResult& r);

}  // namespace rdmadiag::exporters
