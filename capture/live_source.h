// Packet sources for `rdmadiag capture`: live libpcap interfaces, RDMA sniffer
// devices (capture/rdma_sniffer.h) and capture files, behind one interface so
// the capture loop treats them alike. Live sources are non-blocking and expose
// a descriptor to poll(); a file source is always ready until its end.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/file_reader.h"

struct pcap;

namespace rdmadiag::capture {

// What tcpdump users set on a live capture.
struct LiveOptions {
  int buffer_kib = 0;           // -B: kernel buffer in KiB (0: libpcap's default, 2 MiB)
  int snaplen = 262144;         // -s: whole packets by default (ICRC needs the last bytes)
  bool immediate = false;       // deliver packets as they arrive, not per filled block
  bool promiscuous = true;      // -p turns it off
  std::string tstamp_type;      // --time-stamp-type: host, adapter, adapter_unsynced, ...
  bool nanoseconds = false;     // --time-stamp-precision nano
  std::string filter;           // BPF capture filter
  int timeout_ms = 100;         // packet buffer timeout when not immediate
};

// libpcap's counters (pcap_stats): packets received by the capture, dropped for
// lack of buffer space, dropped by the interface. available=false when the
// source keeps none (files).
struct SourceStats {
  bool available = false;
  std::uint64_t received = 0;
  std::uint64_t dropped = 0;
  std::uint64_t if_dropped = 0;
};

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void packet(const Record& rec) = 0;
};

class PacketSource {
 public:
  virtual ~PacketSource() = default;
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  std::uint32_t linktype() const { return linktype_; }
  std::uint32_t snaplen() const { return snaplen_; }
  const std::string& error() const { return error_; }
  // Descriptor to poll for readability; -1 if the source never blocks (files).
  virtual int selectable_fd() const = 0;
  // Hands up to `max` ready packets to `sink`. Returns how many; 0 when none is
  // ready; kEnd at the end of a file; kFailed on an error (error() says why).
  virtual int dispatch(int max, PacketSink& sink) = 0;
  // Counters since the start; call at any time.
  virtual SourceStats stats() = 0;
  // For files: why reading stopped early ("" when read whole).
  virtual std::string stop_reason() const { return {}; }
  virtual bool is_live() const { return true; }

  static constexpr int kEnd = -2;
  static constexpr int kFailed = -1;

 protected:
  std::string name_;
  std::string description_;
  std::uint32_t linktype_ = 0;
  std::uint32_t snaplen_ = 0;
  std::string error_;
};

// A libpcap live capture ("eth0", "any", ...).
class PcapLiveSource final : public PacketSource {
 public:
  ~PcapLiveSource() override;
  // False and error() on failure, with a reason a user can act on (no such
  // interface, not permitted, bad filter, unsupported time-stamp type).
  bool open(const std::string& device, const LiveOptions& opts);
  // Warnings from activation the user should see (no promiscuous mode, ...).
  const std::vector<std::string>& warnings() const { return warnings_; }
  int selectable_fd() const override;
  int dispatch(int max, PacketSink& sink) override;
  SourceStats stats() override;

 private:
  pcap* handle_ = nullptr;
  bool nano_ = false;
  std::vector<std::string> warnings_;
};

// A capture file read through the same pipeline (-r).
class FileSource final : public PacketSource {
 public:
  bool open(const std::string& path);
  int selectable_fd() const override { return -1; }
  int dispatch(int max, PacketSink& sink) override;
  SourceStats stats() override { return {}; }
  std::string stop_reason() const override { return reader_.stop_reason(); }
  bool is_live() const override { return false; }
  std::uint64_t records() const { return reader_.records_read(); }

 private:
  FileReader reader_;
};

// Interfaces libpcap can capture on, as "name\tdescription" lines.
std::vector<std::string> list_pcap_interfaces(std::string& error);

// Names of the time-stamp types an interface offers (--time-stamp-type), for messages.
std::vector<std::string> tstamp_types(const std::string& device);

}  // namespace rdmadiag::capture
