#include "perftest/devices.h"

#include <infiniband/verbs.h>

#include <sstream>

#include "perftest/errors.h"
#include "perftest/verbs_resources.h"

namespace rdmadiag::perftest {

nlohmann::json describe_devices(bool with_counters) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    throw RunError(kNoDeviceMessage);
  }
  nlohmann::json devices = nlohmann::json::array();
  for (int d = 0; d < n; ++d) {
    const std::string name = ibv_get_device_name(list[d]);
    nlohmann::json dev{{"name", name}, {"node_guid", ""}, {"ports", nlohmann::json::array()}};
    char guid[24];
    const auto g = be64toh(ibv_get_device_guid(list[d]));
    std::snprintf(guid, sizeof guid, "%016llx", static_cast<unsigned long long>(g));
    dev["node_guid"] = guid;
    ibv_context* ctx = ibv_open_device(list[d]);
    if (!ctx) {
      dev["error"] = "cannot open device";
      devices.push_back(dev);
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0) {
      dev["firmware"] = attr.fw_ver;
      dev["max_qp_rd_atom"] = attr.max_qp_rd_atom;
      dev["max_qp"] = attr.max_qp;
      dev["max_mr_size"] = attr.max_mr_size;
      for (int p = 1; p <= attr.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa)) continue;
        nlohmann::json port{{"port", p},
                            {"state", port_state_name(pa.state)},
                            {"link_layer", link_layer_name(pa.link_layer)},
                            {"active_mtu", mtu_bytes(pa.active_mtu)},
                            {"max_mtu", mtu_bytes(pa.max_mtu)},
                            {"lid", pa.lid},
                            {"gids", nlohmann::json::array()}};
        for (const auto& e : read_gid_table(name, p))
          port["gids"].push_back({{"index", e.index}, {"gid", e.text()}, {"type", e.type}, {"netdev", e.netdev}});
        if (with_counters) port["counters"] = read_port_counters(name, p);
        dev["ports"].push_back(port);
      }
    }
    ibv_close_device(ctx);
    devices.push_back(dev);
  }
  ibv_free_device_list(list);
  return devices;
}

std::string format_devices_text(const nlohmann::json& devices, bool with_counters) {
  std::ostringstream out;
  for (const auto& dev : devices) {
    out << dev["name"].get<std::string>() << "  node_guid " << dev["node_guid"].get<std::string>();
    if (dev.contains("firmware")) out << "  fw " << dev["firmware"].get<std::string>();
    out << "\n";
    if (dev.contains("error")) out << "  error: " << dev["error"].get<std::string>() << "\n";
    for (const auto& p : dev["ports"]) {
      out << "  port " << p["port"].get<int>() << ": " << p["state"].get<std::string>() << ", "
          << p["link_layer"].get<std::string>() << ", MTU " << p["active_mtu"].get<int>() << " (max "
          << p["max_mtu"].get<int>() << "), LID " << p["lid"].get<int>() << "\n";
      if (p["gids"].empty()) out << "    no GIDs (no IP address on the netdev?)\n";
      for (const auto& g : p["gids"])
        out << "    GID " << g["index"].get<int>() << "  " << g["type"].get<std::string>() << "  "
            << g["gid"].get<std::string>() << "  " << g["netdev"].get<std::string>() << "\n";
      if (with_counters && p.contains("counters"))
        for (const auto& [k, v] : p["counters"].items()) out << "    " << k << " = " << v.get<std::uint64_t>() << "\n";
    }
  }
  return out.str();
}

}  // namespace rdmadiag::perftest
