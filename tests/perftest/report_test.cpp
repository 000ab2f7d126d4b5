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

TestOptions write_bw_options() {  // write-bw -q 2
  TestOptions o;
  o.test_name = "write-bw";
  o.measure = Measure::Bandwidth;
  o.qp_count = 2;
  return o;
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
// -l 4: the header lines Debian's ib_write_bw -l 4 prints (lab run of 2026-11-25,
// docs/perftest.md): the note, the title, Post List and the CQ moderation it implies.
TEST(Report, PostListHeaderAsPerftestPrintsIt) {
  TestOptions o = write_bw_options();
  o.post_list = 4;
  o.peer = "10.77.0.1";  // Debian's lines below are its client's
  TestResult r;
  r.info.test = "write-bw";
  const auto text = format_text(r, o);
  EXPECT_NE(text.find("Post List requested - CQ moderation will be the size of the post list\n"), std::string::npos) << text;
  EXPECT_NE(text.find("                    RDMA_Write Post List BW Test\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" TX depth        : 128\n Post List       : 4\n CQ Moderation   : 4\n"), std::string::npos) << text;
  const auto j = to_json(r, o);
  EXPECT_EQ(j["test_info"]["bandwidth_options"]["cq_mod"], 4);
  EXPECT_EQ(j["test_info"]["bandwidth_options"]["post_list"], 4);
}

// The depth lines and titles Debian's perftest 4.5 printed in the lab (tests/perftest/lab_audit.py
// compares every option set that way): ib_send_bw -q 4 -n 200 server (no TX depth: it only
// receives), ib_send_bw -b server (both, "IW" on siw), ib_write_bw -n 60 server (-t, -Q clamped to -n).
TEST(Report, DepthLinesAndTitleAsDebiansPerftestServer) {
  TestOptions o = write_bw_options();
  o.verb = Verb::Send;
  o.qp_count = 4;
  o.iterations = 200;
  TestResult r;
  auto text = format_text(r, o);
  EXPECT_NE(text.find("                    Send BW Test\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Using SRQ      : OFF\n RX depth        : 200\n CQ Moderation   : 100\n Mtu"), std::string::npos) << text;

  o.qp_count = 1;
  o.bidirectional = true;
  text = format_text(r, o);
  EXPECT_NE(text.find("                    Send Bidirectional BW Test\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" TX depth        : 128\n RX depth        : 200\n CQ Moderation   : 100\n"), std::string::npos) << text;

  r.info.transport_type = "IW";  // Debian's ib_write_bw -R on siw: "Transport type : IW"
  EXPECT_NE(format_text(r, o).find(" Number of qps   : 1\t\tTransport type : IW\n"), std::string::npos);
  EXPECT_EQ(to_json(r, o)["test_info"]["transport_type"], "IW");
  r.info.transport_type = "IB";

  o = write_bw_options();
  o.qp_count = 1;
  o.iterations = 60;
  text = format_text(r, o);
  EXPECT_NE(text.find("Using SRQ      : OFF\n CQ Moderation   : 60\n Mtu"), std::string::npos) << text;
  o.peer = "10.77.0.1";
  EXPECT_NE(format_text(r, o).find(" TX depth        : 60\n CQ Moderation   : 60\n"), std::string::npos);
  EXPECT_EQ(to_json(r, o)["test_info"]["bandwidth_options"]["tx_depth"], 60);
}

TEST(Report, BidirectionalRowIsTheSumInGbits) {
  TestOptions o = write_bw_options();
  o.bidirectional = true;
  o.report_gbits = true;
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

// -D --cpu_util on a bandwidth run: perftest's CPU_Util column ends its header and row
// (RESULT_EXT_CPU_UTIL "    CPU_Util[%%]", REPORT_EXT_CPU_UTIL "\t    %-3.2f"); the completion
// latency of the signalled operations and each QP's p50/p99 are in the text and the JSON.
TEST(Report, BandwidthCpuColumnAndCompletionLatency) {
  TestOptions o = write_bw_options();
  o.duration_s = 4;
  o.cpu_util = true;
  TestOptions latency_options;
  TestResult r;
  r.info = sample_result(latency_options).info;  // a complete test_info for the schema check
  r.info.test = "write-bw";
  SizeResult s;
  s.size = 65536;
  s.iterations = 3000;
  s.bw_peak_mb_per_sec = s.bw_avg_mb_per_sec = 100;
  s.msg_rate_mpps = 0.0016;
  s.duration = DurationFigures{2.0, 0, 1600};
  s.cpu_util = CpuUtilisation{12.5, 30.25, 99.5, 2.0};
  s.completion_latency = compute_statistics({10, 20, 30, 40});
  s.per_qp = {{0x11, 1500, 50, 20, 40}, {0x12, 1500, 50, 10, 30}};
  r.sizes.push_back(s);
  const auto text = format_text(r, o);
  EXPECT_NE(text.find("MsgRate[Mpps]    CPU_Util[%]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("0.001600\t    12.50\n"), std::string::npos) << text;
  EXPECT_NE(text.find("all CPUs busy 30.25 %, this process 99.50 %"), std::string::npos) << text;
  EXPECT_NE(text.find("p50 20.000 p90 40.000 p99 40.000"), std::string::npos) << text;
  EXPECT_NE(text.find("QPN 0x0012 1500 msgs 50.00 MB/sec p50 10.000 p99 30.000 usec;"), std::string::npos) << text;
  auto perftest_style = to_perftest_style_json(r, o);
  EXPECT_DOUBLE_EQ(perftest_style["results_perftest"]["CPU_util"].get<double>(), 12.5);
  const auto& j = perftest_style["results"][0];
  EXPECT_DOUBLE_EQ(j["cpu_util"]["busy_percent"].get<double>(), 30.25);
  EXPECT_EQ(j["completion_latency"]["statistics"]["sample_count"], 4);
  EXPECT_DOUBLE_EQ(j["completion_latency"]["statistics"]["percentiles"]["p50"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["per_qp"][0]["completion_p99_usec"].get<double>(), 40.0);
  // Written for the schema validation test (perftest_bw_report_schema).
  std::ofstream("perftest_sample_bw_report.json") << to_json(r, o).dump(2);
}

// perftest's print_report_lat: -U prints every delta in run order, -H the sorted deltas without
// the two largest (LAT_MEASURE_TAIL), both as "#, <unit>" then "i, value"; with -C in cycles
// (at 2600 cycles per usec, 0.5 usec = 1300 cycles). -W prints "\t<name>=<change>" lines and an
// empty line (counters_print).
TEST(Report, SampleListsAndCounterLinesAsPerftest) {
  TestOptions o;
  o.print_every_sample = true;
  o.report_unsorted = true;
  o.report_counters = {"hw_counters/rcvd_pkts"};
  TestResult r;
  r.info.cycles_per_usec = 2600;
  r.counters_before = {{"hw_counters/rcvd_pkts", 10}};
  r.counters_after = {{"hw_counters/rcvd_pkts", 210}};
  SizeResult s;
  s.size = 2;
  s.iterations = 6;
  s.samples_usec = {3.0, 0.5, 9.0, 1.0, 7.0};
  s.stats = compute_statistics(s.samples_usec);
  s.perftest = PerftestFigures{};
  r.sizes.push_back(s);
  auto text = format_text(r, o);
  EXPECT_NE(text.find("#, usec\n1, 3\n2, 0.5\n3, 9\n4, 1\n5, 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("#, usec\n1, 0.5\n2, 1\n3, 3\n---"), std::string::npos) << text;
  EXPECT_NE(text.find("\n\thw_counters/rcvd_pkts=200\n\n"), std::string::npos) << text;
  r.sizes[0].perftest_in_cycles = true;
  o.print_every_sample = false;
  text = format_text(r, o);
  EXPECT_NE(text.find("#, cycles\n1, 7800\n2, 1300\n3, 23400\n"), std::string::npos) << text;
  EXPECT_EQ(to_json(r, o)["results"][0]["perftest_figures_unit"], "cycles");
}
