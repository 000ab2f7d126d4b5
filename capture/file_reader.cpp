#include "capture/file_reader.h"

#include <pcap/pcap.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace rdmadiag::capture {

FileReader::~FileReader() {
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
  return true;
}

bool FileReader::next(Record& rec) {
  if (!handle_) return false;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(handle_, &hdr, &data);
  if (rc == 1) {
    ++records_;
    rec.ts_sec = hdr->ts.tv_sec;
    rec.ts_nsec = static_cast<std::uint32_t>(hdr->ts.tv_usec);  // nanoseconds: opened with NANO precision
    rec.caplen = hdr->caplen;
    rec.wirelen = hdr->len;
    rec.data = std::span<const std::uint8_t>(data, hdr->caplen);
    return true;
  }
  if (rc == PCAP_ERROR) {
    stop_reason_ = "stopped after record " + std::to_string(records_) + ": " + pcap_geterr(handle_);
  }
  return false;  // PCAP_ERROR_BREAK: end of file
}

std::int64_t FileReader::file_offset() const {
  if (!handle_) return 0;
  FILE* f = pcap_file(handle_);
  return f ? static_cast<std::int64_t>(std::ftell(f)) : 0;
}

}  // namespace rdmadiag::capture
