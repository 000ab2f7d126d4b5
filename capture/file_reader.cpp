#include "capture/file_reader.h"

#include "capture/pcapng_reader.h"
#include "decode/prefetch.h"

#include <pcap/pcap.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rdmadiag::capture {

namespace {

constexpr std::size_t kPcapFileHeaderLen = 24;
constexpr std::uint32_t kMagicUsec = 0xa1b2c3d4;
constexpr std::uint32_t kMagicNsec = 0xa1b23c4d;
// libpcap refuses larger records for most link types (pcap-int.h MAXIMUM_SNAPLEN).
constexpr std::uint32_t kMaxRecordLen = 262144;

// libpcap 1.10's refusal of a pcapng interface unlike the first (sf-pcapng.c):
// "an interface has a type N different from the type of the first interface",
// "an interface has a snapshot length N different from ...".
bool refuses_mixed_interfaces(const std::string& why) {
  return why.starts_with("an interface has a type ") || why.starts_with("an interface has a snapshot length ");
}

// libpcap 1.10 stops at a pcapng packet longer than its interface's snap length
// ("invalid packet capture length N, bigger than snaplen of M"), which tshark
// reads whole: the packet's block holds the bytes.
bool refuses_long_packet(const std::string& why) {
  return why.starts_with("invalid packet capture length ") && why.find(", bigger than snaplen of ") != std::string::npos;
}

// Record::ts_ns() must not overflow: seconds below 2^63 ns (as PcapngReader).
constexpr std::uint64_t kMaxSeconds = 9'000'000'000;

bool plain_epb(const std::uint8_t* h, std::size_t left, const PcapLayout& layout) {
  if (left < kEpbHeaderLen + 4) return false;
  const std::uint32_t len = load32(h + 4, layout.swapped);
  const std::uint32_t caplen = load32(h + 20, layout.swapped);
  // Not longer than the snap length: libpcap refuses such a packet and PcapngReader
  // reads the file from there on (FileReader::take_over_pcapng), with its own rules.
  if (load32(h, layout.swapped) != kEpbType || load32(h + 8, layout.swapped) != 0 || len % 4 != 0 || len > left ||
      caplen > layout.snaplen)
    return false;
  const std::uint64_t need = kEpbHeaderLen + ((std::uint64_t{caplen} + 3) & ~std::uint64_t{3}) + 4;
  if (len < need || len - need > kMaxEpbOptions) return false;
  const std::uint64_t ts = (std::uint64_t{load32(h + 12, layout.swapped)} << 32) | load32(h + 16, layout.swapped);
  return ts / (layout.usec ? 1'000'000 : 1'000'000'000) <= kMaxSeconds;
}

// Whether libpcap 1.10 changes the records of a file of link type `dlt` as it
// reads them (pcap_post_process), so that they are read through it, not in
// place. In a file not in our byte order it byte-swaps the fields some link
// layers' headers hold in the capturing host's order (swap_pseudo_headers:
// PFLOG, a Linux cooked capture's CAN ID, Linux USB, NFLOG); in any file it
// mends the length on the wire of some Linux USB isochronous completions
// (fixup_pcap_pkthdr). tshark does both too.
bool libpcap_rewrites_records(std::uint32_t dlt, bool swapped) {
  switch (dlt) {
    case DLT_USB_LINUX_MMAPPED:
      return true;
    case DLT_PFLOG:
    case DLT_LINUX_SLL:
    case DLT_LINUX_SLL2:
    case DLT_USB_LINUX:
    case DLT_NFLOG:
      return swapped;
    default:
      return false;
  }
}

}  // namespace

bool ignorable_block(std::uint32_t type) {
  return type == 4 || type == 5 || type == 0xA || type == 0xBAD || type == 0x40000BAD;
}

bool plain_record(const std::uint8_t* h, std::size_t left, const PcapLayout& layout) {
  if (layout.pcapng) return plain_epb(h, left, layout);
  if (left < kPcapRecordHeaderLen) return false;
  const std::uint32_t caplen = load32(h + 8, layout.swapped);
  return caplen <= layout.max_caplen && left - kPcapRecordHeaderLen >= caplen;
}

bool plausible_record_chain(const std::uint8_t* h, std::size_t avail, std::size_t left, const PcapLayout& layout,
                            unsigned chain) {
  const std::size_t hlen = record_header_len(layout);
  std::size_t pos = 0;
  for (unsigned i = 0; i < chain; ++i) {
    if (pos == left) return true;  // the end of the file, exactly at a record boundary
    if (pos + hlen > avail) return true;  // nothing seen against it
    if (!plain_record(h + pos, left - pos, layout)) {
      // a pcapng block that is passed over is part of the chain, its length seen at both ends
      const std::size_t len = passed_over_len(h + pos, left - pos, layout);
      if (len == 0 || pos + len > avail || !record_trailer_ok(h + pos, layout)) return false;
      pos += len;
      continue;
    }
    const Record rec = record_at(h + pos, layout);
    const std::size_t len = record_len(h + pos, layout);
    if (pos + len <= avail && !record_trailer_ok(h + pos, layout)) return false;
    const std::uint32_t frac = layout.pcapng ? 0 : load32(h + pos + 4, layout.swapped);
    if (frac >= (layout.usec ? 1'000'000u : 1'000'000'000u) || rec.caplen > rec.wirelen || rec.caplen > layout.snaplen)
      return false;
    pos += len;
  }
  return true;
}

FileReader::FileReader() = default;

FileReader::~FileReader() {
  unmap();
  if (handle_) pcap_close(handle_);
}

bool FileReader::open(const std::string& path) {
  path_ = path;
  if (path != "-") {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      error_ = path + ": " + std::strerror(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      error_ = path + ": is a directory, not a capture file";
      return false;
    }
    if (S_ISREG(st.st_mode) && st.st_size == 0) {
      error_ = path + ": empty file, not a capture file";
      return false;
    }
  }
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  handle_ = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (!handle_) {
    std::string why = errbuf;
    if (why.find("unknown file format") != std::string::npos)
      why = "not a pcap or pcapng capture file (unknown file format)";
    else if (why.find("truncated dump file") != std::string::npos)
      why = "not a capture file, or its header is cut short (" + why + ")";
    error_ = (path == "-" ? std::string("standard input") : path) + ": " + why;
    return false;
  }
  linktype_ = static_cast<std::uint32_t>(pcap_datalink(handle_));
  snaplen_ = static_cast<std::uint32_t>(pcap_snapshot(handle_));
  // pcapng's section header says 1; libpcap refuses a classic pcap below 2 as archaic.
  classic_pcap_ = pcap_major_version(handle_) != 1;
  PcapLayout pcapng_head;  // (pcapng set: the file's packets can be read in place)
  if (!classic_pcap_ && path != "-" && probe_pcapng(path, pcapng_head)) return true;
  if (path != "-" && read_in_place_) {
    // Classic pcap in a regular file: read records in place from a window of the file.
    FILE* f = pcap_file(handle_);
    struct stat st {};
    std::uint8_t head[4] = {};
    if (f && ::fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::size_t>(st.st_size) >= kPcapFileHeaderLen && ::pread(fileno(f), head, 4, 0) == 4) {
      const std::uint32_t magic = load32(head, false);
      const bool usec = magic == kMagicUsec || magic == __builtin_bswap32(kMagicUsec);
      const bool nsec = magic == kMagicNsec || magic == __builtin_bswap32(kMagicNsec);
      // libpcap swaps the captured and original lengths of classic pcap
      // versions before 2.4 (all of them, or where the captured one is the
      // larger: 2.3), and of the "modified" version 543: read through it.
      const bool classic_in_place = (usec || nsec) && pcap_major_version(handle_) == 2 && pcap_minor_version(handle_) >= 4;
      if (classic_in_place) {
        layout_.swapped = magic != kMagicUsec && magic != kMagicNsec;
        layout_.usec = usec;
        layout_.first_record = kPcapFileHeaderLen;
      }
      // pcapng: Enhanced Packet Blocks of the one interface are read in place
      // too (a file of several interfaces went to PcapngReader above).
      if (pcapng_head.pcapng) {
        layout_.swapped = pcapng_head.swapped;
        layout_.usec = pcapng_head.usec;
        layout_.pcapng = true;
        layout_.first_record = pcapng_head.first_record;
      }
      if ((classic_in_place || layout_.pcapng) && !libpcap_rewrites_records(linktype_, layout_.swapped)) {
        layout_.fd = fileno(f);
        layout_.file_size = static_cast<std::size_t>(st.st_size);
        // A record longer than the file's snap length is read whole, as tshark
        // reads it (libpcap would cut a classic pcap's to the snap length,
        // silently; PcapngReader takes a pcapng file's over).
        layout_.max_caplen = kMaxRecordLen;
        layout_.snaplen = std::min<std::uint32_t>(snaplen_, kMaxRecordLen);
        mapped_ = map_window(layout_.first_record);
      }
    }
  }
  return true;
}

namespace {
// The read window. Small enough to stay in the core's cache between the copy
// and the decode (the ICRC reads every byte right after) and to leave room
// there for the flow state; a record that crosses its end is read again from
// its start. 256 KiB: 2-4 % less CPU than 1 MiB with 64 and 16K connections,
// the same on the 10 M-packet file (docs/performance.md, session 23).
std::size_t window_bytes() {
  static const std::size_t bytes = [] {
    const char* env = std::getenv("RDMADIAG_READ_WINDOW");  // for the benchmarks
    return env ? std::max<std::size_t>(4096, std::strtoull(env, nullptr, 10)) : std::size_t{256} << 10;
  }();
  return bytes;
}
}  // namespace

// ---------------------------------------------------------------- mapped windows
//
// A window mapped from the file (set_map_windows) is read where the page cache
// holds it: no copy. If the file is cut while it is read, a read of a page it
// no longer has raises SIGBUS; the handler puts zero pages there (the read
// goes on) and says so, and the reader stops at the next record with a
// reason. One mapping in the process is guarded at a time (guard_mapping):
// the handler must know it.

namespace {

// Mapped windows: few calls, and the page cache's pages go straight into the
// page tables (MAP_POPULATE). 8 MiB: 2 MiB windows were 3 % slower, 32 MiB no
// faster (docs/performance.md, session 37).
constexpr std::size_t kMapWindowBytes = std::size_t{8} << 20;

std::atomic<std::uintptr_t> g_map_begin{0}, g_map_end{0};  // the guarded mapping, for the handler
volatile std::sig_atomic_t g_map_cut = 0;                  // a read of it hit a page the file no longer has
struct sigaction g_bus_before {};

void on_bus_error(int, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const std::uintptr_t begin = g_map_begin.load(std::memory_order_relaxed);
  const std::uintptr_t end = g_map_end.load(std::memory_order_relaxed);
  if (at >= begin && at < end) {
    const std::uintptr_t page = at & ~(std::uintptr_t{page_bytes()} - 1);
    void* zeros = ::mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros != MAP_FAILED) {
      g_map_cut = 1;
      return;  // the read is made again, of zeros
    }
  }
  // Not a read of the mapping: what would have happened without this handler.
  ::sigaction(SIGBUS, &g_bus_before, nullptr);
}

bool catch_bus_errors() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_bus_error;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, &g_bus_before) == 0;
  }();
  return installed;
}

}  // namespace

