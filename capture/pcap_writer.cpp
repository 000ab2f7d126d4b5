#include "capture/pcap_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmadiag::capture {

namespace {

constexpr std::size_t kBufferLimit = 1 << 15;  // write out once this much is buffered
constexpr std::uint32_t kPcapMagicNano = 0xa1b23c4d;
constexpr std::uint32_t kPcapngShb = 0x0A0D0D0A;
constexpr std::uint32_t kPcapngIdb = 1;
constexpr std::uint32_t kPcapngIsb = 5;
constexpr std::uint32_t kPcapngEpb = 6;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEnd = 0;
constexpr std::uint16_t kShbUserAppl = 4;
constexpr std::uint16_t kIfName = 2;
constexpr std::uint16_t kIfDescription = 3;
constexpr std::uint16_t kIfTsresol = 9;
constexpr std::uint16_t kIsbIfRecv = 4;
constexpr std::uint16_t kIsbIfDrop = 5;
constexpr std::uint16_t kIsbOsDrop = 7;

std::size_t pad4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// Host-order appends: both formats are written in the writer's byte order,
// which their magic numbers announce.
void put16(std::vector<std::uint8_t>& b, std::uint16_t v) {
  std::uint8_t t[2];
  std::memcpy(t, &v, 2);
  b.insert(b.end(), t, t + 2);
}
void put32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  std::uint8_t t[4];
  std::memcpy(t, &v, 4);
  b.insert(b.end(), t, t + 4);
}
void put64(std::vector<std::uint8_t>& b, std::uint64_t v) {
  std::uint8_t t[8];
  std::memcpy(t, &v, 8);
  b.insert(b.end(), t, t + 8);
}
void put_bytes_padded(std::vector<std::uint8_t>& b, const std::uint8_t* p, std::size_t n) {
  b.insert(b.end(), p, p + n);
  b.insert(b.end(), pad4(n) - n, 0);
}
void put_string_option(std::vector<std::uint8_t>& b, std::uint16_t code, const std::string& s) {
  if (s.empty() || s.size() > 0xFFFF) return;
  put16(b, code);
  put16(b, static_cast<std::uint16_t>(s.size()));
  put_bytes_padded(b, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}
void put_u64_option(std::vector<std::uint8_t>& b, std::uint16_t code, std::uint64_t v) {
  put16(b, code);
  put16(b, 8);
  put64(b, v);
}
// Fills in a pcapng block's two length fields once its body is appended.
void close_block(std::vector<std::uint8_t>& b, std::size_t start) {
  const auto len = static_cast<std::uint32_t>(b.size() - start + 4);
  put32(b, len);
  std::memcpy(b.data() + start + 4, &len, 4);
}

int digits_for_ring(std::uint32_t max_files) {
  int c = 0;
  for (std::uint32_t x = max_files ? max_files - 1 : 0; x > 0; x /= 10) ++c;
  return c;
}

}  // namespace

std::size_t record_overhead(FileFormat f) { return f == FileFormat::pcap ? 16 : 32; }

CaptureWriter::~CaptureWriter() {
  if (fd_ >= 0) close();
}

bool CaptureWriter::open(const WriterOptions& opts, const std::vector<InterfaceDesc>& interfaces, std::time_t now) {
  opts_ = opts;
  ifaces_ = interfaces;
  if (ifaces_.empty()) {
    error_ = "no interfaces to write";
    return false;
  }
  if (opts_.format == FileFormat::pcap)
    for (const auto& i : ifaces_)
      if (i.linktype != ifaces_.front().linktype) {
        error_ = "interfaces " + ifaces_.front().name + " and " + i.name +
                 " have different link types; a pcap file holds one, use --pcapng";
        return false;
      }
  if (opts_.path == "-" && (opts_.rotate_bytes || opts_.rotate_seconds)) {
    error_ = "cannot rotate files when writing to standard output";
    return false;
  }
  buf_.reserve(kBufferLimit + 65536 + 64);
  return open_next(now);
}

std::string CaptureWriter::file_name(std::time_t now) const {
  std::string base = opts_.path;
  if (opts_.rotate_seconds) {
    std::tm tm{};
    localtime_r(&now, &tm);
    char out[4096];
    const std::size_t n = std::strftime(out, sizeof out, base.c_str(), &tm);
    if (n > 0) base.assign(out, n);
  }
  const int width = opts_.max_files && opts_.rotate_bytes ? digits_for_ring(opts_.max_files) : 0;
  if (opts_.rotate_bytes && (file_index_ != 0 || width != 0)) {
    std::string idx = std::to_string(file_index_);
    if (static_cast<int>(idx.size()) < width) idx.insert(0, static_cast<std::size_t>(width) - idx.size(), '0');
    base += idx;
  }
  return base;
}

