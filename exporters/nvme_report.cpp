#include "exporters/nvme_report.h"

#include <cstdio>
#include <iomanip>
#include <ostream>

#include "exporters/printable.h"
#include "exporters/text_format.h"

namespace rdmadiag::exporters {

namespace {

using decode::NvmeAnalyzer;
using decode::NvmeCommandResult;
using decode::NvmeQueueKey;

// IPv4 addresses sit in the first 4 bytes of the 16 (the rest zero).
std::string address(const decode::IpAddress& a) {
  bool v4 = true;
  for (std::size_t i = 4; i < a.size(); ++i) v4 = v4 && a[i] == 0;
  char buf[48];
  if (v4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
    return buf;
  }
  std::string s;
  for (std::size_t i = 0; i < a.size(); i += 2) {
    std::snprintf(buf, sizeof buf, "%s%x", i ? ":" : "", a[i] << 8 | a[i + 1]);
    s += buf;
  }
  return s;
}

std::string join_tab(const std::vector<std::string>& fields) {
  std::string s;
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? "\t" : "") + fields[i];
  return s;
}

std::string qid_text(std::uint16_t qid) {
  return qid == decode::kNvmeUnknownQid ? std::string("unknown") : std::to_string(qid);
}

std::string hex_field(std::uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

Json queue_key_json(const NvmeQueueKey& k) {
  Json j = {{"host", address(k.host)}, {"controller", address(k.controller)},
            {"qid", k.qid == decode::kNvmeUnknownQid ? Json(nullptr) : Json(k.qid)}};
  if (k.point) j["capture_point"] = k.point - 1;  // as analyze's flows (docs/json-schema.md)
  return j;
}

// Transport events per kind (the kinds with any).
template <typename Counts>
Json causes_json(const Counts& counts) {
  Json j = Json::object();
  for (std::size_t k = 0; k < counts.size(); ++k)
    if (counts[k]) j[std::string(decode::nvme_cause_name(static_cast<decode::NvmeCause>(k)))] = counts[k];
  return j;
}

// kind=count;... for the tables.
std::string causes_field(const std::array<std::uint32_t, decode::kNvmeCauseKinds>& counts) {
  std::string s;
  for (std::size_t k = 0; k < counts.size(); ++k)
    if (counts[k])
      s.append(s.empty() ? "" : ";")
          .append(decode::nvme_cause_name(static_cast<decode::NvmeCause>(k)))
          .append("=")
          .append(std::to_string(counts[k]));
  return s;
}

std::string causes_text(const std::array<std::uint32_t, decode::kNvmeCauseKinds>& counts) {
  std::string s;
  for (std::size_t k = 0; k < counts.size(); ++k)
    if (counts[k])
      s += (s.empty() ? "" : ", ") + std::to_string(counts[k]) + " " + std::string(decode::nvme_cause_name(static_cast<decode::NvmeCause>(k)));
  return s;
}

// The RDMA READ/WRITE data of a keyed SGL and how the command was completed.
Json data_json(const NvmeCommandResult& r) {
  Json j = {{"sgl_key", r.sgl_key}, {"sgl_address", r.sgl_address}, {"sgl_invalidate", r.sgl_invalidate},
            {"operations", r.data_operations}, {"bytes", r.data_bytes}};
  j["first_frame"] = r.data_first_frame ? Json(r.data_first_frame) : Json(nullptr);
  j["last_frame"] = r.data_last_frame ? Json(r.data_last_frame) : Json(nullptr);
  j["transfer_us"] = r.data_first_frame ? Json(r.data_transfer_us()) : Json(nullptr);
  j["remote_invalidate"] = r.remote_invalidate;
  if (r.remote_invalidate) j["invalidated_key"] = r.invalidated_key;
  return j;
}

Json command_json(const NvmeCommandResult& r) {
  Json j = queue_key_json(r.queue);
  j["command_frame"] = r.command_frame;
  j["response_frame"] = r.response_frame ? Json(r.response_frame) : Json(nullptr);
  j["cid"] = r.cid;
  j["command"] = std::string(r.name());
  j["opcode"] = r.fabrics ? 0x7F : r.opcode;
  if (r.fabrics) j["fctype"] = r.fctype;
  j["nsid"] = r.nsid;
  if (r.blocks) {
    j["slba"] = r.slba;
    j["blocks"] = r.blocks;
  }
  j["data_bytes"] = r.data_len;
  j["latency_us"] = r.latency_us >= 0 ? Json(r.latency_us) : Json(nullptr);
  if (r.response_frame) {
    j["status"] = r.status;
    j["status_name"] = std::string(r.status_name());
  }
  j["transport_events"] = r.transport_events;
  j["first_event_frame"] = r.first_event_frame ? Json(r.first_event_frame) : Json(nullptr);
  j["causes"] = causes_json(r.causes);
  if (!r.response_frame) j["completion_maybe_uncaptured"] = r.completion_maybe_uncaptured;
  if (r.sgl_key || r.sgl_address) j["data"] = data_json(r);
  return j;
}

// The queue's timeline: per bin, the most commands outstanding, completions and
// bytes; rates over the queue's active span (first to last capsule).
Json timeline_json(const decode::NvmeQueueStats& q) {
  const decode::NvmeTimeline& t = q.timeline;
  Json depth = Json::array(), done = Json::array(), bytes = Json::array();
  for (std::size_t i = 0; i < t.bins(); ++i) {
    depth.push_back(t.bin(i).max_outstanding);
    done.push_back(t.bin(i).completions);
    bytes.push_back(t.bin(i).bytes);
  }
  return {{"start_offset_ns", t.start_ns() - q.first_ns}, {"bin_us", static_cast<double>(t.bin_ns()) / 1e3},
          {"max_outstanding", depth}, {"completions", done}, {"bytes", bytes}};
}

Json queue_json(const decode::NvmeQueueStats& q) {
  Json j = queue_key_json(q.key);
  j["first_frame"] = q.first_frame;
  j["first_ns"] = q.first_ns;  // capture clock
  j["connect_seen"] = q.connect_seen;
  j["sqsize"] = q.connect_seen ? Json(q.sqsize) : Json(nullptr);
  j["kato_ms"] = q.connect_seen ? Json(q.kato_ms) : Json(nullptr);
  if (!q.subnqn.empty()) j["subnqn"] = q.subnqn;
  if (!q.hostnqn.empty()) j["hostnqn"] = q.hostnqn;
  j["commands"] = q.commands;
  j["completed"] = q.completed;
  j["io_completed"] = q.io_completed;
  j["errors"] = q.errors;
  j["unanswered"] = q.unanswered;
  j["read_bytes"] = q.read_bytes;
  j["write_bytes"] = q.write_bytes;
  j["max_outstanding"] = q.max_outstanding;
  j["transport_events"] = q.transport_events;
  j["causes"] = causes_json(q.causes);
  j["untracked_commands"] = q.outstanding_dropped;
  const double span_s = static_cast<double>(q.last_ns - q.first_ns) / 1e9;
  j["active_s"] = span_s;
  j["iops"] = span_s > 0 ? static_cast<double>(q.io_completed) / span_s : 0.0;
  j["read_mb_per_s"] = span_s > 0 ? static_cast<double>(q.read_bytes) / span_s / 1e6 : 0.0;
  j["write_mb_per_s"] = span_s > 0 ? static_cast<double>(q.write_bytes) / span_s / 1e6 : 0.0;
  j["timeline"] = timeline_json(q);
  return j;
}

const char* kind_name(std::size_t kind) {
  static const char* const names[] = {"unknown_queue", "admin", "io", "fabrics"};
  return names[kind];
}

// null when nothing completed: no latency was measured (not 0 us).
Json latency_json(const decode::LatencyHistogram& h) {
  if (!h.n) return nullptr;
  return {{"min", h.min_us}, {"mean", h.sum_us / static_cast<double>(h.n)},
          {"p50_le", h.percentile_upper_us(0.5)}, {"p90_le", h.percentile_upper_us(0.9)},
          {"p99_le", h.percentile_upper_us(0.99)}, {"max", h.max_us}};
}

// The non-empty buckets: upper bounds and counts (the shape of analyze's latency_histograms).
Json histogram_json(const decode::LatencyHistogram& h) {
  Json le = Json::array(), counts = Json::array();
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (!h.counts[i]) continue;
    le.push_back(decode::LatencyHistogram::bucket_upper_us(i));
    counts.push_back(h.counts[i]);
  }
  return {{"le_us", le}, {"counts", counts}};
}

Json opcodes_json(const NvmeAnalyzer& a) {
  Json arr = Json::array();
  for (std::size_t i = 0; i < a.by_opcode().size(); ++i) {
    const decode::NvmeOpcodeStats& s = a.by_opcode()[i];
    if (!s.commands) continue;
    NvmeCommandResult probe;
    probe.fabrics = i / 256 == 3;
    probe.kind = static_cast<decode::NvmeQueueKind>(probe.fabrics ? 0 : i / 256);
    probe.opcode = probe.fctype = static_cast<std::uint8_t>(i % 256);
    const auto& h = s.latency;
    arr.push_back({{"queue_kind", kind_name(i / 256)}, {"command", std::string(probe.name())},
                   {"opcode", probe.fabrics ? 0x7F : probe.opcode}, {"commands", s.commands},
                   {"completed", s.completed}, {"errors", s.errors}, {"bytes", s.bytes},
                   {"latency_us", latency_json(h)}, {"histogram", histogram_json(h)}});
  }
  return arr;
}

// I/O reads and writes by data size class.
Json sizes_json(const NvmeAnalyzer& a) {
  Json arr = Json::array();
  for (std::size_t i = 0; i < a.by_size().size(); ++i) {
    const decode::NvmeOpcodeStats& s = a.by_size()[i];
    if (!s.completed) continue;
    const std::size_t c = i % decode::kNvmeSizeClasses;
    const std::uint64_t upper = decode::nvme_size_class_upper(c);
    arr.push_back({{"command", i < decode::kNvmeSizeClasses ? "read" : "write"},
                   {"size_gt", c ? decode::nvme_size_class_upper(c - 1) : 0},
                   {"size_le", upper ? Json(upper) : Json(nullptr)}, {"completed", s.completed}, {"errors", s.errors},
                   {"bytes", s.bytes}, {"latency_us", latency_json(s.latency)}});
  }
  return arr;
}

}  // namespace

