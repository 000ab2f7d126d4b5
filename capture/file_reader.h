// Reads pcap and pcapng capture files (or standard input, "-") through libpcap,
// one record at a time, with nanosecond timestamps. A file damaged part-way is
// read up to the damage; `stop_reason()` then says where and why it stopped.
//
// Fast path: a regular classic-pcap file, or a pcapng file of one section and
// one interface with micro- or nanosecond time stamps, is read a window at a
// time (one pread into a reused buffer, or mapped) and its records are handed out in
// place (no copy per record; libpcap copies each one twice, from the page
// cache into stdio's buffer and then into its own). A record's data is valid
// until the next call to next(), as with libpcap. libpcap still opens the file
// (link type, snap length, every header check) and takes over at the first
// record that is not plainly well-formed (pcapng: any block but an Enhanced
// Packet Block of that interface and the blocks libpcap passes over), so
// damaged files get libpcap's own verdict. Other pcapng files, standard input
// and live capture use libpcap, and so do files whose records libpcap changes
// as it reads them (classic pcap before version 2.4, whose lengths it may swap;
// link types whose headers it byte-swaps or mends: libpcap_rewrites_records).
//
// libpcap 1.10 keeps one link type (and snap length) per file and refuses a
// pcapng file whose interfaces differ in them, though pcapng allows it. Such a
// file (given by name) is read again from its start by capture::PcapngReader,
// which continues after the records libpcap already handed out; each record
// then has its own interface's link type (record_linktype()).
//
// A pcapng file (given by name) whose records start after more than one
// interface description (two capture points merged by mergecap, a capture of
// several interfaces) is read by PcapngReader from its start, so that each
// record's interface is known (record_interface()): libpcap accepts such a
// file when the interfaces share a link type but never says which one a
// record came from. Only the interfaces described before the first record are
// counted (mergecap and capture tools write them all there).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

struct pcap;

