#include "perftest/report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <sstream>

namespace rdmadiag::perftest {

namespace {

constexpr char kRule[] = "---------------------------------------------------------------------------------------\n";

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// perftest prints GID bytes with %02d (decimal), e.g. "255:255:10:77:00:02".
std::string perftest_gid(const std::optional<std::array<std::uint8_t, 16>>& gid) {
  std::string out;
  if (!gid) return out;
  for (std::size_t i = 0; i < 16; ++i) out += printf_string("%s%02d", i ? ":" : "", (*gid)[i]);
  return out;
}

std::string address_lines(const char* side, const oob::KeyMessage& k, const TestOptions& o) {
  std::string s = printf_string(" %s address: LID %#04x QPN %#06x PSN %#06x", side, k.lid, k.qpn, k.psn);
  if (o.verb == Verb::Read || o.verb == Verb::Atomic) s += printf_string(" OUT %#04x", k.out_reads);
  if (o.verb != Verb::Send) s += printf_string(" RKey %#08x VAddr %#016llx", k.rkey, static_cast<unsigned long long>(k.vaddr));
  s += "\n";
  if (k.gid) s += " GID: " + perftest_gid(k.gid) + "\n";
  return s;
}

std::string hex(std::uint64_t v) { return printf_string("0x%" PRIx64, v); }

nlohmann::json key_json(const oob::KeyMessage& k) {
  nlohmann::json j{{"lid", k.lid}, {"out_reads", k.out_reads}, {"qpn", k.qpn}, {"psn", k.psn},
                   {"rkey", hex(k.rkey)}, {"vaddr", hex(k.vaddr)}};
  if (k.gid) j["gid"] = perftest_gid(k.gid);
  return j;
}

// -U: every sample in run order; -H: sorted, without the two largest (perftest's print_report_lat:
// qsort, then measure_cnt - LAT_MEASURE_TAIL). In cycles with -C (iteration mode), as perftest.
std::string sample_lists(const SizeResult& sr, const TestOptions& o, double cycles_per_usec) {
  if (sr.samples_usec.empty() || !(o.print_every_sample || o.report_unsorted)) return "";
  const double scale = sr.perftest_in_cycles ? cycles_per_usec : 1.0;
  const auto list = [&](const std::vector<double>& v, std::size_t count) {
    std::string text = sr.perftest_in_cycles ? "#, cycles\n" : "#, usec\n";
    for (std::size_t k = 0; k < count; ++k) text += printf_string("%zu, %g\n", k + 1, v[k] * scale);
    return text + kRule;
  };
  std::string out;
  if (o.report_unsorted) out += list(sr.samples_usec, sr.samples_usec.size());
  if (o.print_every_sample) {
    auto sorted = sr.samples_usec;
    std::sort(sorted.begin(), sorted.end());
    out += list(sorted, sorted.size() > 2 ? sorted.size() - 2 : sorted.size());
  }
  return out;
}

// -W: each named counter's change over the run, perftest's counters_print format.
std::string counter_lines(const TestResult& r, const TestOptions& o) {
  if (o.report_counters.empty()) return "";
  std::string out;
  for (const auto& name : o.report_counters) {
    const auto before = r.counters_before.find(name), after = r.counters_after.find(name);
    const std::uint64_t delta = before != r.counters_before.end() && after != r.counters_after.end() && after->second >= before->second
                                    ? after->second - before->second
                                    : 0;
    out += printf_string("\t%s=%" PRIu64 "\n", name.c_str(), delta);
  }
  return out + "\n";
}

// perftest's cpu_util_data.enable: --cpu_util in duration mode.
bool cpu_column_wanted(const TestOptions& o) { return o.cpu_util && o.duration_s > 0 && !o.run_infinitely; }

// --cpu_util: rdmadiag's two plain figures next to perftest's user/(user+idle).
std::string cpu_lines(const TestResult& r) {
  std::string out;
  for (const auto& sr : r.sizes)
    if (sr.cpu_util)
      out += printf_string(" size %lu: CPU over the %.3f s window: all CPUs busy %.2f %%, this process %.2f %% of one CPU"
                           " (CPU_Util: perftest's user/(user+idle) ticks)\n",
                           static_cast<unsigned long>(sr.size), sr.cpu_util->seconds, sr.cpu_util->busy_percent,
                           sr.cpu_util->process_percent);
  return out;
}

// perftest's bandwidth rows (MB = 2^20 bytes, or Gb/s = 10^9 bits with --report_gbits); with -b
// each row is local + remote, as perftest's print_full_bw_report; then each QP's share (-q).
std::string bandwidth_table(const TestResult& r, const TestOptions& o) {
  const double unit = o.report_gbits ? 1048576.0 * 8 / 1e9 : 1.0;
  const char* name = o.report_gbits ? "Gb/sec" : "MB/sec";
  // perftest's CPU_Util column (--cpu_util, duration mode): header and row endings; 0.00 where
  // this side measured nothing (a passive write/read-bw server), as perftest prints.
  const bool cpu_column = cpu_column_wanted(o);
  std::string out = printf_string(" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]%s\n", name, name,
                                  cpu_column ? "    CPU_Util[%]" : "");
  const CpuUtilisation* row_cpu = nullptr;
  const auto row = [&](std::uint64_t size, std::uint64_t iters, double peak, double avg, double rate) {
    // perftest's inc_accuracy: below 0.1 Gb/s six decimals (REPORT_FMT_EXT).
    if (o.report_gbits && avg * unit < 0.1)
      out += printf_string(" %-7lu    %" PRIu64 "           %-7.6lf            %-7.6lf            %-7.6lf",
                           static_cast<unsigned long>(size), iters, peak * unit, avg * unit, rate);
    else
      out += printf_string(" %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t   %-7.6lf",
                           static_cast<unsigned long>(size), iters, peak * unit, avg * unit, rate);
    out += cpu_column ? printf_string("\t    %-3.2f\n", row_cpu ? row_cpu->perftest_percent : 0.0) : "\n";
  };
  for (const auto& sr : r.sizes) {
    row_cpu = sr.cpu_util ? &*sr.cpu_util : nullptr;
    if (sr.bidirectional && sr.remote_report) {
      const auto& rr = *sr.remote_report;
      row(sr.size, sr.iterations, sr.bw_peak_mb_per_sec + rr.bw_peak_mb_per_sec, sr.bw_avg_mb_per_sec + rr.bw_avg_mb_per_sec,
          sr.msg_rate_mpps + rr.msg_rate_mpps);
    } else {
      row(sr.size, sr.iterations, sr.bw_peak_mb_per_sec, sr.bw_avg_mb_per_sec, sr.msg_rate_mpps);
    }
  }
  row_cpu = nullptr;
  out += cpu_lines(r);
  for (const auto& sr : r.sizes)
    if (sr.infinite && sr.infinite->seconds > 0)
      out += printf_string(" run_infinitely: %" PRIu64 " periods, %" PRIu64 " messages in %.2f s, %.2lf %s over the whole run; ended by %s\n",
                           sr.infinite->periods, sr.infinite->messages, sr.infinite->seconds,
                           static_cast<double>(sr.size) * static_cast<double>(sr.infinite->messages) / sr.infinite->seconds / 1048576.0 * unit,
                           name, sr.infinite->ended_by.c_str());
  for (const auto& sr : r.sizes)
    if (sr.min_window_seconds > 0)
      out += printf_string(" size %lu: slowest %.3f s window %.2lf %s (this side)\n", static_cast<unsigned long>(sr.size),
                           sr.min_window_seconds, sr.bw_min_window_mb_per_sec * unit, name);
  for (const auto& sr : r.sizes) {
    if (!sr.completion_latency) continue;
    const auto& st = *sr.completion_latency;
    out += printf_string(" size %lu: signalled post->completion [usec]: min %.3f p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f (%zu)\n",
                         static_cast<unsigned long>(sr.size), st.min_usec, st.percentiles[0].usec, st.percentiles[1].usec,
                         st.percentiles[2].usec, st.percentiles[3].usec, st.max_usec, st.sample_count);
  }
  for (const auto& sr : r.sizes) {
    if (sr.per_qp.empty()) continue;
    out += printf_string(" per QP, size %lu:", static_cast<unsigned long>(sr.size));
    for (const auto& q : sr.per_qp) {
      out += printf_string(" QPN %#06x %" PRIu64 " msgs", q.qpn, q.messages);
      if (q.bw_avg_mb_per_sec > 0) out += printf_string(o.report_gbits ? " %.6lf %s" : " %.2lf %s", q.bw_avg_mb_per_sec * unit, name);
      if (q.completion_p50_usec > 0) out += printf_string(" p50 %.3f p99 %.3f usec", q.completion_p50_usec, q.completion_p99_usec);
      out += ";";
    }
    out += "\n";
  }
  const bool show_remote = o.report_both && !r.sizes.empty() && r.sizes.back().remote_report &&
                           (!o.peer.empty() || r.sizes.back().bidirectional);
  if (show_remote) {
    const auto& sr = r.sizes.back();
    const auto& rr = *sr.remote_report;
    if (sr.bidirectional) {
      out += std::string(kRule) + " Local results:\n";
      row(sr.size, sr.iterations, sr.bw_peak_mb_per_sec, sr.bw_avg_mb_per_sec, sr.msg_rate_mpps);
    }
    out += std::string(kRule) + " Remote results:\n";
    row(rr.size, rr.iterations, rr.bw_peak_mb_per_sec, rr.bw_avg_mb_per_sec, rr.msg_rate_mpps);
  }
  return out;
}

nlohmann::json statistics_json(const LatencyStatistics& st) {
  nlohmann::json pct = nlohmann::json::object();
  for (const auto& p : st.percentiles) pct["p" + printf_string("%g", p.quantile * 100)] = p.usec;
  return {{"unit", "usec"},           {"sample_count", st.sample_count}, {"t_min", st.min_usec},
          {"t_max", st.max_usec},     {"t_typical", st.median_usec},     {"t_avg", st.mean_usec},
          {"t_stdev", st.stdev_usec}, {"percentiles", pct}};
}

nlohmann::json histogram_json(const Histogram& h) {
  return {{"low_usec", h.low_usec}, {"bin_width_usec", h.bin_width_usec}, {"counts", h.counts}};
}

// perftest's ctx_print_test_info title: "<verb> [Bidirectional ][Post List ]BW Test".
std::string header_title(const TestOptions& o) {
  std::string title = verb_title(o.verb, o.measure);
  if (o.measure == Measure::Latency) return title;
  std::string extra = o.bidirectional ? " Bidirectional" : "";
  if (o.post_list > 1) extra += " Post List";
  return title.insert(title.size() - std::string_view(" BW Test").size(), extra);
}

// perftest's TX depth / Post List / RX depth / CQ Moderation lines. Bandwidth: TX depth on the
// side that sends (the client, both with -b), RX depth on the side that receives SENDs (the
// server, both with -b); latency tests: TX depth 1 except on a send-lat server.
std::string depth_lines(const TestOptions& o) {
  const bool latency = o.measure == Measure::Latency;
  const bool server = o.peer.empty();
  const bool sends = latency ? !(server && o.verb == Verb::Send) : (!server || o.bidirectional);
  const bool receives = o.verb == Verb::Send && (server || (!latency && o.bidirectional));
  std::string out;
  if (sends) out += printf_string(" TX depth        : %d\n", latency ? 1 : effective_tx_depth(o));
  if (!latency && o.post_list > 1) out += printf_string(" Post List       : %d\n", o.post_list);
  if (receives) out += printf_string(" RX depth        : %d\n", effective_rx_depth(o));
  if (!latency) out += printf_string(" CQ Moderation   : %d\n", effective_cq_mod(o));
  return out;
}

// The latency table: perftest's -D rows (then ours), or its fixed-iteration rows (then ours).
std::string latency_rows(const TestResult& r, const TestOptions& o) {
  std::ostringstream out;
  const bool have_rows = !r.sizes.empty();
  for (const auto& sr : r.sizes) out << sample_lists(sr, o, r.info.cycles_per_usec);
  const bool duration_rows = have_rows && r.sizes.front().duration.has_value();
  if (duration_rows) {
    // perftest's -D table (t_avg over the measured window, transactions per second), then ours.
    // perftest's CPU_Util column follows its own columns (--cpu_util), before rdmadiag's.
    const bool cpu_column = cpu_column_wanted(o);
    out << " #bytes        #iterations       t_avg[usec]    tps average" << (cpu_column ? "    CPU_Util[%]" : "")
        << "    measured[s]   t_min[usec]  p50[usec]  p99[usec]  max[usec]  stdev[usec]  samples\n";
    for (const auto& sr : r.sizes) {
      if (!sr.duration) continue;
      out << printf_string(" %-7lu       %" PRIu64 "            %-7.2f        %-7.2f", static_cast<unsigned long>(sr.size),
                           sr.iterations, sr.duration->t_avg_usec, sr.duration->tps);
      if (cpu_column) out << printf_string("\t    %-3.2f", sr.cpu_util ? sr.cpu_util->perftest_percent : 0.0);
      if (sr.stats) {
        const auto& st = *sr.stats;
        out << printf_string("    %-11.3f   %-11.3f  %-9.3f  %-9.3f  %-9.3f  %-11.3f  %zu", sr.duration->seconds, st.min_usec,
                             st.percentiles[0].usec, st.percentiles[2].usec, st.max_usec, st.stdev_usec, st.sample_count);
      }
      out << "\n";
    }
  } else if (have_rows) {
    out << " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% "
           "percentile[usec]   99.9% percentile[usec] "
        << "   stdev[usec]  p50[usec]  p90[usec]  p99[usec]  p99.9[usec]  p99.99[usec]  max[usec]  samples\n";
  }
  for (const auto& sr : r.sizes) {
    if (!sr.perftest || !sr.stats || sr.duration) continue;
    const auto& f = *sr.perftest;
    out << printf_string(" %-7lu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f",
                         static_cast<unsigned long>(sr.size), sr.iterations, f.t_min, f.t_max, f.t_typical, f.t_avg,
                         f.t_stdev, f.p99, f.p99_9);
    const auto& st = *sr.stats;
    out << printf_string("   %-10.3f   %-9.3f  %-9.3f  %-9.3f  %-11.3f  %-12.3f  %-9.3f  %zu\n", st.stdev_usec,
                         st.percentiles[0].usec, st.percentiles[1].usec, st.percentiles[2].usec, st.percentiles[3].usec,
                         st.percentiles[4].usec, st.max_usec, st.sample_count);
  }
  return out.str();
}

}  // namespace

std::string rdmadiag_version() { return "0.1.0"; }

std::string format_text(const TestResult& r, const TestOptions& o) {
  const auto& i = r.info;
  std::ostringstream out;
  const bool latency = o.measure == Measure::Latency;
  const bool post_list = !latency && o.post_list > 1;
  if (post_list && !o.cq_mod_given)  // perftest's note, before the header
    out << kRule << "Post List requested - CQ moderation will be the size of the post list\n";
  out << kRule;
  out << "                    " << header_title(o) << "\n";
  out << printf_string(" Dual-port       : OFF\t\tDevice         : %s\n", i.device.c_str());
  out << printf_string(" Number of qps   : %d\t\tTransport type : %s\n", latency ? 1 : o.qp_count, i.transport_type.c_str());
  out << printf_string(" Connection type : %s\t\tUsing SRQ      : OFF\n", i.transport.c_str());
  out << depth_lines(o);
  out << printf_string(" Mtu             : %d[B]\n", i.mtu);
  out << printf_string(" Link type       : %s\n", i.link_layer == "Ethernet" ? "Ethernet" : "IB");
  if (i.gid_index >= 0) out << printf_string(" GID index       : %d\n", i.gid_index);
  if (o.verb != Verb::Read && o.verb != Verb::Atomic) out << printf_string(" Max inline data : %d[B]\n", i.inline_size);
  else out << printf_string(" Outstand reads  : %u\n", i.local_key.out_reads);
  const bool cm = i.exchange == "rdma_cm";
  out << " rdma_cm QPs\t : " << (cm ? "ON" : "OFF") << "\n";
  out << " Data ex. method : " << (cm ? "rdma_cm" : "Ethernet") << "\n";
  out << kRule;
  if (i.local_keys.empty()) {
    out << address_lines("local", i.local_key, o);
    if (i.remote_key.qpn || i.remote_key.vaddr) out << address_lines("remote", i.remote_key, o);
  } else {  // -q: every QP's, as perftest
    for (const auto& k : i.local_keys) out << address_lines("local", k, o);
    for (const auto& k : i.remote_keys) out << address_lines("remote", k, o);
  }
  out << kRule;
  if (latency) {
    out << latency_rows(r, o);
    out << cpu_lines(r);
    out << counter_lines(r, o);
    if (o.peer.empty() && (o.verb == Verb::Read || o.verb == Verb::Atomic) && r.errors.empty())
      out << " (the server side of " << i.test << " only serves the client's operations; the client reports the figures)\n";
  } else {
    out << bandwidth_table(r, o) << counter_lines(r, o);
  }
  out << kRule;
  out << " timestamps: " << i.counter << " at " << printf_string("%.3f", i.cycles_per_usec) << " MHz, "
      << i.frequency_source;
  if (i.cpuinfo_mhz > 0) out << printf_string(" (/proc/cpuinfo: %.3f MHz)", i.cpuinfo_mhz);
  out << "\n peer: " << i.peer << " announcing perftest " << (i.peer_version.empty() ? "?" : i.peer_version)
      << (i.peer_is_rdmadiag ? " (rdmadiag)" : "") << "\n";
  for (const auto& w : r.warnings) out << " warning: " << w << "\n";
  return out.str();
}

namespace {

nlohmann::json test_info_json(const TestResult& r, const TestOptions& o) {
  const auto& i = r.info;
  nlohmann::json info{
      {"test", i.test},
      {"role", i.role},
      {"device", i.device},
      {"port", i.port},
      {"link_layer", i.link_layer},
      {"gid_index", i.gid_index},
      {"gid", i.gid.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.gid)},
      {"gid_type", i.gid_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.gid_type)},
      {"netdev", i.netdev.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.netdev)},
      {"mtu", i.mtu},
      {"transport", i.transport},
      {"transport_type", i.transport_type},
      {"inline_size", i.inline_size},
      {"tos", i.tos},
      {"peer", i.peer},
      {"exchange", i.exchange},
      {"tcp_port", i.tcp_port},
      {"versions",
       {{"rdmadiag", rdmadiag_version()},
        {"announced_perftest", i.local_version},
        {"peer_perftest", i.peer_version},
        {"peer_is_rdmadiag", i.peer_is_rdmadiag},
        {"parameter_negotiation", i.negotiated}}},
      {"start_time", i.start_time},
      {"clock",
       {{"counter", i.counter},
        {"frequency_mhz", i.cycles_per_usec},
        {"frequency_source", i.frequency_source},
        {"cpuinfo_mhz", i.cpuinfo_mhz}}},
      {"iterations", o.iterations},
      {"duration_s", o.duration_s},
      {"warmup_iterations", i.warmup},
      {"sizes", o.all_sizes ? "all" : std::to_string(o.size)},
      {"local_address", key_json(i.local_key)},
  };
  if (i.remote_key.qpn || i.remote_key.vaddr) info["remote_address"] = key_json(i.remote_key);
  if (!i.local_keys.empty()) {  // -q: every QP's key fields
    nlohmann::json local = nlohmann::json::array(), remote = nlohmann::json::array();
    for (const auto& k : i.local_keys) local.push_back(key_json(k));
    for (const auto& k : i.remote_keys) remote.push_back(key_json(k));
    info["local_addresses"] = local;
    info["remote_addresses"] = remote;
  }
  if (o.measure == Measure::Bandwidth)
    info["bandwidth_options"] = {{"qps", o.qp_count}, {"bidirectional", o.bidirectional},
                                 {"report_gbits", o.report_gbits}, {"tx_depth", effective_tx_depth(o)},
                                 {"cq_mod", effective_cq_mod(o)}, {"post_list", std::max(o.post_list, 1)},
                                 {"no_peak", o.no_peak}};
  return info;
}

