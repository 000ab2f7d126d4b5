#include "capture/rdma_sniffer.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <pcap/dlt.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace rdmadiag::capture {

namespace {

constexpr int kReceives = 512;        // posted receive buffers
constexpr int kReceiveSize = 10240;   // a 9000-byte RoCE frame or a 4 KiB-MTU IB packet fits
constexpr int kPollBatch = 32;
constexpr std::uint32_t kLinktypeInfiniband = 247;

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

std::string sysfs_driver(const std::string& dev) {
  std::error_code ec;
  const auto target = std::filesystem::read_symlink("/sys/class/infiniband/" + dev + "/device/driver", ec);
  if (!ec) return target.filename().string();
  // Soft devices have no PCI device; rxe and siw name their parent netdev instead.
  if (dev.rfind("rxe", 0) == 0) return "rdma_rxe";
  if (dev.rfind("siw", 0) == 0) return "siw";
  return {};
}

std::string sysfs_netdev(const std::string& dev, unsigned port) {
  std::string nd = read_line("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/ndevs/0");
  if (nd.empty()) nd = read_line("/sys/class/infiniband/" + dev + "/parent");
  return nd;
}

// mlx5 counts packets it dropped for want of a posted receive buffer.
bool read_out_of_buffer(const std::string& dev, unsigned port, std::uint64_t& value) {
  std::ifstream in("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/hw_counters/out_of_buffer");
  return static_cast<bool>(in >> value);
}

const char* link_layer_name(std::uint8_t ll) {
  switch (ll) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unknown";
  }
}

bool is_netdev(const std::string& name) { return if_nametoindex(name.c_str()) != 0; }

// Opens the device named, into ctx: "" or what went wrong (after the source's name).
std::string open_named_device(const std::string& device, ibv_context*& ctx) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return std::string(": cannot list RDMA devices: ") + std::strerror(errno);
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    names += (names.empty() ? "" : ", ") + std::string(ibv_get_device_name(list[i]));
    if (device == ibv_get_device_name(list[i])) dev = list[i];
  }
  if (dev) ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!dev) return ": no RDMA device named '" + device + "' (present: " + (names.empty() ? "none" : names) + ")";
  if (!ctx) return std::string(": cannot open the RDMA device: ") + std::strerror(errno);
  return "";
}

}  // namespace

std::vector<RdmaDeviceInfo> list_rdma_devices(std::string& error) {
  std::vector<RdmaDeviceInfo> out;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    error = std::string("cannot list RDMA devices: ") + std::strerror(errno);
    return out;
  }
  for (int i = 0; i < n; ++i) {
    RdmaDeviceInfo info;
    info.name = ibv_get_device_name(list[i]);
    info.driver = sysfs_driver(info.name);
    if (ibv_context* ctx = ibv_open_device(list[i])) {
      ibv_device_attr attr{};
      if (ibv_query_device(ctx, &attr) == 0)
        for (unsigned p = 1; p <= attr.phys_port_cnt; ++p) {
          ibv_port_attr pa{};
          if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa) != 0) continue;
          info.ports.push_back({p, link_layer_name(pa.link_layer), ibv_port_state_str(pa.state)});
        }
      ibv_close_device(ctx);
    }
    info.netdev = sysfs_netdev(info.name, 1);
    out.push_back(std::move(info));
  }
  ibv_free_device_list(list);
  return out;
}

bool parse_rdma_spec(const std::string& spec, std::string& device, unsigned& port, bool& explicit_prefix) {
  std::string rest = spec;
  explicit_prefix = rest.rfind("rdma:", 0) == 0;
  if (explicit_prefix) rest = rest.substr(5);
  port = 1;
  const auto colon = rest.find(':');
  if (colon != std::string::npos) {
    const std::string p = rest.substr(colon + 1);
    const bool numeric = !p.empty() && p.size() <= 3 && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric && !explicit_prefix) return false;
    port = numeric ? static_cast<unsigned>(std::stoul(p)) : 0;  // port 0: open() says the port is bad
    rest = rest.substr(0, colon);
  }
  device = rest;
  if (explicit_prefix) return true;
  if (is_netdev(spec)) return false;  // a network interface of that name wins
  std::string err;
  for (const auto& d : list_rdma_devices(err))
    if (d.name == device) return true;
  return false;
}

struct RdmaSnifferSource::Verbs {
  ibv_context* ctx = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_flow* flow = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<std::uint8_t> buffer;
  std::string device;
  unsigned port = 1;
  int snaplen = kReceiveSize;
  bool oob_counter = false;
  std::uint64_t oob_start = 0;

  ~Verbs() {
    if (flow) ibv_destroy_flow(flow);
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (channel) ibv_destroy_comp_channel(channel);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }

  bool post_receive(std::uint64_t slot) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buffer.data() + slot * kReceiveSize);
    sge.length = kReceiveSize;
    sge.lkey = mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad) == 0;
  }
};

RdmaSnifferSource::RdmaSnifferSource() : v_(std::make_unique<Verbs>()) {}
RdmaSnifferSource::~RdmaSnifferSource() = default;

