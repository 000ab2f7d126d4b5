// Fuzz target: a whole pcap or pcapng file through capture::FileReader (libpcap
// underneath) and every record it yields through decode_frame with its link
// type (a file read in place: record for record against a second FileReader
// reading it through libpcap alone, the oracle); then through
// capture::PcapngReader on its own. The bytes go to an
// anonymous in-memory file opened by its /proc/self/fd path, so the readers
// take the same path as for a real file.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "capture/file_reader.h"
#include "capture/pcapng_reader.h"
#include "decode/packet.h"

using namespace rdmadiag;

namespace {

int memory_file() {
  static const int fd = memfd_create("rdmadiag-fuzz-capture", 0);
  if (fd < 0) std::abort();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = memory_file();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  capture::FileReader reader;
  if (!reader.open("/proc/self/fd/" + std::to_string(fd))) {
    if (reader.error().empty()) std::abort();  // a refusal always says why
    return 0;
  }
  capture::Record rec;
  decode::DecodedPacket p;
  // A file read in place is read again through libpcap alone: the same
  // records, the same verdict (capture/file_reader.h). A classic pcap record
  // longer than the file's snap length is read whole in place, where libpcap
  // cuts it: compared up to the first such record.
  capture::FileReader oracle;
  oracle.set_read_in_place(false);
  const std::optional<capture::PcapLayout> layout = reader.mapped_layout();
  bool compare = layout && oracle.open("/proc/self/fd/" + std::to_string(fd));
  capture::Record expected;
  while (reader.records_read() < 100000 && reader.next(rec)) {
    if (rec.data.size() != rec.caplen) std::abort();
    if (compare && !layout->pcapng && rec.caplen > oracle.snaplen()) compare = false;
    if (compare && (!oracle.next(expected) || expected.ts_ns() != rec.ts_ns() || expected.caplen != rec.caplen ||
                    expected.wirelen != rec.wirelen || !std::equal(rec.data.begin(), rec.data.end(), expected.data.begin())))
      std::abort();
    p = decode::DecodedPacket{};
    decode::decode_frame(reader.record_linktype(), rec.data, rec.wirelen, {}, p);
  }
  if (compare && reader.records_read() < 100000 && (oracle.next(expected) || oracle.stop_reason() != reader.stop_reason()))
    std::abort();
  // The pcapng reader on its own: FileReader hands it only files libpcap refuses.
  capture::PcapngReader own;
  if (!own.open("/proc/self/fd/" + std::to_string(fd))) std::abort();
  for (int n = 0; n < 100000 && own.next(rec); ++n)
    if (rec.data.size() != rec.caplen || own.interface() >= own.interfaces().size()) std::abort();
  return 0;
}