namespace rdmadiag::capture {

class PcapngReader;
struct PcapngInterface;

struct Record {
  std::int64_t ts_sec = 0;
  std::uint32_t ts_nsec = 0;
  std::uint32_t caplen = 0;
  std::uint32_t wirelen = 0;
  std::span<const std::uint8_t> data;
  std::int64_t ts_ns() const { return ts_sec * 1'000'000'000 + ts_nsec; }  // exact, unlike a double of seconds
};

// Where and how a file's records lie, for reading them in place from a
// window: classic pcap records, or a pcapng file's Enhanced Packet Blocks of
// its one interface (pcapng draft, section 4.3); the file, its byte order and
// time unit, the largest record length read in place (a longer one, and any
// other block, goes to libpcap).
struct PcapLayout {
  int fd = -1;
  std::size_t file_size = 0;
  bool swapped = false;  // the file's byte order is not ours
  bool usec = false;     // microsecond timestamps (classic pcap; pcapng: if_tsresol 6)
  bool pcapng = false;   // records are Enhanced Packet Blocks
  std::size_t first_record = 24;  // file offset of the first record
  std::uint32_t max_caplen = 0;
  // The file's snap length (at most max_caplen): a record start guessed in the
  // middle of the file (analyze -j's split) is plausible only within it; a
  // longer record is still read when the chain of records leads to it.
  std::uint32_t snaplen = 0;
};

constexpr std::size_t kPcapRecordHeaderLen = 16;
// An Enhanced Packet Block up to its packet data: type, length, interface,
// time stamp (2 words), captured and original length; its length again ends it.
constexpr std::size_t kEpbHeaderLen = 28;
constexpr std::uint32_t kEpbType = 6;
// Options an Enhanced Packet Block read in place may carry (comments, flags,
// hashes; more goes to libpcap).
constexpr std::uint32_t kMaxEpbOptions = 4096;

inline std::size_t record_header_len(const PcapLayout& layout) {
  return layout.pcapng ? kEpbHeaderLen : kPcapRecordHeaderLen;
}
// The most bytes a record read in place can take.
inline std::size_t max_record_len(const PcapLayout& layout) {
  return layout.pcapng ? kEpbHeaderLen + layout.max_caplen + 3 + kMaxEpbOptions + 4
                       : kPcapRecordHeaderLen + layout.max_caplen;
}

// Whether the record header at `h` (record_header_len bytes), `left` bytes
// before the end of the file, is plainly well-formed: its whole record is in
// the file and not longer than the layout allows (pcapng: an Enhanced Packet
// Block of interface 0 within the snap length, its time stamp within what
// Record::ts_ns() holds).
// Anything else is libpcap's to judge (FileReader::next).
bool plain_record(const std::uint8_t* h, std::size_t left, const PcapLayout& layout);
// A pcapng block libpcap passes over between packets: name resolution,
// interface statistics, decryption secrets, custom (pcapng draft, sections
// 4.5-4.7, 4.9). A simple packet block is not one (libpcap reads it).
bool ignorable_block(std::uint32_t type);
// A 32-bit word of the file's own headers, in the file's byte order (`swapped`:
// not ours). The file's bytes, not a packet's: a plain load.
inline std::uint32_t load32(const std::uint8_t* p, bool swapped) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return swapped ? __builtin_bswap32(v) : v;
}
// The bytes of the plain record at `h`, header included.
inline std::size_t record_len(const std::uint8_t* h, const PcapLayout& layout) {
  return layout.pcapng ? load32(h + 4, layout.swapped) : kPcapRecordHeaderLen + load32(h + 8, layout.swapped);
}
// The length of the pcapng block at `h` (`left`: the file's bytes from there)
// when it is one to pass over: an ignorable_block type, a length of at least
// 12 (type, length, length again), a multiple of 4, within the file and not
// longer than a record may be (the buffers' size). 0 otherwise. Its trailer is
// record_trailer_ok's, once its bytes are read.
inline std::size_t passed_over_len(const std::uint8_t* h, std::size_t left, const PcapLayout& layout) {
  if (!layout.pcapng || !ignorable_block(load32(h, layout.swapped))) return 0;
  const std::uint32_t len = load32(h + 4, layout.swapped);
  return len >= 12 && len % 4 == 0 && len <= left && len <= max_record_len(layout) ? len : 0;
}
// A pcapng block ends with its length again (checked once the whole record is read).
inline bool record_trailer_ok(const std::uint8_t* h, const PcapLayout& layout) {
  if (!layout.pcapng) return true;
  const std::uint32_t len = load32(h + 4, layout.swapped);
  return load32(h + len - 4, layout.swapped) == len;
}

// The record whose (plainly well-formed) header is at `h`; its data follows the header.
// Always inline: built in its caller's Record, not returned through memory and
// copied (16-byte loads of 4-byte stores stalled every record). With the pcapng
// branch GCC had made it an out-of-line clone again (session 35: no change in
// time measured; the samples of the record's first touch moved back into the decode).
[[gnu::always_inline]] inline Record record_at(const std::uint8_t* h, const PcapLayout& layout) {
  Record rec;
  if (layout.pcapng) {
    const std::uint64_t ts = (std::uint64_t{load32(h + 12, layout.swapped)} << 32) | load32(h + 16, layout.swapped);
    const std::uint64_t per_sec = layout.usec ? 1'000'000 : 1'000'000'000;
    rec.ts_sec = static_cast<std::int64_t>(ts / per_sec);
    rec.ts_nsec = static_cast<std::uint32_t>(ts % per_sec) * (layout.usec ? 1000 : 1);
    rec.caplen = load32(h + 20, layout.swapped);
    rec.wirelen = load32(h + 24, layout.swapped);
    rec.data = std::span<const std::uint8_t>(h + kEpbHeaderLen, rec.caplen);
    return rec;
  }
  // Unsigned, as the format says and tshark reads it (libpcap sign-extends: 2038 on would be 1901).
  rec.ts_sec = load32(h, layout.swapped);
  const std::uint32_t frac = load32(h + 4, layout.swapped);
  rec.ts_nsec = layout.usec ? frac * 1000 : frac;
  rec.caplen = load32(h + 8, layout.swapped);
  rec.wirelen = load32(h + 12, layout.swapped);
  rec.data = std::span<const std::uint8_t>(h + kPcapRecordHeaderLen, rec.caplen);
  return rec;
}
// Whether a record chain plausibly starts at `h`: `chain` headers in a row
// (or up to the end of `avail` bytes or of the file) plainly well-formed with a
// valid fraction of a second, no more captured than sent and none longer than
// the file's snap length (pcapng: each block's length also at its end). A
// classic pcap file has no sync marker: a position found this way must be
// confirmed by a walk from a known record that lands on it.
bool plausible_record_chain(const std::uint8_t* h, std::size_t avail, std::size_t left, const PcapLayout& layout,
                            unsigned chain);

// Reads `len` bytes at file offset `offset` (retrying short reads and EINTR);
// fewer at the end of the file or on an error. Returns how many were read.
std::size_t read_at(int fd, std::uint8_t* buf, std::size_t len, std::size_t offset);

// File bytes read from a mapping, where a read of a page the file no longer
// has (the file cut while it is read) must not end the process with SIGBUS:
// one mapping at a time is guarded; such a read then gives zeros, and
// mapping_cut() says so until cleared. guard_mapping is false when another
// mapping is guarded (read into a buffer then).
bool guard_mapping(const void* begin, std::size_t len);
void unguard_mapping(const void* begin);
bool mapping_cut();
void clear_mapping_cut();
// `len` bytes of the file at `offset` (page-aligned) mapped read-only and
// guarded (MAP_POPULATE: in the page tables at once), or nullptr when they
// cannot be (read them into a buffer then); unmap_guarded undoes it.
const std::uint8_t* map_guarded(int fd, std::size_t offset, std::size_t len, bool populate);
void unmap_guarded(const std::uint8_t* begin, std::size_t len);
std::size_t page_bytes();
// Whether analyze maps its inputs: unless RDMADIAG_READ_COPY is set (the
// benchmarks and tests compare with the copy).
bool mapping_wanted();

class FileReader {
 public:
  FileReader();  // (out of line: PcapngReader is complete only there)
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Opens `path` ("-" is standard input). On failure returns false and sets error():
  // a one-line reason (missing file, a directory, empty, not a capture file...).
  bool open(const std::string& path);
  // The next record; false at the end of the file or at damage (see stop_reason()).
  bool next(Record& rec);
  // Up to out.size() next records, all valid together until the next call (a
  // caller analysing a batch at a time): those of one window read in place,
  // else one. 0 at the end of the file or at damage, as next() (not to be
  // mixed with it).
  std::size_t next_batch(std::span<Record> out);
  // Prefetch the bytes ahead of each record read from a window (off by default).
  // For a reader that skips most records (every thread of analyze -j reading a
  // whole input it cannot split): it touches only their first lines, too sparse
  // for the hardware prefetcher. A reader of every record streams well without:
  // the loop was a third of next()'s instructions there.
  void set_prefetch_ahead(bool on) { prefetch_ahead_ = on; }
  // Map the file's windows instead of copying them into a buffer (off by
  // default). For one thread reading every record (analyze -j 1): no copy out of
  // the page cache, and the bytes ahead are prefetched instead (a mapped
  // page is not in the cache as a copied one is). Not for threads: each unmap
  // would interrupt the other cores to flush their TLBs. A file cut while it
  // is read stops the reading with a reason (stop_reason()), not SIGBUS.
  void set_map_windows(bool on) { map_windows_ = on; }
  std::uint64_t windows_mapped() const { return windows_mapped_; }
  // Before open(): false reads every record through libpcap (the file reader
  // fuzzer's oracle for the records read in place).
  void set_read_in_place(bool on) { read_in_place_ = on; }