bool CaptureWriter::open_next(std::time_t now) {
  if (fd_ >= 0 && !close_file()) return false;
  const std::string name = file_name(now);
  if (name == "-") {
    fd_ = opts_.stdout_fd;
    is_regular_ = false;
  } else {
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    if (!opts_.force && !created_.count(name)) flags |= O_EXCL;
    fd_ = ::open(name.c_str(), flags, 0644);
    if (fd_ < 0) {
      if (errno == EEXIST)
        error_ = name + ": file exists; refusing to overwrite it (use --force)";
      else
        error_ = name + ": cannot create: " + std::strerror(errno);
      failed_ = true;
      return false;
    }
    struct stat st {};
    is_regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  }
  current_path_ = name;
  if (created_.insert(name).second || files_.empty() || files_.back() != name) files_.push_back(name);
  ++files_opened_;
  file_started_ = now;
  file_bytes_ = committed_ = 0;
  packets_in_file_ = 0;
  append_file_header();
  if (!write_out()) {
    // A file without its header is not a capture file: do not leave it behind.
    if (is_regular_) ::unlink(name.c_str());
    return false;
  }
  return true;
}

void CaptureWriter::append_file_header() {
  const std::size_t start = buf_.size();
  if (opts_.format == FileFormat::pcap) {
    std::uint32_t snaplen = 0;
    for (const auto& i : ifaces_) snaplen = std::max(snaplen, i.snaplen);
    put32(buf_, kPcapMagicNano);
    put16(buf_, 2);
    put16(buf_, 4);
    put32(buf_, 0);  // thiszone
    put32(buf_, 0);  // sigfigs
    put32(buf_, snaplen);
    put32(buf_, ifaces_.front().linktype);
  } else {
    std::size_t b = buf_.size();
    put32(buf_, kPcapngShb);
    put32(buf_, 0);
    put32(buf_, kByteOrderMagic);
    put16(buf_, 1);
    put16(buf_, 0);
    put64(buf_, ~std::uint64_t{0});  // section length unknown
    put_string_option(buf_, kShbUserAppl, "rdmadiag 0.1.0");
    put16(buf_, kOptEnd);
    put16(buf_, 0);
    close_block(buf_, b);
    for (const auto& i : ifaces_) append_interface_block(i);
  }
  file_bytes_ += buf_.size() - start;
  record_ends_.push_back({buf_.size(), false});
}

void CaptureWriter::append_interface_block(const InterfaceDesc& i) {
  const std::size_t b = buf_.size();
  put32(buf_, kPcapngIdb);
  put32(buf_, 0);
  put16(buf_, static_cast<std::uint16_t>(i.linktype));
  put16(buf_, 0);
  put32(buf_, i.snaplen);
  put_string_option(buf_, kIfName, i.name);
  put_string_option(buf_, kIfDescription, i.description);
  put16(buf_, kIfTsresol);
  put16(buf_, 1);
  const std::uint8_t nanoseconds[1] = {9};
  put_bytes_padded(buf_, nanoseconds, 1);
  put16(buf_, kOptEnd);
  put16(buf_, 0);
  close_block(buf_, b);
}

// pcapng allows an interface block anywhere in a section before its packets;
// a later file of a rotation has it in its header (ifaces_).
bool CaptureWriter::add_interface(const InterfaceDesc& iface) {
  if (failed_ || fd_ < 0) return false;
  if (opts_.format == FileFormat::pcap) {
    if (iface.linktype != ifaces_.front().linktype) {
      error_ = "interfaces " + ifaces_.front().name + " and " + iface.name +
               " have different link types; a pcap file holds one, use pcapng";
      return false;
    }
    ifaces_.push_back(iface);
    return true;
  }
  const std::size_t start = buf_.size();
  ifaces_.push_back(iface);
  append_interface_block(iface);
  file_bytes_ += buf_.size() - start;
  record_ends_.push_back({buf_.size(), false});
  return true;
}

void CaptureWriter::append_record(const Record& rec, std::size_t iface) {
  const std::size_t start = buf_.size();
  if (opts_.format == FileFormat::pcap) {
    put32(buf_, static_cast<std::uint32_t>(rec.ts_sec));
    put32(buf_, rec.ts_nsec);
    put32(buf_, rec.caplen);
    put32(buf_, rec.wirelen);
    buf_.insert(buf_.end(), rec.data.begin(), rec.data.begin() + rec.caplen);
  } else {
    const std::uint64_t ts = static_cast<std::uint64_t>(rec.ts_sec) * 1'000'000'000ULL + rec.ts_nsec;
    put32(buf_, kPcapngEpb);
    put32(buf_, 0);
    put32(buf_, static_cast<std::uint32_t>(iface));
    put32(buf_, static_cast<std::uint32_t>(ts >> 32));
    put32(buf_, static_cast<std::uint32_t>(ts));
    put32(buf_, rec.caplen);
    put32(buf_, rec.wirelen);
    put_bytes_padded(buf_, rec.data.data(), rec.caplen);
    close_block(buf_, start);
  }
  file_bytes_ += buf_.size() - start;
  record_ends_.push_back({buf_.size(), true});
  ++packets_buffered_;
  ++packets_in_file_;
}

