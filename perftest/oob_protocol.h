// The out-of-band (TCP) messages of linux-rdma perftest, as pure encode/parse functions.
// Wire facts (verified on the rxe captures in ../shared/pcaps and perftest's sources):
//  - version: 16 bytes, a NUL-terminated decimal string ("6.06"); peers compare it with atof;
//  - system data (peers >= 5.32): two 4-byte big-endian ints, page size then cache-line size;
//  - MTU (peers >= 5.31): the ibv_mtu enum value as a 2-byte string ("3\0" = 1024);
//  - parameter negotiation (both peers >= 6.28): a binary struct, see NegotiationBlock;
//  - key message: "lid:out_reads:qpn:psn:rkey:vaddr[:gid bytes]:srqn" in fixed-width lower-case
//    hex, 108 bytes with a GID (RoCE, or IB with -x), 59 bytes without; also used as a barrier;
//  - bandwidth report (bw tests): five 8-byte big-endian values (size, iterations, peak, avg,
//    message rate; the last three are IEEE doubles);
//  - "done\0" at the end of most tests.
// The client always writes first in each exchange step.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace rdmadiag::perftest::oob {

// A message from the peer that is malformed, truncated or not from perftest at all.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::size_t kVersionSize = 16;
inline constexpr std::size_t kKeyMessageSizeWithGid = 108;
inline constexpr std::size_t kKeyMessageSizeWithoutGid = 59;
inline constexpr std::size_t kMtuMessageSize = 2;
inline constexpr std::size_t kBwReportSize = 40;
inline constexpr char kDoneMessage[] = "done";  // sent with its NUL: 5 bytes

// What we announce: the protocol dialect we implement is perftest 6.06's (Debian 12's
// perftest 4.5 build). After the NUL we add a marker that perftest ignores (it only atof()s
// the string) so two rdmadiag peers recognise each other and can compare options.
inline constexpr char kAnnouncedVersion[] = "6.06";
inline constexpr char kRdmadiagMarker[] = "rdmadiag/1";

struct PeerVersion {
  std::string text;          // up to the first NUL
  double number = 0;         // what perftest's atof would read
  bool is_rdmadiag = false;  // the peer put our marker after the NUL
};

std::array<char, kVersionSize> encode_version(const std::string& version, bool add_rdmadiag_marker);
PeerVersion parse_version(std::span<const char> bytes);

// Oldest version whose protocol we implement (perftest refuses < 5.70 as well).
inline constexpr double kOldestCompatibleVersion = 5.70;
// Versions from which upstream adds the parameter negotiation step.
inline constexpr double kNegotiationVersion = 6.28;

std::array<char, 4> encode_be32(std::uint32_t value);
std::uint32_t parse_be32(std::span<const char> bytes);

std::array<char, kMtuMessageSize> encode_mtu(int ibv_mtu_enum);
// Returns the ibv_mtu enum value (1..5) or throws.
int parse_mtu(std::span<const char> bytes);

struct KeyMessage {
  std::uint32_t lid = 0;        // 16 bits
  std::uint32_t out_reads = 0;  // 16 bits: the sender's max outstanding RDMA reads/atomics
  std::uint32_t qpn = 0;        // 24 bits
  std::uint32_t psn = 0;        // 24 bits
  std::uint32_t rkey = 0;
  std::uint64_t vaddr = 0;
  std::optional<std::array<std::uint8_t, 16>> gid;  // absent in the 59-byte form
  std::uint32_t srqn = 0;

  bool operator==(const KeyMessage&) const = default;
};

std::vector<char> encode_key_message(const KeyMessage& key);
// with_gid selects the expected form (108 or 59 bytes); the size must match exactly.
KeyMessage parse_key_message(std::span<const char> bytes, bool with_gid);

