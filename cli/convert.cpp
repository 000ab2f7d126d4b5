// `rdmadiag convert IN OUT`: rewrite a capture as pcap, pcapng, or ERF.
// ERF exists for native InfiniBand: Wireshark 4.0 cannot open LINKTYPE_INFINIBAND
// (247) captures but reads ERF records of type 21 (what ibdump writes), so
// `--to erf` wraps each 247 packet in a 16-byte ERF record header inside a pcap
// file of link type ERF (197). Record layout per the ERF format description
// (as in libpcap's/Wireshark's erf.h): 64-bit little-endian timestamp, 32.32
// fixed-point seconds; type; flags; rlen, lctr, wlen big-endian.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include "capture/file_reader.h"
#include "capture/pcap_writer.h"
#include "capture/pcapng_reader.h"
#include "cli/command.h"
#include "cli/output_guard.h"
#include "decode/erf.h"

namespace rdmadiag::cli {

namespace {

constexpr std::uint32_t kLinktypeInfiniband = 247;
constexpr std::uint32_t kLinktypeErf = 197;
constexpr std::uint8_t kErfFlagVaryingLength = 0x04;

struct ConvertOptions {
  std::string input;
  std::string output;
  std::string to;  // pcap | pcapng | erf; "" from the output name
  bool force = false;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Builds the ERF record (header + packet) for one InfiniBand packet into `out`.
bool erf_record(const capture::Record& rec, std::vector<std::uint8_t>& out) {
  const std::size_t rlen = 16 + rec.caplen;
  if (rlen > 0xFFFF || rec.wirelen > 0xFFFF) return false;
  const std::uint64_t frac = (static_cast<std::uint64_t>(rec.ts_nsec) << 32) / 1'000'000'000ULL;
  const std::uint64_t ts = (static_cast<std::uint64_t>(rec.ts_sec) << 32) | frac;
  out.clear();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(ts >> (8 * i)));
  out.push_back(decode::kErfTypeInfiniband);
  out.push_back(kErfFlagVaryingLength);
  out.push_back(static_cast<std::uint8_t>(rlen >> 8));
  out.push_back(static_cast<std::uint8_t>(rlen));
  out.push_back(0);  // loss counter
  out.push_back(0);
  out.push_back(static_cast<std::uint8_t>(rec.wirelen >> 8));
  out.push_back(static_cast<std::uint8_t>(rec.wirelen));
  out.insert(out.end(), rec.data.begin(), rec.data.begin() + rec.caplen);
  return true;
}

// Copies the records (wrapped in ERF headers with `to_erf`), each to its
// interface. Interfaces of a pcapng file after its first one are added as their
// first record comes (PcapngReader numbers them over the whole file).
struct Copy {
  capture::FileReader& reader;
  capture::CaptureWriter& writer;
  const ConvertOptions& o;
  bool to_erf = false;
  bool one_interface = false;  // pcap (and ERF in pcap): a second capture point cannot be kept apart
  std::vector<std::size_t> out_iface = {0};  // the reader's interface -> the writer's
  std::uint64_t skipped = 0;    // too long for an ERF record
  std::string refused;          // an interface the output cannot hold

  static constexpr std::size_t kNone = ~std::size_t{0};

  std::size_t interface_of_record() {
    const std::uint32_t in = reader.record_interface();
    if (in < out_iface.size() && out_iface[in] != kNone) return out_iface[in];
    const capture::PcapngInterface* info = reader.interface_info(in);
    capture::InterfaceDesc d;
    d.name = info && !info->name.empty() ? info->name : o.input;
    d.linktype = reader.record_linktype();
    d.snaplen = info && info->snaplen ? info->snaplen : reader.snaplen();
    if (to_erf && d.linktype != kLinktypeInfiniband) {
      refused = "interface " + std::to_string(in) + " has link type " + std::to_string(d.linktype) +
                "; --to erf converts InfiniBand (247) captures";
      return kNone;
    }
    if (to_erf) {
      d.linktype = kLinktypeErf;
      d.snaplen = std::min<std::uint32_t>(d.snaplen + 16, 65535);
    }
    if (!writer.add_interface(d)) {
      refused = "interface " + std::to_string(in) + " has link type " + std::to_string(d.linktype) + ", interface 0 link type " +
                std::to_string(reader.linktype()) + "; a pcap file holds one link type: convert to pcapng (--to pcapng)";
      return kNone;
    }
    if (one_interface) {  // same link type: a pcap file would merge the two points into one
      refused = "interface " + std::to_string(in) +
                " is another capture point than interface 0; a pcap file cannot tell them apart: convert to pcapng "
                "(--to pcapng)";
      return kNone;
    }
    if (out_iface.size() <= in) out_iface.resize(in + 1, kNone);
    return out_iface[in] = writer.interfaces() - 1;
  }

