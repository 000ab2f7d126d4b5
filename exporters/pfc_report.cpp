#include "exporters/pfc_report.h"
#include "exporters/text_format.h"

#include <cstdio>

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

namespace {

bool speed_known(const PfcAnalyzer& a) { return a.options().link_bps != 0; }

// A time the analysis knows only with a link speed: null without one.
Json time_us(const PfcAnalyzer& a, double seconds) { return speed_known(a) ? Json(seconds * 1e6) : Json(nullptr); }
Json count_known(const PfcAnalyzer& a, std::uint64_t n) { return speed_known(a) ? Json(n) : Json(nullptr); }

Json priority_json(const PfcAnalyzer& a, std::size_t n, const PriorityPauses& p) {
  Json j;
  j["priority"] = n;
  j["frames"] = p.frames;
  j["xon"] = p.xon;
  j["quanta_total"] = p.quanta_sum;
  j["quanta_max"] = p.quanta_max;
  j["first_frame"] = p.first_frame;
  j["last_frame"] = p.last_frame;
  j["pauses"] = count_known(a, p.pauses);
  j["paused_us"] = time_us(a, p.paused_seconds);
  j["longest_pause_us"] = time_us(a, p.longest_seconds);
  if (speed_known(a) && p.longest_frame) j["longest_pause_frame"] = p.longest_frame;
  j["storms"] = count_known(a, p.storms);
  return j;
}

Json senders_json(const PfcAnalyzer& a) {
  Json arr = Json::array();
  for (const PfcSender& s : a.senders()) {
    Json prios = Json::array();
    for (std::size_t n = 0; n < kPriorities; ++n)
      if (s.priorities[n].frames) prios.push_back(priority_json(a, n, s.priorities[n]));
    arr.push_back({{"mac", mac_string(s.mac)}, {"pause_frames", s.pause_frames}, {"pfc_frames", s.pfc_frames},
                   {"priorities", prios}});
    if (s.point) arr.back()["capture_point"] = s.point - 1;
  }
  return arr;
}

// Stalls of queue pairs that pauses explain (pause_stalls.h); null without a link speed.
Json stalls_json(const PfcAnalyzer& a, std::size_t n) {
  if (!speed_known(a)) return nullptr;
  const PriorityStalls& s = a.stalls().by_priority()[n];
  Json j = {{"count", s.stalls}, {"stalled_us", s.stalled_seconds * 1e6}, {"longest_us", s.longest_seconds * 1e6}};
  if (s.longest_frame) j["longest_frame"] = s.longest_frame;
  return j;
}

Json roce_json(const PfcAnalyzer& a) {
  Json arr = Json::array();
  const RocePriorityCounts& r = a.roce();
  for (std::size_t n = 0; n < kPriorities; ++n)
    if (r.packets[n])
      arr.push_back({{"priority", n},
                     {"packets", r.packets[n]},
                     {"sent_while_paused", count_known(a, r.while_paused[n])},
                     {"qps_while_paused", count_known(a, a.paused_qps().keys[n].size())},
                     {"qps_while_paused_capped", a.paused_qps().capped[n]},
                     {"stalls_in_pauses", stalls_json(a, n)}});
  Json overrides = Json::object();
  const auto defaults = PfcOptions::default_dscp_priority();
  for (std::size_t d = 0; d < defaults.size(); ++d)
    if (a.options().dscp_priority[d] != defaults[d]) overrides[std::to_string(d)] = a.options().dscp_priority[d];
  return {{"by_priority", arr}, {"unmapped", r.unmapped}, {"dscp_priority_overrides", overrides}};
}

}  // namespace

