// A small pcapng reader for the files libpcap 1.10 refuses although they are
// valid: interfaces of different link types or snap lengths in one file (what
// `capture --pcapng` writes for mixed sources, what mergecap writes, a second
// section of another link type). libpcap keeps one link type per file; here
// every record carries its own interface's. FileReader hands a file over to
// it only when libpcap refuses it for that reason, so every other file keeps
// libpcap's reading and verdicts.
//
// Blocks: SHB (byte order, version), IDB (link type, snap length, if_name,
// if_tsresol, if_tsoffset), EPB, SPB, OPB; every other block is skipped.
// Every length is checked against its block before use; damage stops the
// reading with a one-line reason.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "capture/file_reader.h"

namespace rdmadiag::capture {

struct PcapngInterface {
  std::uint32_t linktype = 0;
  std::uint32_t snaplen = 0;  // 0: no limit
  std::string name;           // if_name, "" when absent
  bool binary_resol = false;  // if_tsresol: 2^-exp seconds, else 10^-exp
  std::uint8_t resol_exp = 6;
  std::int64_t offset_sec = 0;  // if_tsoffset
};

class PcapngReader {
 public:
  PcapngReader() = default;
  ~PcapngReader();
  PcapngReader(const PcapngReader&) = delete;
  PcapngReader& operator=(const PcapngReader&) = delete;

  // False with error() when the file cannot be opened or does not start with a section header.
  bool open(const std::string& path);
  // The next packet record; false at the end or at damage (stop_reason()).
  // Its data is valid until the next call.
  bool next(Record& rec);

  // The last record's interface: its index over every interface of the file
  // (section after section; a section numbers its own from 0) and its link type.
  std::uint32_t interface() const { return iface_; }
  std::uint32_t linktype() const { return interfaces_.empty() ? 0 : interfaces_[iface_].linktype; }
  const std::vector<PcapngInterface>& interfaces() const { return interfaces_; }
  const std::string& error() const { return error_; }
  // Byte offset in the file of the block the last record came from.
  std::uint64_t block_start() const { return block_start_; }
  // The current section's byte order is not this machine's.
  bool swapped() const { return swapped_; }
  // Byte offset in the file of the next block (for progress).
  std::int64_t offset() const { return file_ ? static_cast<std::int64_t>(std::ftell(file_)) : 0; }
  // Empty at the end of the file; otherwise why reading stopped.
  const std::string& stop_reason() const { return stop_reason_; }

  static constexpr std::uint32_t kMaxBlockLen = 16u << 20;  // as libpcap's limit

 private:
  enum class Got { block, end, damage };
  Got read_block();
  bool section_header();
  bool interface_block();
  bool interface_option(PcapngInterface& idb, std::uint16_t code, const std::uint8_t* value, std::uint16_t len);
  bool packet(Record& rec, std::uint32_t local_iface, std::uint64_t ts, std::uint32_t caplen, std::uint32_t wirelen,
              std::size_t data_at);
  bool damage(const std::string& why);
  Got broken(const std::string& why);
  std::uint32_t u32(std::size_t at) const;
  std::uint16_t u16(std::size_t at) const;

  std::FILE* file_ = nullptr;
  std::vector<std::uint8_t> block_;  // the current block's body (after type and length, before the trailer)
  std::uint64_t block_start_ = 0, next_block_ = 0;
  std::uint32_t type_ = 0;
  bool swapped_ = false;
  bool in_section_ = false;
  std::size_t section_base_ = 0;  // index of the current section's first interface
  std::vector<PcapngInterface> interfaces_;
  std::uint32_t iface_ = 0;
  std::string error_;
  std::string stop_reason_;
};

}  // namespace rdmadiag::capture
