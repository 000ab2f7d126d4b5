// Outcome of parsing one header. Truncated (the capture ended early) is not the
// same as malformed (the bytes that are there cannot be right).
#pragma once
#include <cstdint>

namespace rdmadiag::decode {

enum class ParseStatus : std::uint8_t { ok, truncated, malformed };

}  // namespace rdmadiag::decode
