// gen_capture: writes a synthetic RDMA capture (nanosecond pcap) for the
// benchmarks; see capture_gen.cpp for the traffic.
//
// Usage: gen_capture -o FILE [-n PACKETS] [--qps N] [--encap E] [--loss F] [--ce F]
//                    [--min-payload B] [--max-payload B] [--seed S] [--clients C] [--servers S]
// E: roce_v2 (IPv4, default), roce_v2_ipv6, roce_v1, ib, iwarp, mix.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/capture_gen.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: gen_capture -o FILE [-n PACKETS] [--qps N] [--encap roce_v2|roce_v2_ipv6|roce_v1|ib|iwarp|mix]\n"
               "                   [--loss FRACTION] [--ce FRACTION] [--min-payload B] [--max-payload B] [--seed S]\n"
               "                   [--clients C] [--servers S]  (RC client/server hosts, default 16 and 4)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  rdmadiag::bench::GenOptions o;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "-o") out = v;
    else if (a == "-n") o.packets = std::strtoull(v, nullptr, 10);
    else if (a == "--qps") o.qps = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--encap") o.encap = v;
    else if (a == "--clients") o.clients = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--servers") o.servers = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--loss") o.loss = std::strtod(v, nullptr);
    else if (a == "--ce") o.ce = std::strtod(v, nullptr);
    else if (a == "--min-payload") o.min_payload = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--max-payload") o.max_payload = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--seed") o.seed = std::strtoull(v, nullptr, 10);
    else return usage();
  }
  std::vector<rdmadiag::bench::Encap> kinds;
  if (out.empty() || o.qps == 0 || o.min_payload == 0 || o.min_payload > o.max_payload || o.max_payload < 256 ||
      o.max_payload > 4096 || o.ce < 0 || o.ce > 1 || o.clients == 0 || o.clients > 254 || o.servers == 0 || o.servers > 254 ||
      !rdmadiag::bench::parse_encap(o.encap, kinds))
    return usage();

  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) {
    std::perror(out.c_str());
    return 1;
  }
  std::setvbuf(f, nullptr, _IOFBF, 1 << 22);
  // Nanosecond pcap, version 2.4, snap length 65535.
  const std::uint32_t linktype = kinds.front() == rdmadiag::bench::Encap::ib ? 247 : 1;
  const std::uint32_t hdr[6] = {0xa1b23c4d, 0x00040002, 0, 0, 65535, linktype};
  std::fwrite(hdr, sizeof hdr, 1, f);
  std::uint64_t n = 0;
  rdmadiag::bench::generate(o, [&](std::uint64_t ts_ns, rdmadiag::decode::Bytes frame) {
    const std::uint32_t rec[4] = {static_cast<std::uint32_t>(ts_ns / 1000000000u),
                                  static_cast<std::uint32_t>(ts_ns % 1000000000u),
                                  static_cast<std::uint32_t>(frame.size()), static_cast<std::uint32_t>(frame.size())};
    std::fwrite(rec, sizeof rec, 1, f);
    std::fwrite(frame.data(), 1, frame.size(), f);
    ++n;
  });
  if (std::fclose(f) != 0) {
    std::perror(out.c_str());
    return 1;
  }
  std::fprintf(stderr, "gen_capture: %llu packets to %s\n", static_cast<unsigned long long>(n), out.c_str());
  return 0;
}