bool guard_mapping(const void* begin, std::size_t len) {
  std::uintptr_t none = 0;
  const auto b = reinterpret_cast<std::uintptr_t>(begin);
  page_bytes();  // (known before the handler may need it)
  if (!catch_bus_errors() || !g_map_begin.compare_exchange_strong(none, b)) return false;
  g_map_cut = 0;  // (a cut of the mapping before is not this one's)
  g_map_end.store(b + len);
  return true;
}

void unguard_mapping(const void* begin) {
  if (g_map_begin.load() != reinterpret_cast<std::uintptr_t>(begin)) return;
  g_map_end.store(0);
  g_map_begin.store(0);
}

bool mapping_cut() { return g_map_cut != 0; }
void clear_mapping_cut() { g_map_cut = 0; }

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

bool mapping_wanted() { return std::getenv("RDMADIAG_READ_COPY") == nullptr; }

const std::uint8_t* map_guarded(int fd, std::size_t offset, std::size_t len, bool populate) {
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, static_cast<off_t>(offset));
  if (m == MAP_FAILED) return nullptr;
  if (!guard_mapping(m, len)) {
    ::munmap(m, len);
    return nullptr;
  }
  return static_cast<const std::uint8_t*>(m);
}

void unmap_guarded(const std::uint8_t* begin, std::size_t len) {
  unguard_mapping(begin);
  ::munmap(const_cast<std::uint8_t*>(begin), len);
}

