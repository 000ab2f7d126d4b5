// NVMe-oF capsule decode (decode/nvme_capsule.h) on capsules from the lab
// capture tests/pcaps/lab_rxe_nvme.pcap (Linux nvme-rdma host and nvmet-rdma
// target over rdma_rxe). Expected values are tshark's decode of the same
// frames (tests/pcaps/lab_rxe_nvme.nvme.tsv) where tshark decodes them; the
// I/O queue's Connect (a SEND First, which tshark does not decode) against
// the NQNs the lab script gave nvme connect (tests/lab/nvme-host, -target).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/nvme_analysis.h"
#include "decode/nvme_capsule.h"

namespace rdmadiag::decode {
namespace {

std::vector<std::uint8_t> from_hex(const std::string& h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// Frame 30: the admin queue's Connect, SEND Only, data by keyed SGL (the target RDMA READs it).
const std::string kAdminConnect =
      "7f40000001000000000000000000000000000000000000000058b9033e8fffff000400a90300004f000000001f000000"
      "88130000000000000000000000000000";
// Frame 34: its completion, SEND with Invalidate (the 16 bytes after the IETH).
const std::string kConnectCqe = "01000000000000000100000000000000";
// Frame 381: a 4 KiB Read on I/O queue 1.
const std::string kRead =
      "02401550010000000000000000000000000000000000000000d032073e8fffff001000ff2300004f482e000000000000"
      "07000000000000000000000000000000";
// Frame 112: I/O queue 1's Connect with its 1024 bytes of data in the capsule (first 832 bytes).
const std::string kIoConnect =
      "7f400000010000000000000000000000000000000000000000000000000000000004000000000001000001001f000000"
      "000000000000000000000000000000002aee4ab72bd64dd78782eee9997e9ee201000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "00000000000000000000000000000000000000000000000000000000000000006e716e2e323032362d31312e6f72672e"
      "72646d61646961673a6c6162000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "6e716e2e323031342d30382e6f72672e6e766d657870726573733a757569643a37643161623165302d303030302d3430"
      "30302d383030302d30303030303030303030313700000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "00000000000000000000000000000000";

TEST(NvmeCapsule, AdminConnectAsTsharkDecodesIt) {
  const auto b = from_hex(kAdminConnect);
  NvmeCommand c;
  ASSERT_EQ(parse_nvme_command(b, static_cast<std::uint32_t>(b.size()), c), ParseStatus::ok);
  EXPECT_TRUE(c.is(FabricsType::connect));
  EXPECT_EQ(c.cid, 0);
  EXPECT_EQ(c.qid, 0);
  EXPECT_EQ(c.sqsize, 31);
  EXPECT_EQ(c.kato, 5000u);
  EXPECT_TRUE(c.sgl.keyed());
  EXPECT_TRUE(c.sgl.invalidate());
  EXPECT_EQ(c.sgl.address, 0xffff8f3e03b95800ULL);
  EXPECT_EQ(c.sgl.length, 1024u);
  EXPECT_EQ(c.sgl.key, 0x3a9u);
  EXPECT_EQ(c.in_capsule_bytes, 0u);
  EXPECT_EQ(nvme_opcode_name(c, NvmeQueueKind::admin), "connect");
}

TEST(NvmeCapsule, ConnectCompletion) {
  const auto b = from_hex(kConnectCqe);
  NvmeCompletion r;
  ASSERT_EQ(parse_nvme_completion(b, r), ParseStatus::ok);
  EXPECT_EQ(r.cid, 0);
  EXPECT_EQ(r.sqid, 0);
  EXPECT_EQ(r.sqhd, 1);
  EXPECT_EQ(r.dw0 & 0xFFFF, 1u);  // the controller ID it assigned
  EXPECT_TRUE(r.success());
  EXPECT_EQ(nvme_status_name(r.sct(), r.sc(), true), "success");
}

// Generic status codes 15h-1Dh as NVMe Base 1.4 figure 128 (17h: NVMe 1.3)
// numbers them, and as Linux include/linux/nvme.h names them.
TEST(NvmeCapsule, GenericStatusNamesFollowTheSpecification) {
  EXPECT_EQ(nvme_status_name(0, 0x15, false), "operation_denied");
  EXPECT_EQ(nvme_status_name(0, 0x16, false), "sgl_offset_invalid");
  EXPECT_EQ(nvme_status_name(0, 0x17, false), "sgl_subtype_invalid");
  EXPECT_EQ(nvme_status_name(0, 0x19, false), "keep_alive_timer_expired");
  EXPECT_EQ(nvme_status_name(0, 0x1D, false), "sanitize_in_progress");
  EXPECT_EQ(nvme_status_name(0, 0x22, false), "transient_transport_error");
}

// SCT 1 SC 82h is Connect Invalid Parameters for a Connect only (NVMe-oF 1.1
// figure 21); a Property Get answered so is not a Connect failure.
TEST(NvmeCapsule, CommandSpecificStatusIsNamedForConnectOnly) {
  NvmeCommandResult r;
  r.fabrics = true;
  r.sct = 1;
  r.sc = 0x82;
  r.fctype = static_cast<std::uint8_t>(FabricsType::connect);
  EXPECT_EQ(r.status_name(), "connect_invalid_parameters");
  r.fctype = static_cast<std::uint8_t>(FabricsType::property_get);
  EXPECT_EQ(r.status_name(), "command_specific");
}

TEST(NvmeCapsule, ReadAsTsharkDecodesIt) {
  const auto b = from_hex(kRead);
  NvmeCommand c;
  ASSERT_EQ(parse_nvme_command(b, static_cast<std::uint32_t>(b.size()), c), ParseStatus::ok);
  EXPECT_EQ(c.opcode, 0x02);
  EXPECT_EQ(c.cid, 0x5015);
  EXPECT_EQ(c.nsid, 1u);
  EXPECT_EQ(c.slba(), 11848u);
  EXPECT_EQ(c.blocks(), 8u);
  EXPECT_EQ(c.sgl.length, 4096u);
  EXPECT_EQ(c.sgl.key, 0x23ffu);
  EXPECT_EQ(nvme_opcode_name(c, NvmeQueueKind::io), "read");
  EXPECT_EQ(nvme_opcode_name(c, NvmeQueueKind::admin), "get_log_page");  // same opcode, other queue
  EXPECT_TRUE(nvme_io_has_lba(c.opcode));
}

TEST(NvmeCapsule, IoConnectWithInCapsuleData) {
  const auto b = from_hex(kIoConnect);
  NvmeCommand c;
  ASSERT_EQ(parse_nvme_command(b, 1088, c), ParseStatus::ok);
  EXPECT_TRUE(c.is(FabricsType::connect));
  EXPECT_EQ(c.qid, 1);
  EXPECT_TRUE(c.sgl.in_capsule());
  EXPECT_EQ(c.sgl.length, 1024u);
  EXPECT_EQ(c.in_capsule_bytes, 1024u);
  NvmeConnectData d;
  ASSERT_EQ(parse_nvme_connect_data(Bytes(b).subspan(kNvmeSqeLength), d), ParseStatus::ok);
  EXPECT_EQ(d.subsystem(), "nqn.2026-11.org.rdmadiag:lab");
  EXPECT_EQ(d.host(), "nqn.2014-08.org.nvmexpress:uuid:7d1ab1e0-0000-4000-8000-000000000017");
  EXPECT_EQ(d.cntlid, 1);  // the admin queue's controller (its Connect completion's DW0)
}

// Every cut of a capsule: truncated or malformed, never a read past the end.
TEST(NvmeCapsule, EveryPrefixIsSafe) {
  const auto b = from_hex(kIoConnect);
  for (std::size_t n = 0; n < b.size(); ++n) {
    const Bytes cut(b.data(), n);
    NvmeCommand c;
    const ParseStatus want = n < kNvmeSqeLength ? ParseStatus::truncated : ParseStatus::ok;
    EXPECT_EQ(parse_nvme_command(cut, 1088, c), want) << n;
    NvmeConnectData d;
    if (n >= kNvmeSqeLength) {
      const ParseStatus data_want = n >= kNvmeSqeLength + 768 ? ParseStatus::ok : ParseStatus::truncated;
      EXPECT_EQ(parse_nvme_connect_data(cut.subspan(kNvmeSqeLength), d), data_want) << n;
    }
    NvmeCompletion r;
    EXPECT_EQ(parse_nvme_completion(cut, r), n < kNvmeCqeLength ? ParseStatus::truncated : ParseStatus::ok) << n;
  }
  NvmeCommand c;
  EXPECT_EQ(parse_nvme_command(b, 63, c), ParseStatus::malformed);  // shorter than an SQE on the wire
}

}  // namespace
}  // namespace rdmadiag::decode