Json nvme_json(const NvmeAnalyzer& a) {
  const decode::NvmeTotals& t = a.totals();
  Json j = {{"nvme_schema_version", kNvmeSchemaVersion}, {"tool", "rdmadiag nvme"}};
  j["totals"] = {{"queue_pairs", t.queue_pairs}, {"capsules", t.capsules}, {"commands", t.commands},
                 {"responses", t.responses}, {"completed", t.completed}, {"errors", t.errors},
                 {"unanswered", t.unanswered}, {"unanswered_maybe_uncaptured", t.unanswered_maybe_uncaptured},
                 {"unmatched_responses", t.unmatched_responses},
                 {"commands_on_unknown_queue", t.unbound_commands}, {"duplicate_cids", t.duplicate_cids},
                 {"resent_commands", t.resent_commands}, {"resent_responses", t.resent_responses},
                 {"truncated_capsules", t.truncated_capsules}, {"malformed_capsules", t.malformed_capsules},
                 {"queue_limit_reached", t.queue_cap_reached}, {"data_packets", t.data_packets},
                 {"unmatched_data_packets", t.unmatched_data_packets}, {"remote_invalidates", t.remote_invalidates},
                 {"invalidate_mismatches", t.invalidate_mismatches}, {"iwarp_segments", t.iwarp_segments}};
  Json queues = Json::array();
  for (const auto& q : a.queues()) queues.push_back(queue_json(q));
  j["queues"] = queues;
  j["by_command"] = opcodes_json(a);
  j["by_size"] = sizes_json(a);
  Json slow = Json::array();
  for (const auto& r : a.slowest()) slow.push_back(command_json(r));
  j["slowest"] = slow;
  Json unanswered = Json::array();
  for (const auto& r : a.unanswered()) unanswered.push_back(command_json(r));
  j["unanswered"] = unanswered;
  return j;
}