void FileReader::unmap() {
  if (mapped_base_) {
    unmap_guarded(mapped_base_, mapped_len_);
    mapped_base_ = nullptr;
  }
  map_ = nullptr;
}

// Maps the window that starts at file offset `pos`; false if it cannot (another
// reader maps one, or mmap failed): it is read into the buffer then.
bool FileReader::map_file_window(std::size_t pos) {
  const std::size_t start = pos - pos % page_bytes();
  const std::size_t len =
      std::min(std::max(kMapWindowBytes, max_record_len(layout_) + page_bytes()), layout_.file_size - start);
  mapped_base_ = map_guarded(layout_.fd, start, len, true);
  if (!mapped_base_) return false;
  mapped_len_ = len;
  ++windows_mapped_;
  map_ = mapped_base_ + (pos - start);
  map_len_ = len - (pos - start);
  return true;
}

bool FileReader::file_shrank() const {
  struct stat st {};
  return ::fstat(layout_.fd, &st) == 0 && static_cast<std::size_t>(st.st_size) < layout_.file_size;
}

// The file was cut while a window of it was mapped: stop with a reason. The
// records read from that window past the cut held what the kernel still had
// of its pages (old bytes, or zeros).
bool FileReader::stop_cut_while_read() {
  clear_mapping_cut();
  unmap();
  mapped_ = false;
  stop_reason_ = "stopped after record " + std::to_string(records_) +
                 ": the file shrank while it was read (the records read last, up to 8 MiB of them, may not be the file's)";
  return false;
}