std::string mac_string(const std::array<std::uint8_t, 6>& m) {
  return fmt("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string mac_control_text(const DecodedPacket& p) {
  const MacControl& m = *p.mac_control;
  std::string s = m.is_pause() ? "PAUSE" : m.is_pfc() ? "PFC" : fmt("MAC-Control opcode=0x%04x", m.opcode);
  if (p.eth) s += " from " + mac_string(p.eth->src);
  if (m.is_pause()) s += fmt(" quanta=%u", m.pause_quanta);
  for (std::size_t n = 0; m.is_pfc() && n < kPriorities; ++n)
    if (m.enables(n)) s += fmt(" p%zu=%u", n, m.quanta[n]);
  return s;
}

Json mac_control_json(const DecodedPacket& p) {
  const MacControl& m = *p.mac_control;
  Json j;
  if (p.eth) j["sender"] = mac_string(p.eth->src);
  j["opcode"] = m.opcode;
  if (m.is_pause()) j["pause_quanta"] = m.pause_quanta;
  if (m.is_pfc()) {
    j["enable_vector"] = m.enable_vector;
    j["quanta"] = m.quanta;
  }
  return j;
}

namespace {

// The listed continuous pauses, for the HTML report's timeline.
Json intervals_json(const PfcAnalyzer& a, double origin_s) {
  Json arr = Json::array();
  for (const PauseInterval& p : a.intervals())
    arr.push_back({{"mac", mac_string(p.mac)}, {"priority", p.priority}, {"start_frame", p.start_frame},
                   {"t_s", static_cast<double>(p.start_ns) * 1e-9 - origin_s}, {"length_us", p.length_ns * 1e-3}});
  return {{"pauses", std::move(arr)}, {"not_listed", a.intervals_not_listed()}};
}

}  // namespace

Json pfc_json(const PfcAnalyzer& a, double origin_s) {
  Json j;
  j["link_speed_bps"] = speed_known(a) ? Json(a.options().link_bps) : Json(nullptr);
  j["storm_threshold_us"] = a.options().storm_seconds * 1e6;
  j["mac_control_frames"] = a.mac_control_frames();
  j["other_opcode_frames"] = a.other_opcode_frames();
  j["untracked_frames"] = a.untracked_frames();
  j["senders"] = senders_json(a);
  j["roce"] = roce_json(a);
  j["timeline"] = intervals_json(a, origin_s);
  return j;
}

void write_pfc_text(std::ostream& out, const PfcAnalyzer& a) {
  if (!a.any()) return;
  const bool known = speed_known(a);
  out << fmt("\nPause frames (802.3x PAUSE, 802.1Qbb PFC): %llu MAC Control frames, link speed %s, storm threshold %.3f ms\n",
             static_cast<unsigned long long>(a.mac_control_frames()),
             known ? fmt("%.3f Gb/s", static_cast<double>(a.options().link_bps) / 1e9).c_str()
                   : "unknown (--link-speed): pause times unknown",
             a.options().storm_seconds * 1e3);
  out << fmt("  %-17s %4s %8s %6s %10s %7s %13s %13s %6s\n", "sender", "prio", "frames", "XON", "max quanta", "pauses",
             "paused", "longest", "storms");
  for (const PfcSender& s : a.senders())
    for (std::size_t n = 0; n < kPriorities; ++n) {
      const PriorityPauses& p = s.priorities[n];
      if (!p.frames) continue;
      out << fmt("  %-17s %4zu %8llu %6llu %10u %7s %13s %13s %6s\n", mac_string(s.mac).c_str(), n,
                 static_cast<unsigned long long>(p.frames), static_cast<unsigned long long>(p.xon), p.quanta_max,
                 known ? std::to_string(p.pauses).c_str() : "-",
                 known ? fmt("%.3f ms", p.paused_seconds * 1e3).c_str() : "unknown",
                 known ? fmt("%.3f ms", p.longest_seconds * 1e3).c_str() : "unknown",
                 known ? std::to_string(p.storms).c_str() : "-");
    }
  if (a.untracked_frames())
    out << fmt("  (%llu frames from senders past the %zu tracked)\n", static_cast<unsigned long long>(a.untracked_frames()),
               PfcAnalyzer::kMaxSenders);
  const RocePriorityCounts& r = a.roce();
  out << "  RoCE packets by priority (VLAN PCP, else DSCP through the map):";
  bool none = true;
  for (std::size_t n = 0; n < kPriorities; ++n) {
    if (!r.packets[n]) continue;
    none = false;
    out << fmt(" %zu: %llu", n, static_cast<unsigned long long>(r.packets[n]));
    if (known)
      out << fmt(" (%llu while paused, to %s%zu QPs; %llu QP stalls in pauses, longest %.3f ms)",
                 static_cast<unsigned long long>(r.while_paused[n]), a.paused_qps().capped[n] ? "at least " : "",
                 a.paused_qps().keys[n].size(), static_cast<unsigned long long>(a.stalls().by_priority()[n].stalls),
                 a.stalls().by_priority()[n].longest_seconds * 1e3);
  }
  out << (none ? " none\n" : "\n");
}

std::string mac_string(std::uint64_t mac48) {
  std::array<std::uint8_t, 6> mac{};
  for (std::size_t i = 0; i < mac.size(); ++i) mac[i] = static_cast<std::uint8_t>(mac48 >> (8 * (5 - i)));
  return mac_string(mac);
}

std::string explain_pause(const Anomaly& a) {
  return fmt("pause storm: %s paused priority %d for %.3f ms from frame %llu (%u pause frames, refreshes merged)",
             mac_string(a.mac).c_str(), a.priority, a.duration_us / 1e3, static_cast<unsigned long long>(a.frame), a.count);
}

}  // namespace rdmadiag::exporters
