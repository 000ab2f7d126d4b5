// Fuzz target: the perftest out-of-band message parsers, i.e. whatever a peer
// on the TCP side channel sends. The first byte picks the parser; the rest is
// the message. A parser may only refuse with oob::ProtocolError: any other
// exception escapes and libFuzzer reports it as a crash.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "perftest/oob_protocol.h"

using namespace rdmadiag::perftest;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const char> msg(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 9) {
      case 0: (void)oob::parse_version(msg); break;
      case 1: (void)oob::parse_be32(msg); break;
      case 2: (void)oob::parse_mtu(msg); break;
      case 3: (void)oob::parse_key_message(msg, true); break;
      case 4: (void)oob::parse_key_message(msg, false); break;
      case 5: {
        std::array<std::array<char, 8>, 5> fields{};
        std::memcpy(fields.data(), msg.data(), std::min(msg.size(), sizeof fields));
        (void)oob::parse_bw_report(fields);
        break;
      }
      case 6: {
        const auto remote = oob::parse_options(msg);
        (void)oob::compare_options({{"size", "2"}, {"iters", "1000"}}, remote);
        break;
      }
      case 7: {
        const auto remote = oob::parse_negotiation(msg);
        (void)oob::compare_negotiation(oob::NegotiationBlock{}, remote);
        break;
      }
      case 8: (void)oob::describe_bytes(msg); break;
    }
  } catch (const oob::ProtocolError&) {
  }
  return 0;
}