std::size_t read_at(int fd, std::uint8_t* buf, std::size_t len, std::size_t offset) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// Reads the window that starts at file offset `pos` (a record header) into the
// buffer: all of it up to the end of the file, or false (libpcap then decides).
bool FileReader::map_window(std::size_t pos) {
  unmap();
  if (!buffer_) {
    // Room for the window, or for the longest record read in place.
    buffer_len_ = std::max(window_bytes(), max_record_len(layout_));
    buffer_ = std::make_unique_for_overwrite<std::uint8_t[]>(buffer_len_);
  }
  map_base_ = pos;
  map_pos_ = pos;
  if (map_windows_ && map_file_window(pos)) return true;
  const std::size_t want = std::min(buffer_len_, layout_.file_size - pos);
  map_len_ = read_at(layout_.fd, buffer_.get(), want, pos);
  if (map_len_ < want) return false;  // an I/O error, or the file shrank
  map_ = buffer_.get();
  return true;
}

// The next record from the window, if it is plainly well-formed; otherwise
// libpcap continues from this record (its FILE is moved there) and decides.
// A pcapng block libpcap would pass over is passed over here too.
bool FileReader::next_mapped(Record& rec) {
  const std::size_t hlen = record_header_len(layout_);
  for (;;) {
    if (mapped_base_ && mapping_cut()) return stop_cut_while_read();
    const std::size_t left = layout_.file_size - map_pos_;
    if (left == 0) return false;  // the end, exactly at a record boundary
    if (left < hlen) return leave_window(rec);
    if (map_pos_ + hlen > map_base_ + map_len_) {
      if (hold_window_ || !map_window(map_pos_)) return leave_window(rec);
    }
    const std::uint8_t* h = map_ + (map_pos_ - map_base_);
    const bool plain = plain_record(h, left, layout_);
    const std::size_t len = plain ? record_len(h, layout_) : passed_over_len(h, left, layout_);
    if (len == 0) return leave_window(rec);
    if (map_pos_ + len > map_base_ + map_len_) {
      if (hold_window_ || !map_window(map_pos_)) return leave_window(rec);
      h = map_ + (map_pos_ - map_base_);
    }
    if (!record_trailer_ok(h, layout_)) return leave_window(rec);
    if (!plain) {
      map_pos_ += len;
      continue;
    }
    ++records_;
    rec = record_at(h, layout_);
    map_pos_ += len;
    if (prefetch_ahead_ || mapped_base_) prefetch_after_record();
    return true;
  }
}

