// Reads pcap and pcapng capture files (or standard input, "-") through libpcap,
// one record at a time, with nanosecond timestamps. A file damaged part-way is
// read up to the damage; `stop_reason()` then says where and why it stopped.
//
// Fast path: a regular classic-pcap file is memory-mapped (a window at a time)
// and its records are handed out in place (no copy per record; libpcap copies
// each one twice, from the page cache into stdio's buffer and then into its
// own). A record's data is valid until the next call to next(), as with libpcap.
// libpcap still
// opens the file (link type, snap length, every header check) and takes over
// at the first record that is not plainly well-formed, so damaged files get
// libpcap's own verdict. pcapng, standard input and live capture use libpcap.
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
  std::int64_t ts_ns() const { return ts_sec * 1'000'000'000 + ts_nsec; }  // exact, unlike a double of seconds
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
  bool next_mapped(Record& rec);
  bool map_window(std::size_t pos);
  bool fall_back(Record& rec);
  void unmap();
  struct Mapping;

  pcap* handle_ = nullptr;
  // Classic pcap in a regular file is mapped a window at a time (mapped_:
  // true; otherwise libpcap reads every record). The window is populated when
  // mapped (one call instead of a page fault every few pages) and unmapped
  // when passed, so resident memory does not grow with the file.
  bool mapped_ = false;
  int map_fd_ = -1;
  std::size_t file_size_ = 0;
  std::shared_ptr<const Mapping> window_;  // owns the mapping below
  const std::uint8_t* map_ = nullptr;  // the window
  std::size_t map_base_ = 0;     // its offset in the file
  std::size_t map_len_ = 0;
  std::size_t map_pos_ = 0;      // file offset of the next record header
  static constexpr std::size_t kPrefetchAhead = 4096;
  std::size_t prefetched_ = 0;   // file offset up to which the window was prefetched
  bool map_swapped_ = false;     // the file's byte order is not ours
  bool map_usec_ = false;        // microsecond timestamps
  std::uint32_t map_max_caplen_ = 0;
  std::uint32_t linktype_ = 0;
  std::uint32_t snaplen_ = 0;
  std::uint64_t records_ = 0;
  std::string path_;
  std::string error_;
  std::string stop_reason_;
};

}  // namespace rdmadiag::capture
