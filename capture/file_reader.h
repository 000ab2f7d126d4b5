// Reads pcap and pcapng capture files (or standard input, "-") through libpcap,
// one record at a time, with nanosecond timestamps. A file damaged part-way is
// read up to the damage; `stop_reason()` then says where and why it stopped.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

struct pcap;

namespace rdmadiag::capture {

struct Record {
  std::int64_t ts_sec = 0;
  std::uint32_t ts_nsec = 0;
  std::uint32_t caplen = 0;
  std::uint32_t wirelen = 0;
  std::span<const std::uint8_t> data;
};

class FileReader {
 public:
  FileReader() = default;
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Opens `path` ("-" is standard input). On failure returns false and sets error():
  // a one-line reason (missing file, a directory, empty, not a capture file...).
  bool open(const std::string& path);
  // The next record; false at the end of the file or at damage (see stop_reason()).
  bool next(Record& rec);

  std::uint32_t linktype() const { return linktype_; }
  std::uint32_t snaplen() const { return snaplen_; }
  const std::string& error() const { return error_; }
  // Empty when the whole file was read; otherwise why reading stopped early.
  const std::string& stop_reason() const { return stop_reason_; }
  std::uint64_t records_read() const { return records_; }
  // Byte offset in the file where the next record would start (pcap only; 0 if unknown).
  std::int64_t file_offset() const;

 private:
  pcap* handle_ = nullptr;
  std::uint32_t linktype_ = 0;
  std::uint32_t snaplen_ = 0;
  std::uint64_t records_ = 0;
  std::string path_;
  std::string error_;
  std::string stop_reason_;
};

}  // namespace rdmadiag::capture
