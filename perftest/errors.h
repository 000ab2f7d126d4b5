// Errors that end a test with a message a person can act on.
#pragma once
#include <stdexcept>
#include <string>

namespace rdmadiag::perftest {

class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A SEND on the rdma_cm exchange QP whose completion failed with IBV_WC_LOC_QP_OP_ERR: siw
// reports that when its socket fails after the message went out (the peer closing), so the
// peer may well have it. Only the peer's answer can tell (OobTransport::exchange_message).
class SendNotConfirmed : public RunError {
 public:
  using RunError::RunError;
};

inline constexpr char kNoDeviceMessage[] =
    "no RDMA devices found; is the rdma_rxe/siw/mlx5 driver loaded? see `rdmadiag devices`";

// "IBV_WC_RETRY_EXC_ERR" and what it usually means.
std::string completion_status_name(int status);
std::string completion_status_hint(int status);

}  // namespace rdmadiag::perftest