bool CaptureWriter::write(const Record& rec, std::size_t iface, std::time_t now) {
  if (failed_ || done_ || fd_ < 0) return false;
  if (iface >= ifaces_.size()) iface = 0;
  // -G intervals count from the first packet, so replayed files rotate on their own clock.
  if (packets_written_ + packets_buffered_ == 0) file_started_ = now;
  if (opts_.rotate_seconds && now - file_started_ >= static_cast<std::time_t>(opts_.rotate_seconds)) {
    if (opts_.max_files && !opts_.rotate_bytes && files_opened_ >= opts_.max_files) {
      done_ = true;  // tcpdump -G N -W M: M files, then stop
      return false;
    }
    file_index_ = 0;
    if (!open_next(now)) return false;
  }
  const std::size_t size = opts_.format == FileFormat::pcap ? 16 + rec.caplen : 32 + pad4(rec.caplen);
  if (opts_.rotate_bytes && packets_in_file_ > 0 && file_bytes_ + size > opts_.rotate_bytes) {
    ++file_index_;
    if (opts_.max_files && file_index_ >= opts_.max_files) file_index_ = 0;  // ring
    if (!open_next(now)) return false;
  }
  append_record(rec, iface);
  if (buf_.size() >= kBufferLimit) return write_out();
  return true;
}

bool CaptureWriter::flush() {
  if (failed_) return false;
  if (fd_ < 0) return true;
  return write_out();
}

// Writes the buffer. On a short write the file is cut back to the last whole
// record that made it, so what is on disk stays a valid capture.
bool CaptureWriter::write_out() {
  std::size_t done = 0;
  int err = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  std::size_t good = 0;
  std::uint64_t packets = 0;
  for (std::size_t i = 0; i < record_ends_.size() && record_ends_[i].end <= done; ++i) {
    good = record_ends_[i].end;
    if (record_ends_[i].packet) ++packets;
  }
  packets_written_ += packets;
  bytes_committed_total_ += good;
  committed_ += good;
  if (err == 0) {
    packets_buffered_ = 0;
    buf_.clear();
    record_ends_.clear();
    return true;
  }
  const std::uint64_t lost = packets_buffered_ - packets;
  if (is_regular_ && done != good) {
    if (::ftruncate(fd_, static_cast<off_t>(committed_)) != 0) {
      // Keep going: the error below is what the user must see first.
    }
  }
  error_ = current_path_ + ": write failed: " + std::strerror(err) + "; " + std::to_string(packets_written_) +
           " packets are in the file" + (is_regular_ ? " (it ends on a whole record)" : "") +
           (lost ? ", " + std::to_string(lost) + " captured packets could not be written" : "");
  buf_.clear();
  record_ends_.clear();
  packets_buffered_ = 0;
  failed_ = true;
  return false;
}

bool CaptureWriter::close_file() {
  bool ok = true;
  if (!buf_.empty() && !failed_) ok = write_out();
  if (fd_ >= 0 && fd_ != opts_.stdout_fd) {
    if (::close(fd_) != 0 && ok && !failed_) {
      error_ = current_path_ + ": close failed: " + std::strerror(errno);
      failed_ = true;
      ok = false;
    }
  }
  fd_ = -1;
  return ok && !failed_;
}

bool CaptureWriter::close(const std::vector<InterfaceCounters>& counters) {
  if (fd_ < 0) return !failed_;
  if (!failed_ && opts_.format == FileFormat::pcapng && !counters.empty()) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const std::uint64_t ts = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
    for (std::size_t i = 0; i < counters.size() && i < ifaces_.size(); ++i) {
      const std::size_t b = buf_.size();
      put32(buf_, kPcapngIsb);
      put32(buf_, 0);
      put32(buf_, static_cast<std::uint32_t>(i));
      put32(buf_, static_cast<std::uint32_t>(ts >> 32));
      put32(buf_, static_cast<std::uint32_t>(ts));
      put_u64_option(buf_, kIsbIfRecv, counters[i].received);
      put_u64_option(buf_, kIsbOsDrop, counters[i].dropped);
      if (counters[i].if_dropped_known) put_u64_option(buf_, kIsbIfDrop, counters[i].if_dropped);
      put16(buf_, kOptEnd);
      put16(buf_, 0);
      close_block(buf_, b);
      record_ends_.push_back({buf_.size(), false});
    }
  }
  return close_file();
}

}  // namespace rdmadiag::capture