// A bandwidth test's figures of one size: its own, the peer's, per QP.
void add_bandwidth_json(nlohmann::json& j, const SizeResult& sr) {
  j["bandwidth"] = {{"unit", "MB/s (2^20 bytes per second)"},
                    {"bw_peak", sr.bw_peak_mb_per_sec},
                    {"bw_avg", sr.bw_avg_mb_per_sec},
                    {"msg_rate_mpps", sr.msg_rate_mpps}};
  if (sr.min_window_seconds > 0)
    j["bandwidth"].update({{"bw_min_window", sr.bw_min_window_mb_per_sec}, {"min_window_seconds", sr.min_window_seconds}});
  if (sr.bidirectional && sr.remote_report)
    j["bandwidth"].update({{"bidirectional", true},
                           {"bw_peak_total", sr.bw_peak_mb_per_sec + sr.remote_report->bw_peak_mb_per_sec},
                           {"bw_avg_total", sr.bw_avg_mb_per_sec + sr.remote_report->bw_avg_mb_per_sec},
                           {"msg_rate_mpps_total", sr.msg_rate_mpps + sr.remote_report->msg_rate_mpps}});
  if (!sr.per_qp.empty()) {
    nlohmann::json qps = nlohmann::json::array();
    for (const auto& q : sr.per_qp) {
      nlohmann::json qj{{"qpn", q.qpn}, {"messages", q.messages}, {"bw_avg", q.bw_avg_mb_per_sec}};
      if (q.completion_p50_usec > 0)
        qj.update({{"completion_p50_usec", q.completion_p50_usec}, {"completion_p99_usec", q.completion_p99_usec}});
      qps.push_back(qj);
    }
    j["per_qp"] = qps;
  }
  if (sr.completion_latency)
    j["completion_latency"] = {{"statistics", statistics_json(*sr.completion_latency)},
                               {"histogram", histogram_json(sr.completion_latency->histogram)}};
  if (sr.remote_report)
    j["remote_report"] = {{"size", sr.remote_report->size},
                          {"iterations", sr.remote_report->iterations},
                          {"bw_peak", sr.remote_report->bw_peak_mb_per_sec},
                          {"bw_avg", sr.remote_report->bw_avg_mb_per_sec},
                          {"msg_rate_mpps", sr.remote_report->msg_rate_mpps}};
}

