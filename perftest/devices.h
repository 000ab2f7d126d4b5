// `rdmadiag devices`: what RDMA hardware/software devices this host has, as text or JSON.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rdmadiag::perftest {

// Throws RunError(kNoDeviceMessage) when there is no device.
nlohmann::json describe_devices(bool with_counters);
std::string format_devices_text(const nlohmann::json& devices, bool with_counters);

}  // namespace rdmadiag::perftest