  // False on a write error or a refused interface.
  bool run() {
    capture::Record rec;
    std::vector<std::uint8_t> erf;
    while (reader.next(rec)) {
      const std::size_t iface = interface_of_record();
      if (iface == kNone) return false;
      bool ok = true;
      if (!to_erf) {
        ok = writer.write(rec, iface, static_cast<std::time_t>(rec.ts_sec));
      } else if (erf_record(rec, erf)) {
        capture::Record wrapped = rec;
        wrapped.caplen = static_cast<std::uint32_t>(erf.size());
        wrapped.wirelen = rec.wirelen + 16;
        wrapped.data = erf;
        ok = writer.write(wrapped, iface, static_cast<std::time_t>(rec.ts_sec));
      } else {
        ++skipped;
      }
      if (!ok) return false;
    }
    return true;
  }
};

int run_convert(const ConvertOptions& o) {
  std::string to = o.to;
  if (to.empty()) to = ends_with(o.output, ".pcapng") ? "pcapng" : "pcap";
  if (to != "pcap" && to != "pcapng" && to != "erf") {
    std::fprintf(stderr, "rdmadiag convert: --to must be pcap, pcapng or erf\n");
    return 2;
  }
  if (!outputs_apart("convert", {o.input}, {{"output", o.output}}, {"output"})) return 2;
  capture::FileReader reader;
  if (!reader.open(o.input)) {
    std::fprintf(stderr, "rdmadiag convert: %s\n", reader.error().c_str());
    return 1;
  }
  const bool to_erf = to == "erf";
  if (to_erf && reader.linktype() != kLinktypeInfiniband) {
    std::fprintf(stderr, "rdmadiag convert: %s: link type %u; --to erf converts InfiniBand (247) captures\n", o.input.c_str(),
                 reader.linktype());
    return 1;
  }
  capture::WriterOptions wo;
  wo.path = o.output;
  wo.force = o.force;
  wo.format = to == "pcapng" ? capture::FileFormat::pcapng : capture::FileFormat::pcap;
  capture::InterfaceDesc iface;
  iface.name = o.input;
  iface.linktype = to_erf ? kLinktypeErf : reader.linktype();
  iface.snaplen = to_erf ? std::min<std::uint32_t>(reader.snaplen() + 16, 65535) : reader.snaplen();
  capture::CaptureWriter writer;
  if (!writer.open(wo, {iface}, std::time(nullptr))) {
    std::fprintf(stderr, "rdmadiag convert: %s\n", writer.error().c_str());
    return 1;
  }
  Copy copy{reader, writer, o, to_erf, to != "pcapng", {0}, 0, {}};
  bool ok = copy.run();
  ok = writer.close() && ok;
  if (!copy.refused.empty()) {
    // Not a convertible input for this format: no half-made output is left behind.
    if (o.output != "-") std::remove(o.output.c_str());
    std::fprintf(stderr, "rdmadiag convert: %s: %s\n", o.input.c_str(), copy.refused.c_str());
    return 1;
  }
  if (!ok) {
    std::fprintf(stderr, "rdmadiag convert: %s\n", writer.error().c_str());
    return 4;
  }
  const std::uint64_t skipped = copy.skipped;
  if (skipped)
    std::fprintf(stderr, "rdmadiag convert: %llu packets longer than an ERF record can hold were left out\n",
                 static_cast<unsigned long long>(skipped));
  if (!reader.stop_reason().empty()) {
    std::fprintf(stderr, "rdmadiag convert: %s: damaged capture, %s; converted up to there\n", o.input.c_str(), reader.stop_reason().c_str());
    return 3;
  }
  std::fprintf(stderr, "rdmadiag convert: %llu packets written to %s (%s)\n", static_cast<unsigned long long>(writer.packets_written()),
               o.output.c_str(), to_erf ? "pcap of ERF type-21 records" : to.c_str());
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, Commands& out) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* sub = app.add_subcommand("convert", "Rewrite a capture: pcap <-> pcapng, InfiniBand (247) -> ERF type 21 for Wireshark");
  sub->add_option("input", o->input, "Capture file to read ('-' standard input)")->required();
  sub->add_option("output", o->output, "File to write ('-' standard output)")->required();
  sub->add_option("--to", o->to, "pcap, pcapng or erf (default: pcapng if the output name ends in .pcapng, else pcap)");
  sub->add_flag("--force", o->force, "Overwrite an existing output file");
  sub->footer("Exit status: 0 done; 1 cannot read input / write output; 2 bad command line (also: the output is the input); 3 input damaged (converted up to there); 4 write error.");
  out.push_back(Command{sub, [o] { return run_convert(*o); }});
}

}  // namespace rdmadiag::cli