// Streams the bytes ahead into the cache, each line once: a reader that skips
// most records touches only their first lines, too sparse for the hardware
// prefetcher, and every next header would be a miss to memory. Stays inside
// the window.
void FileReader::prefetch_after_record() {
  // (offsets in the window; prefetched_ keeps the file offset)
  std::size_t done = prefetched_ - std::min(prefetched_, map_base_);
  decode::prefetch_ahead(map_, map_pos_ - map_base_, std::min(map_pos_ + kPrefetchAhead, map_base_ + map_len_) - map_base_, done);
  prefetched_ = map_base_ + done;
}

// Reading on would move the window or leave it for libpcap (hold_window_):
// next_mapped returns false with window_held_ set and nothing read, and the
// batch ends there; the next batch begins with that record. A record libpcap or
// PcapngReader returns is valid only until the next read: a batch of one.
std::size_t FileReader::next_batch(std::span<Record> out) {
  std::size_t n = 0;
  while (n < out.size() && !batch_ended_) {
    hold_window_ = n > 0;
    const bool ok = next(out[n]);
    hold_window_ = false;
    if (!ok) {
      if (!window_held_) batch_ended_ = true;
      window_held_ = false;
      break;
    }
    ++n;
    if (!mapped_) break;
  }
  return n;
}

// The record at map_pos_ is not read from this window: in a batch, which then
// ends (next_batch), else from the next window or through libpcap.
bool FileReader::leave_window(Record& rec) {
  // The header was read as zeros (SIGBUS), or past the file's new end in its last page.
  if (mapped_base_ && (mapping_cut() || file_shrank())) return stop_cut_while_read();
  if (hold_window_) {
    window_held_ = true;
    return false;
  }
  return fall_back(rec);
}

// Something unusual (a cut record, an oversized length): libpcap's rules and messages from here on.
bool FileReader::fall_back(Record& rec) {
  unmap();
  mapped_ = false;
  if (std::fseek(pcap_file(handle_), static_cast<long>(map_pos_), SEEK_SET) != 0) {
    stop_reason_ = "stopped after record " + std::to_string(records_) + ": " + std::strerror(errno);
    return false;
  }
  return next(rec);
}

bool FileReader::next(Record& rec) {
  if (mapped_) return next_mapped(rec);
  if (pcapng_) return next_pcapng(rec);
  if (!handle_) return false;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(handle_, &hdr, &data);
  if (rc == 1) {
    // Record::ts_ns() must hold it (a pcapng time stamp can be 2^64 units), as PcapngReader says.
    if (hdr->ts.tv_sec > static_cast<std::int64_t>(kMaxSeconds) || hdr->ts.tv_sec < -static_cast<std::int64_t>(kMaxSeconds)) {
      stop_reason_ = "stopped after record " + std::to_string(records_) + ": packet time stamp more than 285 years from 1970";
      return false;
    }
    ++records_;
    // A classic pcap's seconds are an unsigned 32-bit field, which libpcap sign-extends.
    rec.ts_sec = classic_pcap_ ? static_cast<std::uint32_t>(hdr->ts.tv_sec) : hdr->ts.tv_sec;
    rec.ts_nsec = static_cast<std::uint32_t>(hdr->ts.tv_usec);  // nanoseconds: opened with NANO precision
    rec.caplen = hdr->caplen;
    rec.wirelen = hdr->len;
    rec.data = std::span<const std::uint8_t>(data, hdr->caplen);
    return true;
  }
  if (rc == PCAP_ERROR) {
    const std::string why = pcap_geterr(handle_);
    if (take_over_pcapng(why)) return next_pcapng(rec);
    stop_reason_ = "stopped after record " + std::to_string(records_) + ": " + why;
    if (path_ == "-" && refuses_mixed_interfaces(why))
      stop_reason_ += " (libpcap 1.10 reads one link type per file; rdmadiag reads such a pcapng file whole "
                      "when given by name, not on standard input)";
  }
  return false;  // PCAP_ERROR_BREAK: end of file
}

