#include "capture/live_source.h"

#include <pcap/pcap.h>

#include <cstring>

namespace rdmadiag::capture {

namespace {

struct DispatchContext {
  PacketSink* sink;
  bool nano;
};

void on_packet(u_char* user, const pcap_pkthdr* h, const u_char* bytes) {
  auto* ctx = reinterpret_cast<DispatchContext*>(user);
  Record rec;
  rec.ts_sec = h->ts.tv_sec;
  // tv_usec holds nanoseconds when the handle was opened with nanosecond precision.
  rec.ts_nsec = static_cast<std::uint32_t>(ctx->nano ? h->ts.tv_usec : h->ts.tv_usec * 1000);
  rec.caplen = h->caplen;
  rec.wirelen = h->len;
  rec.data = std::span<const std::uint8_t>(bytes, h->caplen);
  ctx->sink->packet(rec);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<std::string> tstamp_types(const std::string& device) {
  std::vector<std::string> out;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_create(device.c_str(), errbuf);
  if (!p) return out;
  int* types = nullptr;
  const int n = pcap_list_tstamp_types(p, &types);
  for (int i = 0; i < n; ++i)
    if (const char* name = pcap_tstamp_type_val_to_name(types[i])) out.emplace_back(name);
  if (types) pcap_free_tstamp_types(types);
  pcap_close(p);
  return out;
}

PcapLiveSource::~PcapLiveSource() {
  if (handle_) pcap_close(handle_);
}

bool PcapLiveSource::open(const std::string& device, const LiveOptions& opts) {
  name_ = device;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  handle_ = pcap_create(device.c_str(), errbuf);
  if (!handle_) {
    error_ = device + ": " + errbuf;
    return false;
  }
  pcap_set_snaplen(handle_, opts.snaplen);
  pcap_set_promisc(handle_, opts.promiscuous ? 1 : 0);
  pcap_set_timeout(handle_, opts.timeout_ms);
  if (opts.immediate) pcap_set_immediate_mode(handle_, 1);
  if (opts.buffer_kib > 0) pcap_set_buffer_size(handle_, opts.buffer_kib * 1024);
  if (!opts.tstamp_type.empty()) {
    const int type = pcap_tstamp_type_name_to_val(opts.tstamp_type.c_str());
    if (type == PCAP_ERROR) {
      error_ = "unknown time-stamp type '" + opts.tstamp_type + "' (" + device + " offers: " + join(tstamp_types(device)) + ")";
      return false;
    }
    const int rc = pcap_set_tstamp_type(handle_, type);
    if (rc == PCAP_ERROR_CANTSET_TSTAMP_TYPE) {
      error_ = device + ": does not offer time-stamp type '" + opts.tstamp_type + "' (it offers: " + join(tstamp_types(device)) + ")";
      return false;
    }
    if (rc == PCAP_WARNING_TSTAMP_TYPE_NOTSUP)
      warnings_.push_back(device + ": time-stamp type '" + opts.tstamp_type + "' not supported, using host time stamps");
  }
  if (opts.nanoseconds && pcap_set_tstamp_precision(handle_, PCAP_TSTAMP_PRECISION_NANO) != 0) {
    error_ = device + ": nanosecond time stamps are not available";
    return false;
  }
  const int rc = pcap_activate(handle_);
  if (rc < 0) {
    const std::string detail = pcap_geterr(handle_);
    switch (rc) {
      case PCAP_ERROR_NO_SUCH_DEVICE:
        error_ = device + ": no such interface (rdmadiag capture --list-interfaces shows them)";
        break;
      case PCAP_ERROR_PERM_DENIED:
        error_ = device + ": not permitted to capture (" + detail +
                 "); run as root, or grant the binary CAP_NET_RAW and CAP_NET_ADMIN (setcap cap_net_raw,cap_net_admin=eip rdmadiag)";
        break;
      case PCAP_ERROR_PROMISC_PERM_DENIED:
        error_ = device + ": not permitted to enable promiscuous mode; use -p to capture without it";
        break;
      case PCAP_ERROR_IFACE_NOT_UP:
        error_ = device + ": interface is down";
        break;
      default:
        error_ = device + ": " + (detail.empty() ? pcap_statustostr(rc) : detail);
    }
    return false;
  }
  if (rc == PCAP_WARNING_PROMISC_NOTSUP) warnings_.push_back(device + ": promiscuous mode not supported");
  if (rc == PCAP_WARNING_TSTAMP_TYPE_NOTSUP)
    warnings_.push_back(device + ": time-stamp type '" + opts.tstamp_type + "' not supported, using host time stamps");
  nano_ = pcap_get_tstamp_precision(handle_) == PCAP_TSTAMP_PRECISION_NANO;
  linktype_ = static_cast<std::uint32_t>(pcap_datalink(handle_));
  snaplen_ = static_cast<std::uint32_t>(pcap_snapshot(handle_));
  if (!opts.filter.empty()) {
    bpf_program prog{};
    if (pcap_compile(handle_, &prog, opts.filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0) {
      error_ = "capture filter '" + opts.filter + "': " + pcap_geterr(handle_);
      return false;
    }
    const int set = pcap_setfilter(handle_, &prog);
    pcap_freecode(&prog);
    if (set != 0) {
      error_ = device + ": cannot set the capture filter: " + pcap_geterr(handle_);
      return false;
    }
  }
  if (pcap_setnonblock(handle_, 1, errbuf) != 0) {
    error_ = device + ": " + errbuf;
    return false;
  }
  return true;
}

int PcapLiveSource::selectable_fd() const { return handle_ ? pcap_get_selectable_fd(handle_) : -1; }

int PcapLiveSource::dispatch(int max, PacketSink& sink) {
  DispatchContext ctx{&sink, nano_};
  const int n = pcap_dispatch(handle_, max, on_packet, reinterpret_cast<u_char*>(&ctx));
  if (n == PCAP_ERROR) {
    error_ = name_ + ": " + pcap_geterr(handle_);
    return kFailed;
  }
  return n < 0 ? 0 : n;
}

SourceStats PcapLiveSource::stats() {
  SourceStats s;
  pcap_stat ps{};
  if (handle_ && pcap_stats(handle_, &ps) == 0) {
    s.available = true;
    s.received = ps.ps_recv;
    s.dropped = ps.ps_drop;
    s.if_dropped = ps.ps_ifdrop;
  }
  return s;
}

bool FileSource::open(const std::string& path) {
  name_ = path;
  if (!reader_.open(path)) {
    error_ = reader_.error();
    return false;
  }
  linktype_ = reader_.linktype();
  snaplen_ = reader_.snaplen();
  return true;
}

int FileSource::dispatch(int max, PacketSink& sink) {
  Record rec;
  int n = 0;
  while (n < max) {
    if (!reader_.next(rec)) return n > 0 ? n : kEnd;
    if (reader_.record_linktype() != linktype_) {
      // The pipeline keeps one link type per source; analyze reads such a file whole.
      error_ = name_ + ": a pcapng file with interfaces of link types " + std::to_string(linktype_) + " and " +
               std::to_string(reader_.record_linktype()) + "; capture -r reads one per file, use rdmadiag analyze";
      return kFailed;
    }
    sink.packet(rec);
    ++n;
  }
  return n;
}

std::vector<std::string> list_pcap_interfaces(std::string& error) {
  std::vector<std::string> out;
  pcap_if_t* all = nullptr;
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  if (pcap_findalldevs(&all, errbuf) != 0) {
    error = errbuf;
    return out;
  }
  for (pcap_if_t* d = all; d; d = d->next) {
    std::string line = d->name;
    line += '\t';
    if (d->description) line += d->description;
    if (d->flags & PCAP_IF_LOOPBACK) line += line.back() == '\t' ? "loopback" : ", loopback";
    out.push_back(line);
  }
  pcap_freealldevs(all);
  return out;
}

}  // namespace rdmadiag::capture
