// Turns TestResult into perftest-style text and into the JSON report (docs/perftest.md,
// docs/perftest-schema.json). Kept apart from the engine so exporters can reuse it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "perftest/engine.h"

namespace rdmadiag::perftest {

inline constexpr int kReportSchemaVersion = 1;

// The banner, addresses and results table in perftest's layout (its columns first, then ours).
std::string format_text(const TestResult& result, const TestOptions& options);
nlohmann::json to_json(const TestResult& result, const TestOptions& options);
// perftest's own --out_json flavour is not JSON (unquoted keys); we write real JSON with the
// same key names for the results, so tools expecting perftest's names find them.
nlohmann::json to_perftest_style_json(const TestResult& result, const TestOptions& options);

std::string rdmadiag_version();

}  // namespace rdmadiag::perftest