  // The file's (its first interface's) link type and snap length.
  std::uint32_t linktype() const { return linktype_; }
  std::uint32_t snaplen() const { return snaplen_; }
  // The last record's link type: linktype(), except in a pcapng file whose
  // interfaces have different ones.
  std::uint32_t record_linktype() const;
  // The last record's interface, numbered over the whole file (0 unless read
  // by PcapngReader: libpcap does not tell), and that interface when known.
  std::uint32_t record_interface() const;
  const PcapngInterface* interface_info(std::uint32_t index) const;
  // Interfaces described before the first record when more than one (the file
  // is then read by PcapngReader); 1 otherwise (classic pcap, standard input).
  std::uint32_t interfaces() const { return static_cast<std::uint32_t>(std::max<std::size_t>(1, point_names_.size())); }
  // Their names (if_name, "" when absent), by interface index; empty when one.
  const std::vector<std::string>& point_names() const { return point_names_; }
  // The last record's capture point (decode::DecodedPacket::capture_point): 1 +
  // its interface when the file has more than one, else 0.
  std::uint16_t record_point() const {
    return point_names_.size() > 1 ? static_cast<std::uint16_t>(std::min<std::uint32_t>(record_interface(), 0xfffe) + 1) : 0;
  }
  const std::string& error() const { return error_; }
  // Empty when the whole file was read; otherwise why reading stopped early.
  const std::string& stop_reason() const { return stop_reason_; }
  std::uint64_t records_read() const { return records_; }
  // Byte offset in the file where the next record would start (pcap only; 0 if unknown).
  std::int64_t file_offset() const;
  // The layout when the records are read in place (classic pcap, a regular file).
  std::optional<PcapLayout> mapped_layout() const;
  // Continues at `offset`, a record boundary in such a file, as if `records`
  // records had been read before it (analyze -j: the rest of a split read).
  bool seek_record(std::size_t offset, std::uint64_t records);