bool RdmaSnifferSource::open(const std::string& device, unsigned port, int snaplen) {
  name_ = "rdma:" + device + ":" + std::to_string(port);
  v_->device = device;
  v_->port = port;
  v_->snaplen = snaplen > 0 && snaplen < kReceiveSize ? snaplen : kReceiveSize;
  if (const std::string why = open_named_device(device, v_->ctx); !why.empty()) {
    error_ = name_ + why;
    return false;
  }
  ibv_port_attr pa{};
  if (port == 0 || port > 255 || ibv_query_port(v_->ctx, static_cast<std::uint8_t>(port), &pa) != 0) {
    error_ = name_ + ": the device has no port " + std::to_string(port);
    return false;
  }
  linktype_ = pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? kLinktypeInfiniband : DLT_EN10MB;
  snaplen_ = static_cast<std::uint32_t>(v_->snaplen);
  description_ = std::string("RDMA sniffer, ") + link_layer_name(pa.link_layer) + " port";
  const std::string driver = sysfs_driver(device);
  const std::string netdev = sysfs_netdev(device, port);
  const auto fail = [&](const std::string& step) {
    const int err = errno;
    error_ = name_ + ": " + step + " failed (" + std::strerror(err) + ")";
    if (driver == "rdma_rxe" || driver == "siw")
      error_ += ": " + driver + " is a software RDMA device and cannot sniff; its traffic goes through the network stack, capture it on " +
                (netdev.empty() ? std::string("its network interface") : "-i " + netdev);
    else if (err == EPERM || err == EACCES)
      error_ += ": sniffer flows need CAP_NET_RAW (run as root)";
    else
      error_ += ": this device or its firmware does not offer sniffer flows (IBV_FLOW_ATTR_SNIFFER)";
    return false;
  };
  if (!(v_->pd = ibv_alloc_pd(v_->ctx))) return fail("allocating a protection domain");
  if (!(v_->channel = ibv_create_comp_channel(v_->ctx))) return fail("creating a completion channel");
  if (!(v_->cq = ibv_create_cq(v_->ctx, kReceives, nullptr, v_->channel, 0))) return fail("creating a completion queue");
  ibv_qp_init_attr qia{};
  qia.send_cq = v_->cq;
  qia.recv_cq = v_->cq;
  qia.cap.max_recv_wr = kReceives;
  qia.cap.max_recv_sge = 1;
  qia.qp_type = IBV_QPT_RAW_PACKET;
  if (!(v_->qp = ibv_create_qp(v_->pd, &qia))) return fail("creating a raw-packet QP");
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_INIT;
  qa.port_num = static_cast<std::uint8_t>(port);
  if (ibv_modify_qp(v_->qp, &qa, IBV_QP_STATE | IBV_QP_PORT) != 0) return fail("moving the raw-packet QP to INIT");
  qa = ibv_qp_attr{};
  qa.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(v_->qp, &qa, IBV_QP_STATE) != 0) return fail("moving the raw-packet QP to RTR");
  v_->buffer.assign(static_cast<std::size_t>(kReceives) * kReceiveSize, 0);
  if (!(v_->mr = ibv_reg_mr(v_->pd, v_->buffer.data(), v_->buffer.size(), IBV_ACCESS_LOCAL_WRITE)))
    return fail("registering the receive buffer");
  for (int i = 0; i < kReceives; ++i)
    if (!v_->post_receive(static_cast<std::uint64_t>(i))) return fail("posting receive buffers");
  // A flow with no specs of type SNIFFER: every packet of the port, both directions.
  ibv_flow_attr fa{};
  fa.type = IBV_FLOW_ATTR_SNIFFER;
  fa.size = sizeof fa;
  fa.port = static_cast<std::uint8_t>(port);
  if (!(v_->flow = ibv_create_flow(v_->qp, &fa))) return fail("creating a sniffer flow");
  if (ibv_req_notify_cq(v_->cq, 0) != 0) return fail("arming the completion queue");
  const int flags = fcntl(v_->channel->fd, F_GETFL);
  if (flags < 0 || fcntl(v_->channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) return fail("making the completion channel non-blocking");
  v_->oob_counter = read_out_of_buffer(device, port, v_->oob_start);
  return true;
}

int RdmaSnifferSource::selectable_fd() const { return v_->channel ? v_->channel->fd : -1; }

int RdmaSnifferSource::dispatch(int max, PacketSink& sink) {
  // Consume and acknowledge pending notifications, then re-arm before polling so
  // a completion that arrives after the last poll still wakes poll().
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  unsigned events = 0;
  while (ibv_get_cq_event(v_->channel, &ev_cq, &ev_ctx) == 0) ++events;
  if (events) {
    ibv_ack_cq_events(v_->cq, events);
    ibv_req_notify_cq(v_->cq, 0);
  }
  ibv_wc wc[kPollBatch];
  int delivered = 0;
  while (delivered < max) {
    const int k = ibv_poll_cq(v_->cq, std::min(kPollBatch, max - delivered), wc);
    if (k < 0) {
      error_ = name_ + ": polling the completion queue failed";
      return kFailed;
    }
    if (k == 0) break;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < k; ++i) {
      if (wc[i].status == IBV_WC_SUCCESS) {
        Record rec;
        rec.ts_sec = now.tv_sec;
        rec.ts_nsec = static_cast<std::uint32_t>(now.tv_nsec);
        rec.wirelen = wc[i].byte_len;
        rec.caplen = std::min<std::uint32_t>(wc[i].byte_len, static_cast<std::uint32_t>(v_->snaplen));
        rec.data = std::span<const std::uint8_t>(v_->buffer.data() + wc[i].wr_id * kReceiveSize, rec.caplen);
        ++received_;
        ++delivered;
        sink.packet(rec);
      } else {
        ++failed_completions_;
      }
      if (!v_->post_receive(wc[i].wr_id)) {
        error_ = name_ + ": re-posting a receive buffer failed";
        return kFailed;
      }
    }
  }
  return delivered;
}

SourceStats RdmaSnifferSource::stats() {
  SourceStats s;
  s.available = true;
  s.received = received_;
  std::uint64_t oob = 0;
  if (v_->oob_counter && read_out_of_buffer(v_->device, v_->port, oob) && oob >= v_->oob_start)
    s.dropped = oob - v_->oob_start;
  s.if_dropped = failed_completions_;
  return s;
}

}  // namespace rdmadiag::capture
