// Capture from an RDMA device port ("mlx5_0", "mlx5_0:2", "rdma:mlx5_0:1").
//
// On RoCE/InfiniBand NICs the RDMA traffic is handled by the adapter and never
// reaches the netdev, so a capture on eth0 misses it. The verbs flow-steering
// API can mirror a port's traffic into a raw-packet QP: an ibv_flow with type
// IBV_FLOW_ATTR_SNIFFER and no specs (the approach of libpcap's own RDMA
// sniffer, which Debian's libpcap is built without). Frames arrive whole:
// Ethernet (DLT_EN10MB) on RoCE ports, raw InfiniBand from the LRH
// (LINKTYPE_INFINIBAND, 247) on IB ports.
//
// Untested on hardware: no machine the project runs on has a NIC that offers
// sniffer flows. Soft devices (rxe, siw) refuse raw-packet QPs; open() then
// fails with a message that says to capture on their netdev instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/live_source.h"

namespace rdmadiag::capture {

struct RdmaPortInfo {
  unsigned port = 0;
  std::string link_layer;  // "Ethernet", "InfiniBand", "unknown"
  std::string state;       // "ACTIVE", "DOWN", ...
};

struct RdmaDeviceInfo {
  std::string name;
  std::string driver;      // from sysfs (mlx5_core, rdma_rxe, siw...) when known
  std::string netdev;      // an associated network interface when known
  std::vector<RdmaPortInfo> ports;
};

// The RDMA devices libibverbs sees (empty when there are none); error set when
// the device list itself could not be read.
std::vector<RdmaDeviceInfo> list_rdma_devices(std::string& error);

// Parses "rdma:DEV[:PORT]" (always an RDMA device) or "DEV[:PORT]" when DEV is
// an RDMA device name and not a network interface. False when `spec` does not
// name an RDMA device.
bool parse_rdma_spec(const std::string& spec, std::string& device, unsigned& port, bool& explicit_prefix);

class RdmaSnifferSource final : public PacketSource {
 public:
  RdmaSnifferSource();
  ~RdmaSnifferSource() override;
  bool open(const std::string& device, unsigned port, int snaplen);
  int selectable_fd() const override;
  int dispatch(int max, PacketSink& sink) override;
  SourceStats stats() override;

 private:
  struct Verbs;
  std::unique_ptr<Verbs> v_;
  std::uint64_t received_ = 0;
  std::uint64_t failed_completions_ = 0;
};

}  // namespace rdmadiag::capture
