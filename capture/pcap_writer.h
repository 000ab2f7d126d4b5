// Writes captured packets to pcap or pcapng files (or a pipe), with tcpdump's
// rotation rules (-C size, -G time, -W file count). Built for incidents: every
// record handed over is either in the file when close() returns or reported
// as lost, and a write error (disk full) leaves a file that ends on a record
// boundary, so it still reads back whole up to there.
//
// Formats: pcap as in the libpcap file-format description (nanosecond magic
// 0xa1b23c4d, host byte order); pcapng per draft-ietf-opsawg-pcapng (SHB, one
// IDB per interface with if_tsresol 9, EPB per packet, ISB with the kernel's
// received/dropped counters at close).
#pragma once
#include <cstdint>
#include <ctime>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capture/file_reader.h"

namespace rdmadiag::capture {

enum class FileFormat { pcap, pcapng };

struct InterfaceDesc {
  std::string name;
  std::string description;
  std::uint32_t linktype = 1;
  std::uint32_t snaplen = 262144;
};

// Counters for a pcapng interface statistics block.
struct InterfaceCounters {
  std::uint64_t received = 0;
  std::uint64_t dropped = 0;     // dropped by the kernel (no buffer space)
  std::uint64_t if_dropped = 0;  // dropped by the interface / driver
  bool if_dropped_known = false;
};

struct WriterOptions {
  std::string path;                 // "-" standard output
  int stdout_fd = 1;                // the descriptor "-" writes to
  FileFormat format = FileFormat::pcap;
  std::uint64_t rotate_bytes = 0;   // -C: start a new file before one grows past this
  std::uint32_t rotate_seconds = 0; // -G: start a new file every N seconds (name through strftime)
  std::uint32_t max_files = 0;      // -W: ring of N files with -C; stop after N files with -G alone
  bool force = false;               // overwrite existing files
  bool flush_each_batch = false;    // pipes and -U: data reaches the reader at once
};

class CaptureWriter {
 public:
  CaptureWriter() = default;
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // Opens the first file. False and error() on failure (exists without force,
  // mixed link types in pcap, cannot create).
  bool open(const WriterOptions& opts, const std::vector<InterfaceDesc>& interfaces, std::time_t now);
  // One more interface, numbered after open()'s (pcapng: its block is written
  // now). False with error() for a pcap file, when the link type differs.
  bool add_interface(const InterfaceDesc& iface);
  std::size_t interfaces() const { return ifaces_.size(); }
  // Appends one record from interface `iface` (index into open()'s list).
  // False on a write error (error() says why; the file stays valid) or when -G/-W
  // says the capture is over (done() is then true and error() empty).
  bool write(const Record& rec, std::size_t iface, std::time_t now);
  // Pushes buffered records to the file. False on a write error.
  bool flush();
  // Flushes, writes interface statistics (pcapng) and closes. False on error.
  bool close(const std::vector<InterfaceCounters>& counters = {});

  const std::string& error() const { return error_; }
  bool done() const { return done_; }
  std::uint64_t packets_written() const { return packets_written_; }
  std::uint64_t bytes_written() const { return bytes_committed_total_; }
  // Every file this run created, in creation order (a ring reuses names).
  const std::vector<std::string>& files() const { return files_; }

 private:
  bool open_next(std::time_t now);
  bool close_file();
  std::string file_name(std::time_t now) const;
  void append_file_header();
  void append_interface_block(const InterfaceDesc& i);
  void append_record(const Record& rec, std::size_t iface);
  bool write_out();

  WriterOptions opts_;
  std::vector<InterfaceDesc> ifaces_;
  int fd_ = -1;
  bool is_regular_ = false;
  std::string current_path_;
  std::vector<std::uint8_t> buf_;
  struct RecordEnd {
    std::size_t end;  // offset in buf_ just past a complete block
    bool packet;      // a packet, not a file header or statistics block
  };
  std::vector<RecordEnd> record_ends_;
  std::uint64_t file_bytes_ = 0;          // committed + buffered bytes of the current file
  std::uint64_t committed_ = 0;           // bytes of the current file known to be written
  std::uint64_t packets_written_ = 0;     // records committed to files
  std::uint64_t packets_buffered_ = 0;
  std::uint64_t packets_in_file_ = 0;
  std::uint64_t bytes_committed_total_ = 0;
  std::uint32_t file_index_ = 0;          // -C counter
  std::uint32_t files_opened_ = 0;
  std::time_t file_started_ = 0;
  std::set<std::string> created_;         // this run's files: a ring may reuse them
  std::vector<std::string> files_;
  std::string error_;
  bool done_ = false;
  bool failed_ = false;
};

// Size of a pcap or pcapng file header and record header, for -C arithmetic and tests.
std::size_t record_overhead(FileFormat f);

}  // namespace rdmadiag::capture
