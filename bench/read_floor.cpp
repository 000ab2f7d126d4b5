// The floor under `rdmadiag analyze` on this machine (issue 16: "learn from the
// limit"): read every record of a capture the way analyze does
// (capture::FileReader) and run the CRC-32 the ICRC uses over every byte of
// each, with no decode and no analysis. What analyze costs beyond this is its
// own; a packet rate above this one's cannot be reached on the same machine.
//
// usage: read_floor FILE   (prints records, bytes and the CRCs' XOR, so the
// work cannot be optimised away; bench/run times it as a whole process).
// RDMADIAG_READ_COPY=1: copy the windows into a buffer instead of mapping them.
#include <cstdint>
#include <cstdio>

#include "capture/file_reader.h"
#include "decode/crc.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read_floor FILE\n");
    return 2;
  }
  rdmadiag::capture::FileReader reader;
  reader.set_map_windows(rdmadiag::capture::mapping_wanted());  // as analyze -j 1 reads
  if (!reader.open(argv[1])) {
    std::fprintf(stderr, "read_floor: %s\n", reader.error().c_str());
    return 3;
  }
  rdmadiag::capture::Record rec;
  std::uint64_t records = 0, bytes = 0;
  std::uint32_t x = 0;
  while (reader.next(rec)) {
    ++records;
    bytes += rec.data.size();
    x ^= rdmadiag::decode::crc32_update(0, rec.data);
  }
  std::printf("%llu records, %llu bytes, crc xor %08x\n", static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(bytes), x);
  return 0;
}
