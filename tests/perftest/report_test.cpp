#include "perftest/report.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace rdmadiag::perftest;

namespace {
TestResult sample_result(TestOptions& o) {
  o.test_name = "write-lat";
  o.iterations = 100;
  o.all_sizes = true;
  TestResult r;
  r.info.test = "write-lat";
  r.info.role = "client";
  r.info.device = "rxe0";
  r.info.link_layer = "Ethernet";
  r.info.transport = "RC";
  r.info.gid_index = 1;
  r.info.gid = "::ffff:10.77.0.2";
  r.info.gid_type = "RoCE v2";
  r.info.mtu = 1024;
  r.info.peer = "10.77.0.1";
  r.info.local_version = "6.06";
  r.info.peer_version = "6.06";
  r.info.counter = "rdtsc";
  r.info.cycles_per_usec = 2600;
  r.info.local_key.qpn = 0x11;
  r.info.local_key.gid = std::array<std::uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
  r.info.remote_key = r.info.local_key;
  for (std::uint64_t size : {2u, 4u}) {
    SizeResult s;
    s.size = size;
    s.iterations = 100;
    std::vector<double> v;
    std::vector<std::uint64_t> d;
    for (int i = 1; i < 100; ++i) {
      v.push_back(i * 0.5);
      d.push_back(static_cast<std::uint64_t>(i) * 2600);
    }
    s.stats = compute_statistics(v);
    s.perftest = perftest_figures(d, 2600, 2);
    s.samples_usec = v;
    r.sizes.push_back(s);
  }
  r.counters_before = {{"hw_counters/rcvd_pkts", 10}};
  r.counters_after = {{"hw_counters/rcvd_pkts", 210}};
  return r;
}
}  // namespace

TEST(Report, JsonKeepsEverySizeAndCounterDelta) {
  TestOptions o;
  const auto r = sample_result(o);
  const auto j = to_json(r, o);
  EXPECT_EQ(j["schema"], "rdmadiag-perftest");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["size"], 4);
  EXPECT_EQ(j["results"][0]["statistics"]["sample_count"], 99);
  EXPECT_TRUE(j["results"][0]["statistics"]["percentiles"].contains("p99.99"));
  EXPECT_EQ(j["port_counters"]["delta"]["hw_counters/rcvd_pkts"], 200);
  EXPECT_TRUE(j["ok"].get<bool>());
  // Written for the schema validation test (perftest_report_schema).
  std::ofstream("perftest_sample_report.json") << j.dump(2);
}

TEST(Report, TextKeepsPerftestColumnsFirst) {
  TestOptions o;
  const auto r = sample_result(o);
  const auto text = format_text(r, o);
  EXPECT_NE(text.find(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% "
                      "percentile[usec]   99.9% percentile[usec] "),
            std::string::npos);
  EXPECT_NE(text.find("RDMA_Write Latency Test"), std::string::npos);
  EXPECT_NE(text.find(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02"), std::string::npos);
  // One row per size, starting with the size as perftest prints it.
  EXPECT_NE(text.find("\n 2       100  "), std::string::npos);
  EXPECT_NE(text.find("\n 4       100  "), std::string::npos);
}

// -b with --report_gbits: perftest's print_full_bw_report prints local + remote, and Gb/s is
// bytes * 8 / 10^9 (format_factor 125000000). Local 200/100 MB/s (peak/avg), remote 100/50:
// 300 MB/s = 300 * 1048576 * 8 / 1e9 = 2.516582 Gb/s, 150 MB/s = 1.258291 Gb/s.
TEST(Report, BidirectionalRowIsTheSumInGbits) {
  TestOptions o;
  o.test_name = "write-bw";
  o.measure = Measure::Bandwidth;
  o.bidirectional = true;
  o.report_gbits = true;
  o.qp_count = 2;
  TestResult r;
  r.info.test = "write-bw";
  SizeResult s;
  s.size = 65536;
  s.iterations = 800;
  s.bw_peak_mb_per_sec = 200;
  s.bw_avg_mb_per_sec = 100;
  s.msg_rate_mpps = 0.001;
  s.bidirectional = true;
  s.remote_report = oob::BwReport{65536, 800, 100, 50, 0.002};
  s.per_qp = {{0x11, 400, 60}, {0x12, 400, 40}};
  r.sizes.push_back(s);
  const auto text = format_text(r, o);
  EXPECT_NE(text.find("BW peak[Gb/sec]    BW average[Gb/sec]"), std::string::npos);
  EXPECT_NE(text.find(" 65536      800              2.52               1.26   \t\t   0.003000\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" Number of qps   : 2"), std::string::npos);
  EXPECT_NE(text.find("QPN 0x0011 400 msgs 0.503316 Gb/sec;"), std::string::npos) << text;
  const auto j = to_json(r, o);
  EXPECT_DOUBLE_EQ(j["results"][0]["bandwidth"]["bw_avg_total"].get<double>(), 150.0);
  EXPECT_EQ(j["results"][0]["per_qp"].size(), 2u);
  EXPECT_EQ(j["results"][0]["per_qp"][1]["messages"], 400);
}