// One size's results.
nlohmann::json size_json(const SizeResult& sr, const TestOptions& o) {
  nlohmann::json j{{"size", sr.size}, {"iterations", sr.iterations}, {"elapsed_usec", sr.elapsed_usec}};
  if (sr.stats) {
    j["statistics"] = statistics_json(*sr.stats);
    j["histogram"] = histogram_json(sr.stats->histogram);
  }
  if (sr.perftest_in_cycles) j["perftest_figures_unit"] = "cycles";
  if (sr.perftest) {
    const auto& f = *sr.perftest;
    j["perftest_figures"] = {{"t_min", f.t_min},         {"t_max", f.t_max},   {"t_typical", f.t_typical},
                             {"t_avg", f.t_avg},         {"t_stdev", f.t_stdev}, {"p99", f.p99},
                             {"p99_9", f.p99_9}};
  }
  if (!sr.samples_usec.empty()) j["samples_usec"] = sr.samples_usec;
  if (sr.duration)
    j["duration"] = {{"measured_seconds", sr.duration->seconds},
                     {"t_avg_usec", sr.duration->t_avg_usec},
                     {"tps", sr.duration->tps}};
  if (sr.infinite) {
    const auto& inf = *sr.infinite;
    j["run_infinitely"] = {{"periods", inf.periods},
                           {"total_messages", inf.messages},
                           {"total_seconds", inf.seconds},
                           {"total_bw_avg", inf.seconds > 0 ? static_cast<double>(sr.size) * static_cast<double>(inf.messages) /
                                                                  inf.seconds / 1048576.0
                                                            : 0.0},
                           {"ended_by", inf.ended_by}};
  }
  if (sr.cpu_util)
    j["cpu_util"] = {{"perftest_percent", sr.cpu_util->perftest_percent},
                     {"busy_percent", sr.cpu_util->busy_percent},
                     {"process_percent", sr.cpu_util->process_percent},
                     {"seconds", sr.cpu_util->seconds}};
  if (o.measure == Measure::Bandwidth) add_bandwidth_json(j, sr);
  return j;
}

