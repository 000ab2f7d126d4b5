// Errors that end a test with a message a person can act on.
#pragma once
#include <stdexcept>
#include <string>

namespace rdmadiag::perftest {

class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char kNoDeviceMessage[] =
    "no RDMA devices found; is the rdma_rxe/siw/mlx5 driver loaded? see `rdmadiag devices`";

// "IBV_WC_RETRY_EXC_ERR" and what it usually means.
std::string completion_status_name(int status);
std::string completion_status_hint(int status);

}  // namespace rdmadiag::perftest
