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