// A pcapng file read by PcapngReader up to its first record. With more than one
// interface before it, PcapngReader reads the file from the start, and says each
// record's interface (true).
// With one, whose time stamps are in micro- or nanoseconds with no offset,
// `in_place` says where its first packet's block starts and the section's byte
// order (its pcapng set): the packets can then be read in place.
bool FileReader::probe_pcapng(const std::string& path, PcapLayout& in_place) {
  PcapngReader probe;
  Record first;
  if (!probe.open(path) || !probe.next(first)) return false;
  if (probe.interfaces().size() == 1) {
    const PcapngInterface& i = probe.interfaces()[0];
    in_place.pcapng = !i.binary_resol && (i.resol_exp == 6 || i.resol_exp == 9) && i.offset_sec == 0;
    in_place.usec = i.resol_exp == 6;
    in_place.swapped = probe.swapped();
    in_place.first_record = probe.block_start();
    return false;
  }
  auto own = std::make_unique<PcapngReader>();
  if (!own->open(path)) return false;
  for (const PcapngInterface& i : probe.interfaces()) point_names_.push_back(i.name);
  pcapng_ = std::move(own);
  return true;
}

// libpcap 1.10 stopped at an interface whose link type or snap length differs
// from the first one's, or at a packet longer than its interface's snap length
// (a valid pcapng file): PcapngReader reads the file again
// from its start, passes over the records libpcap handed out and goes on from
// there. A file by name only: standard input cannot be read again.
bool FileReader::take_over_pcapng(const std::string& refusal) {
  // (libpcap refuses a classic pcap's oversized packet in the same words)
  if (classic_pcap_ || path_ == "-" || !(refuses_mixed_interfaces(refusal) || refuses_long_packet(refusal)))
    return false;
  auto own = std::make_unique<PcapngReader>();
  if (!own->open(path_)) return false;
  Record skipped;
  for (std::uint64_t i = 0; i < records_; ++i)
    if (!own->next(skipped)) {
      // It does not find what libpcap read: keep libpcap's verdict.
      return false;
    }
  pcapng_ = std::move(own);
  return true;
}

bool FileReader::next_pcapng(Record& rec) {
  if (pcapng_->next(rec)) {
    ++records_;
    return true;
  }
  if (!pcapng_->stop_reason().empty() && stop_reason_.empty())
    stop_reason_ = "stopped after record " + std::to_string(records_) + ": " + pcapng_->stop_reason();
  return false;
}

std::uint32_t FileReader::record_linktype() const { return pcapng_ ? pcapng_->linktype() : linktype_; }

std::uint32_t FileReader::record_interface() const { return pcapng_ ? pcapng_->interface() : 0; }

const PcapngInterface* FileReader::interface_info(std::uint32_t index) const {
  if (!pcapng_ || index >= pcapng_->interfaces().size()) return nullptr;
  return &pcapng_->interfaces()[index];
}

std::optional<PcapLayout> FileReader::mapped_layout() const {
  if (!mapped_) return std::nullopt;
  return layout_;
}

bool FileReader::seek_record(std::size_t offset, std::uint64_t records) {
  if (!mapped_ || offset > layout_.file_size) return false;
  records_ = records;
  if (map_window(offset)) return true;
  unmap();
  mapped_ = false;  // libpcap reads from `offset` on
  return std::fseek(pcap_file(handle_), static_cast<long>(offset), SEEK_SET) == 0;
}

std::int64_t FileReader::file_offset() const {
  if (mapped_) return static_cast<std::int64_t>(map_pos_);
  if (pcapng_) return pcapng_->offset();
  if (!handle_) return 0;
  FILE* f = pcap_file(handle_);
  return f ? static_cast<std::int64_t>(std::ftell(f)) : 0;
}

}  // namespace rdmadiag::capture