 private:
  bool next_mapped(Record& rec);
  void prefetch_after_record();
  bool map_window(std::size_t pos);
  bool map_file_window(std::size_t pos);
  bool stop_cut_while_read();
  bool file_shrank() const;
  bool leave_window(Record& rec);
  bool fall_back(Record& rec);
  bool take_over_pcapng(const std::string& refusal);
  bool probe_pcapng(const std::string& path, PcapLayout& in_place);
  bool next_pcapng(Record& rec);
  void unmap();

  pcap* handle_ = nullptr;
  std::unique_ptr<PcapngReader> pcapng_;  // set when libpcap refused mixed interfaces
  // Classic pcap in a regular file is read a window at a time into one
  // buffer (mapped_: true; otherwise libpcap reads every record), or mapped
  // (set_map_windows). With threads a read costs less than a mapping (page
  // tables built and torn down, TLB shootdowns) and leaves the bytes in the
  // cache for the decode; one thread saves the copy by mapping.
  bool mapped_ = false;
  bool classic_pcap_ = false;  // not pcapng
  PcapLayout layout_;
  std::unique_ptr<std::uint8_t[]> buffer_;
  std::size_t buffer_len_ = 0;
  const std::uint8_t* map_ = nullptr;  // the window (in buffer_ or mapped), nullptr when none
  bool map_windows_ = false;
  const std::uint8_t* mapped_base_ = nullptr;  // the window's mapping (map_windows_), page-aligned
  std::size_t mapped_len_ = 0;
  std::uint64_t windows_mapped_ = 0;
  std::size_t map_base_ = 0;     // its offset in the file
  std::size_t map_len_ = 0;
  std::size_t map_pos_ = 0;      // file offset of the next record header
  static constexpr std::size_t kPrefetchAhead = 4096;
  std::size_t prefetched_ = 0;   // file offset up to which the window was prefetched
  bool prefetch_ahead_ = false;
  bool hold_window_ = false;   // next_batch: a read that would move the window stops instead
  bool window_held_ = false;   // ... and it did
  bool batch_ended_ = false;   // next_batch: next() returned false at the end or at damage
  bool read_in_place_ = true;
  std::uint32_t linktype_ = 0;
  std::uint32_t snaplen_ = 0;
  std::vector<std::string> point_names_;  // see interfaces()
  std::uint64_t records_ = 0;
  std::string path_;
  std::string error_;
  std::string stop_reason_;
};

}  // namespace rdmadiag::capture