// The port counters before and after, and what grew.
nlohmann::json port_counters_json(const TestResult& r) {
  nlohmann::json counters{{"before", r.counters_before}, {"after", r.counters_after}};
  nlohmann::json delta = nlohmann::json::object();
  for (const auto& [k, after] : r.counters_after) {
    const auto it = r.counters_before.find(k);
    if (it != r.counters_before.end() && after >= it->second && after != it->second) delta[k] = after - it->second;
  }
  counters["delta"] = delta;
  return counters;
}

}  // namespace

nlohmann::json to_json(const TestResult& r, const TestOptions& o) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& sr : r.sizes) results.push_back(size_json(sr, o));
  return {{"schema", "rdmadiag-perftest"},
          {"schema_version", kReportSchemaVersion},
          {"test_info", test_info_json(r, o)},
          {"results", results},
          {"port_counters", port_counters_json(r)},
          {"warnings", r.warnings},
          {"errors", r.errors},
          {"ok", r.errors.empty()}};
}

nlohmann::json to_perftest_style_json(const TestResult& r, const TestOptions& o) {
  nlohmann::json j = to_json(r, o);
  // perftest's key names for the (last) result line.
  if (!r.sizes.empty()) {
    const auto& sr = r.sizes.back();
    nlohmann::json res{{"MsgSize", sr.size}, {"n_iterations", sr.iterations}};
    if (sr.duration && o.measure == Measure::Latency) {
      res.update({{"t_avg", sr.duration->t_avg_usec}, {"tps_average", sr.duration->tps}});
    } else if (sr.perftest) {
      const auto& f = *sr.perftest;
      res.update({{"t_min", f.t_min}, {"t_max", f.t_max}, {"t_typical", f.t_typical}, {"t_avg", f.t_avg},
                  {"t_stdev", f.t_stdev}, {"percentile_99", f.p99}, {"percentile_99_9", f.p99_9}});
    } else {
      res.update({{"BW_peak", sr.bw_peak_mb_per_sec}, {"BW_average", sr.bw_avg_mb_per_sec}, {"MsgRate", sr.msg_rate_mpps}});
    }
    if (sr.cpu_util) res["CPU_util"] = sr.cpu_util->perftest_percent;
    j["results_perftest"] = res;
  }
  return j;
}

}  // namespace rdmadiag::perftest