namespace {

void write_queues_text(std::ostream& out, const NvmeAnalyzer& a) {
  for (const auto& q : a.queues()) {
    out << "  queue " << qid_text(q.key.qid) << "  host " << address(q.key.host) << " -> controller "
        << address(q.key.controller) << point_label(q.key.point) << "  sqsize "
        << (q.connect_seen ? std::to_string(q.sqsize) + " (" + std::to_string(q.sqsize + 1) + " entries)"
                        : "unknown (no Connect seen: QID from a completion)") << "  commands " << q.commands << "  completed "
        << q.completed << "  errors " << q.errors << "  unanswered " << q.unanswered << "  max outstanding "
        << q.max_outstanding << "  transport events " << q.transport_events << '\n';
    const double span_s = static_cast<double>(q.last_ns - q.first_ns) / 1e9;
    if (span_s > 0 && (q.read_bytes || q.write_bytes))
      out << "    " << std::fixed << std::setprecision(1) << static_cast<double>(q.io_completed) / span_s << " IOPS" << std::setprecision(3) << "  read "
          << static_cast<double>(q.read_bytes) / span_s / 1e6 << " MB/s  write " << static_cast<double>(q.write_bytes) / span_s / 1e6
          << " MB/s over " << std::setprecision(3) << span_s << std::defaultfloat << " s\n";
    if (!q.subnqn.empty()) out << "    subsystem " << printable(q.subnqn) << "  host " << printable(q.hostnqn) << '\n';
  }
}

// One line per row of opcodes_json / sizes_json.
void write_latency_rows(std::ostream& out, const char* title, const Json& rows) {
  if (rows.empty()) return;
  out << title << '\n';
  for (const auto& row : rows) {
    std::string what = row.contains("queue_kind") ? row["queue_kind"].get<std::string>() : std::string();
    if (row.contains("size_le"))
      what = row["size_le"].is_null() ? "> " + std::to_string(row["size_gt"].get<std::uint64_t>()) + " B"
                                      : "<= " + std::to_string(row["size_le"].get<std::uint64_t>()) + " B";
    const Json& l = row["latency_us"];
    const auto done = row["completed"].get<std::uint64_t>();
    char buf[320];
    std::snprintf(buf, sizeof buf, "  %-10s %-22s %6llu done, err %4llu", what.c_str(), row["command"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(row["errors"].get<std::uint64_t>()));
    out << buf;
    if (done == 0) {  // no latency was measured: none to print
      out << "  (" << row.value("commands", std::uint64_t{0}) << " sent, none completed in the capture)\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "  min %.1f  p50<= %.1f  p90<= %.1f  p99<= %.1f  max %.1f us\n", l["min"].get<double>(),
                  l["p50_le"].get<double>(), l["p90_le"].get<double>(), l["p99_le"].get<double>(), l["max"].get<double>());
    out << buf;
  }
}

void write_command_list(std::ostream& out, const char* title, const std::vector<NvmeCommandResult>& list) {
  if (list.empty()) return;
  out << title << '\n';
  char buf[256];
  for (const auto& r : list) {
    std::snprintf(buf, sizeof buf, "  frame %-7llu queue %-7s cid %-6s %-22s", static_cast<unsigned long long>(r.command_frame),
                  qid_text(r.queue.qid).c_str(), hex_field(r.cid, 4).c_str(), std::string(r.name()).c_str());
    out << buf;
    if (r.blocks) out << " lba " << r.slba << "+" << r.blocks;
    if (r.response_frame)
      out << "  " << std::fixed << std::setprecision(1) << r.latency_us << std::defaultfloat << " us  " << r.status_name() << "  transport events " << r.transport_events;
    if (r.first_event_frame) out << " (first at frame " << r.first_event_frame << (r.transport_events ? ": " + causes_text(r.causes) : std::string()) << ")";
    if (r.data_first_frame)
      out << "  data " << r.data_bytes << " B in " << std::fixed << std::setprecision(1) << r.data_transfer_us()
          << std::defaultfloat << " us (frames " << r.data_first_frame << "-" << r.data_last_frame << ")";
    // The controller completes an Asynchronous Event Request only when an event occurs.
    if (!r.response_frame && r.kind == decode::NvmeQueueKind::admin && !r.fabrics && r.opcode == 0x0C)
      out << "  (waits for an event by design)";
    if (!r.response_frame && r.completion_maybe_uncaptured) out << "  (bytes its completion could be in were not captured)";
    out << '\n';
  }
}

}  // namespace

void write_nvme_text(std::ostream& out, const NvmeAnalyzer& a) {
  const decode::NvmeTotals& t = a.totals();
  out << "NVMe over Fabrics (RDMA)\n";
  out << "  queue pairs " << t.queue_pairs << "  commands " << t.commands << "  responses " << t.responses
      << "  completed " << t.completed << "  errors " << t.errors << "  unanswered " << t.unanswered
      << "  unmatched responses " << t.unmatched_responses << '\n';
  if (t.resent_commands || t.resent_responses)
    out << "  resent by RDMA (counted once): " << t.resent_commands << " command capsules, " << t.resent_responses
        << " response capsules\n";
  if (t.data_packets || t.unmatched_data_packets || t.remote_invalidates)
    out << "  RDMA data packets matched to a keyed SGL " << t.data_packets << ", unmatched " << t.unmatched_data_packets
        << "  completions by SEND with Invalidate " << t.remote_invalidates << " (key not the command's: "
        << t.invalidate_mismatches << ")\n";
  if (t.iwarp_segments)
    out << "  " << t.iwarp_segments
        << " TCP segments with data on the NVMe-oF port (NVMe over iWARP: transport events are TCP holes and "
           "retransmissions on the command's connection)\n";
  if (t.queue_pairs == 0 && !t.iwarp_segments)
    out << "  no NVMe queue pair found: no rdma_cm REQ/REP for the NVMe-oF port was captured (--port, or --assume-all "
           "to take capsule-shaped RC SENDs for NVMe)\n";
  if (t.truncated_capsules || t.malformed_capsules)
    out << "  capsules not decoded: " << t.truncated_capsules << " cut short by the snap length, " << t.malformed_capsules
        << " shorter on the wire than an SQE\n";
  if (t.unanswered_maybe_uncaptured)
    out << "  " << t.unanswered_maybe_uncaptured
        << " of the unanswered were outstanding while bytes from the controller were cut by the snap length: their "
           "completions may be there\n";
  if (t.duplicate_cids)
    out << "  " << t.duplicate_cids
        << " CIDs reused while their command was outstanding (that command's completion is not in the capture: "
           "counted unanswered)\n";
  if (t.unbound_commands)
    out << "  " << t.unbound_commands
        << " commands on queue pairs whose NVMe queue is unknown (no Connect seen): decoded, queue kind unknown, not paired\n";
  write_queues_text(out, a);
  write_latency_rows(out, "by command (latency: capture point, submit -> completion; p50/p90/p99 are bucket upper bounds)",
                     opcodes_json(a));
  write_latency_rows(out, "by size (I/O reads and writes; size: data bytes up to)", sizes_json(a));
  write_command_list(out, "slowest commands", a.slowest());
  write_command_list(out, "commands with no completion in the capture", a.unanswered());
}

std::string nvme_capsule_header() {
  return "frame\tkind\thost\tcontroller\tqid\tcid\topcode\tfctype\tnsid\tslba\tblocks\tsgl_type\tsgl_subtype\t"
         "sgl_address\tsgl_length\tsgl_key\tconnect_qid\tsqsize\tproperty_offset\tsqid\tsqhd\tstatus\tpaired_frame\tlatency_us";
}

std::string nvme_capsule_line(const decode::NvmeCapsuleRecord& r) {
  std::string s = std::to_string(r.frame) + (r.command ? "\tcommand\t" : "\tresponse\t") + address(r.queue.host) + "\t" +
                  address(r.queue.controller) + "\t" + qid_text(r.queue.qid) + "\t";
  const auto field = [&s](const std::string& v) { s += v + "\t"; };
  if (r.command) {
    const decode::NvmeCommand& c = r.cmd;
    field(std::to_string(c.cid));
    field(hex_field(c.opcode, 2));
    field(c.fabrics() ? hex_field(c.fctype, 2) : "");
    field(c.fabrics() ? "" : std::to_string(c.nsid));
    field(std::to_string(c.slba()));
    field(std::to_string(c.blocks()));
    field(std::to_string(c.sgl.type));
    field(std::to_string(c.sgl.subtype));
    field(hex_field(c.sgl.address, 16));
    field(std::to_string(c.sgl.length));
    field(hex_field(c.sgl.key, 8));
    field(c.is(decode::FabricsType::connect) ? std::to_string(c.qid) : "");
    field(c.is(decode::FabricsType::connect) ? std::to_string(c.sqsize) : "");
    field(c.is(decode::FabricsType::property_get) || c.is(decode::FabricsType::property_set) ? hex_field(c.property_offset, 2) : "");
    s += "\t\t\t\t";
  } else {
    s += std::to_string(r.cqe.cid) + "\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
    field(std::to_string(r.cqe.sqid));
    field(std::to_string(r.cqe.sqhd));
    field(hex_field(r.cqe.status >> 1, 4));
    field(r.paired_frame ? std::to_string(r.paired_frame) : "");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", r.latency_us);
    s += r.latency_us >= 0 ? buf : "";
  }
  return s;
}

std::vector<std::string> nvme_command_columns() {
  return {"command_frame", "response_frame", "host", "controller", "qid", "cid", "command", "slba", "blocks",
          "data_bytes", "latency_us", "status", "status_name", "transport_events", "first_event_frame", "sgl_key",
          "data_operations", "data_moved_bytes", "data_first_frame", "data_last_frame", "data_transfer_us", "invalidated_key", "causes"};
}

std::string nvme_command_header() { return join_tab(nvme_command_columns()); }

std::vector<std::string> nvme_command_fields(const decode::NvmeCommandResult& r) {
  const auto frame_or_empty = [](std::uint64_t f) { return f ? std::to_string(f) : std::string(); };
  const auto fixed3 = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };
  return {std::to_string(r.command_frame), std::to_string(r.response_frame), address(r.queue.host),
          address(r.queue.controller), qid_text(r.queue.qid), std::to_string(r.cid), std::string(r.name()),
          r.blocks ? std::to_string(r.slba) : "", r.blocks ? std::to_string(r.blocks) : "", std::to_string(r.data_len),
          fixed3(r.latency_us), hex_field(r.status, 4), std::string(r.status_name()), std::to_string(r.transport_events),
          frame_or_empty(r.first_event_frame), r.sgl_key || r.sgl_address ? hex_field(r.sgl_key, 8) : "",
          std::to_string(r.data_operations), std::to_string(r.data_bytes), frame_or_empty(r.data_first_frame),
          frame_or_empty(r.data_last_frame), r.data_first_frame ? fixed3(r.data_transfer_us()) : "",
          r.remote_invalidate ? hex_field(r.invalidated_key, 8) : "", causes_field(r.causes)};
}

std::string nvme_command_line(const decode::NvmeCommandResult& r) { return join_tab(nvme_command_fields(r)); }

}  // namespace rdmadiag::exporters