// With -R (rdma_cm) perftest sends its struct pingpong_dest in binary instead, as one SEND on
// the rdma_cm exchange QP: big-endian lid, out_reads, qpn, psn, rkey (4 bytes each), 4 bytes of
// padding, big-endian vaddr (8), the 16 GID bytes, big-endian srqn and gid_index: 56 bytes up to
// perftest 6.28. Upstream 6.29 inserts a big-endian tail_markers_vaddr (8) after vaddr: 64 bytes.
// The receiver's buffer is the size of its own struct, so 56 bytes fit both; 64 overflow 6.06's.
inline constexpr std::size_t kCmKeyMessageSize = 56;
inline constexpr std::size_t kCmKeyMessageSizeWithTailMarkers = 64;
inline constexpr double kCmTailMarkersVersion = 6.29;
std::vector<char> encode_cm_key_message(const KeyMessage& key, bool with_tail_markers);
// Accepts either size (the length is the received message's); anything else throws.
KeyMessage parse_cm_key_message(std::span<const char> bytes);

struct BwReport {
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
  double bw_peak_mb_per_sec = 0;
  double bw_avg_mb_per_sec = 0;
  double msg_rate_mpps = 0;
};
// The five fields are exchanged one at a time (8 bytes each, client first), in this order.
std::array<std::array<char, 8>, 5> encode_bw_report(const BwReport& report);
BwReport parse_bw_report(const std::array<std::array<char, 8>, 5>& fields);

// rdmadiag <-> rdmadiag option check: a fixed 256-byte NUL-padded "key=value;..." string.
inline constexpr std::size_t kOptionsMessageSize = 256;
std::array<char, kOptionsMessageSize> encode_options(const std::vector<std::pair<std::string, std::string>>& options);
std::vector<std::pair<std::string, std::string>> parse_options(std::span<const char> bytes);
// Human-readable list of differences ("size: local 2, remote 64"), empty when they agree.
std::vector<std::string> compare_options(const std::vector<std::pair<std::string, std::string>>& local,
                                         const std::vector<std::pair<std::string, std::string>>& remote);

// Upstream perftest >= 6.28 parameter negotiation (struct perftest_parameters_negotiate):
// seven big-endian ints, 4 bytes padding, two big-endian u64, eight big-endian ints, then the
// sender's struct ibv_device_attr in its host byte order (232 bytes on LP64), then - in builds
// with mlx5dv, which the distribution packages are - an 8-byte mlx5dv comp mask.
inline constexpr std::size_t kDeviceAttrSize = 232;
inline constexpr std::size_t kNegotiationSizeWithoutMlx5 = 80 + kDeviceAttrSize;
inline constexpr std::size_t kNegotiationSizeWithMlx5 = kNegotiationSizeWithoutMlx5 + 8;

struct NegotiationBlock {
  std::int32_t test_method = 0;      // 0 regular, 1 all sizes (-a), 2 infinite
  std::int32_t connection_type = 0;  // 0 RC, 1 UC, 2 UD
  std::int32_t verb = 0;             // 0 SEND, 1 SEND_IMM, 2 WRITE, 3 WRITE_IMM, 4 READ, 5 ATOMIC
  std::int32_t tst = 0;              // 0 LAT, 1 BW
  std::int32_t atomic_type = 1;      // 0 CMP_AND_SWAP, 1 FETCH_AND_ADD
  std::int32_t test_type = 0;        // 0 iterations, 1 duration
  std::int32_t report_fmt = 1;       // 0 GB/s, 1 MB/s
  std::uint64_t size = 0;
  std::uint64_t iters = 0;
  std::int32_t aes_xts = 0, num_of_qps = 1, duration = 5, use_rdma_cm = 0, use_write_with_imm = 0,
               no_enhanced_reorder = 0, sig_offload = 0, data_validation = 0;
  std::vector<std::uint8_t> device_attr;  // kDeviceAttrSize raw bytes, sender byte order
  std::uint32_t max_qp_rd_atom = 0;       // decoded from device_attr (little-endian hosts)
};
std::vector<char> encode_negotiation(const NegotiationBlock& block, bool with_mlx5_mask);
NegotiationBlock parse_negotiation(std::span<const char> bytes);
// Differences that make upstream refuse to run ("verb mismatch: local=WRITE, remote=READ").
std::vector<std::string> compare_negotiation(const NegotiationBlock& local, const NegotiationBlock& remote);

// Printable rendering of arbitrary peer bytes for error messages (hex for non-printables).
std::string describe_bytes(std::span<const char> bytes, std::size_t limit = 48);

}  // namespace rdmadiag::perftest::oob
