// Prometheus text and --stats rendering of a switch snapshot (docs/SWITCH.md, "Metrics").
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "src/switch/daemon.hpp"

namespace inc::sw {

namespace {
void counter(std::string& out, const char* metric, const char* help, const std::string& labels,
             std::uint64_t v, bool gauge = false) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %" PRIu64 "\n", metric, help,
                metric, gauge ? "gauge" : "counter", metric, labels.c_str(), v);
  out += buf;
}
void sample(std::string& out, const char* metric, const std::string& labels, std::uint64_t v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s{%s} %" PRIu64 "\n", metric, labels.c_str(), v);
  out += buf;
}
std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '\\' || c == '"') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}
}  // namespace

std::string render_prometheus(const SwitchSnapshot& s, const std::string& switch_name) {
  std::string out;
  const std::string sw = "switch=\"" + escape(switch_name) + "\"";
  const auto& c = s.counters;
  counter(out, "inc_switch_packets_in_total", "Datagrams received.", sw, c.packets_in);
  counter(out, "inc_switch_packets_out_total", "Datagrams sent.", sw, c.packets_out);
  counter(out, "inc_switch_bytes_in_total", "Bytes received.", sw, c.bytes_in);
  counter(out, "inc_switch_bytes_out_total", "Bytes sent.", sw, c.bytes_out);
  counter(out, "inc_switch_aggregations_total", "Chunks whose members all contributed here.", sw, c.aggregations);
  counter(out, "inc_switch_results_total", "Chunks completed (root) or whose parent result arrived.", sw, c.results);
  counter(out, "inc_switch_retransmissions_total", "Data packets flagged as retransmissions (probes not included).", sw, c.retransmissions);
  counter(out, "inc_switch_probes_total", "Header-only probes: members asking about a chunk instead of resending it.", sw, c.probes);
  counter(out, "inc_switch_duplicates_total", "Contributions already counted (never added twice).", sw, c.duplicates);
  counter(out, "inc_switch_results_resent_total", "Results sent again to members that missed them.", sw, c.results_resent);
  counter(out, "inc_switch_results_multicast_total", "Results sent once to the job's multicast group instead of to each member.", sw, c.results_multicast);
  counter(out, "inc_switch_upstream_resent_total", "Partial aggregates sent to the parent again.", sw, c.upstream_resent);
  counter(out, "inc_switch_gaps_signalled_total", "Members told at once that a packet of theirs is missing (a later one arrived).", sw, c.gaps_signalled);
  out += "# HELP inc_switch_drops_total Packets dropped, by reason.\n# TYPE inc_switch_drops_total counter\n";
  for (int r = 1; r < proto::kNumReasons; ++r)
    sample(out, "inc_switch_drops_total",
           sw + ",reason=\"" + std::string(proto::name(proto::Reason(r))) + "\"",
           c.drops_by_reason[std::size_t(r)]);
  counter(out, "inc_switch_jobs_admitted_total", "Jobs admitted.", sw, c.jobs_admitted);
  counter(out, "inc_switch_jobs_released_total", "Jobs released.", sw, c.jobs_released);
  counter(out, "inc_switch_jobs_expired_total", "Jobs released after idling.", sw, c.jobs_expired);
  counter(out, "inc_switch_jobs_failed_total", "Jobs failed (parent lost its state).", sw, c.jobs_failed);
  counter(out, "inc_switch_slots", "Slots in the aggregator pool.", sw, s.slots_total, true);
  counter(out, "inc_switch_slots_allocated", "Slots allocated to jobs.", sw, s.slots_allocated, true);
  counter(out, "inc_switch_slot_elements", "4-byte cells per slot copy.", sw, s.slot_elems, true);
  counter(out, "inc_switch_jobs", "Jobs admitted now.", sw, s.jobs.size(), true);
  {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "# HELP inc_switch_cpu_seconds_total CPU time of the data-plane threads.\n"
                  "# TYPE inc_switch_cpu_seconds_total counter\ninc_switch_cpu_seconds_total{%s} %.6f\n",
                  sw.c_str(), s.cpu_seconds);
    out += buf;
  }
  counter(out, "inc_switch_lanes", "Data-plane lanes (threads, ports PORT..PORT+lanes-1).", sw,
          std::max<std::size_t>(s.lanes.size(), 1), true);
  // Per lane: the same traffic, labelled, and the CPU time of the lane's thread (a lane near
  // one CPU second per second is the bottleneck).
  if (!s.lanes.empty()) {
    struct LaneCol {
      const char* metric;
      const char* help;
      std::uint64_t TrafficCounters::*f;
    };
    static const LaneCol lane_cols[] = {
        {"inc_switch_lane_packets_in_total", "Datagrams received by the lane.", &TrafficCounters::packets_in},
        {"inc_switch_lane_packets_out_total", "Datagrams sent by the lane.", &TrafficCounters::packets_out},
        {"inc_switch_lane_bytes_in_total", "Bytes received by the lane.", &TrafficCounters::bytes_in},
        {"inc_switch_lane_bytes_out_total", "Bytes sent by the lane.", &TrafficCounters::bytes_out},
        {"inc_switch_lane_aggregations_total", "Chunks aggregated by the lane.", &TrafficCounters::aggregations},
        {"inc_switch_lane_drops_total", "Packets dropped by the lane.", &TrafficCounters::drops},
    };
    for (const auto& col : lane_cols) {
      out += std::string("# HELP ") + col.metric + " " + col.help + "\n# TYPE " + col.metric + " counter\n";
      for (const auto& l : s.lanes)
        sample(out, col.metric, sw + ",lane=\"" + std::to_string(l.lane) + "\"", l.counters.*(col.f));
    }
    out += "# HELP inc_switch_lane_cpu_seconds_total CPU time of the lane's thread.\n"
           "# TYPE inc_switch_lane_cpu_seconds_total counter\n";
    for (const auto& l : s.lanes) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "inc_switch_lane_cpu_seconds_total{%s,lane=\"%u\"} %.6f\n", sw.c_str(),
                    unsigned(l.lane), l.cpu_seconds);
      out += buf;
    }
    out += "# HELP inc_switch_lane_slots_allocated Slots of the lane's pool allocated to jobs.\n"
           "# TYPE inc_switch_lane_slots_allocated gauge\n";
    for (const auto& l : s.lanes)
      sample(out, "inc_switch_lane_slots_allocated", sw + ",lane=\"" + std::to_string(l.lane) + "\"",
             l.slots_allocated);
  }
  struct Col {
    const char* metric;
    const char* help;
    std::uint64_t TrafficCounters::*f;
  };
  static const Col cols[] = {
      {"inc_job_packets_in_total", "Datagrams of the job received.", &TrafficCounters::packets_in},
      {"inc_job_packets_out_total", "Datagrams of the job sent.", &TrafficCounters::packets_out},
      {"inc_job_bytes_in_total", "Bytes of the job received.", &TrafficCounters::bytes_in},
      {"inc_job_bytes_out_total", "Bytes of the job sent.", &TrafficCounters::bytes_out},
      {"inc_job_aggregations_total", "Chunks of the job aggregated here.", &TrafficCounters::aggregations},
      {"inc_job_retransmissions_total", "Data retransmissions of the job seen.", &TrafficCounters::retransmissions},
      {"inc_job_probes_total", "Probes of the job seen.", &TrafficCounters::probes},
      {"inc_job_duplicates_total", "Duplicate contributions of the job.", &TrafficCounters::duplicates},
      {"inc_job_drops_total", "Packets of the job dropped.", &TrafficCounters::drops},
  };
  for (const auto& col : cols) {
    if (s.jobs.empty()) break;
    out += std::string("# HELP ") + col.metric + " " + col.help + "\n# TYPE " + col.metric + " counter\n";
    for (const auto& j : s.jobs)
      sample(out, col.metric, sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.counters.*(col.f));
  }
  if (!s.jobs.empty()) {
    out += "# HELP inc_job_slots Slots owned by the job.\n# TYPE inc_job_slots gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_slots", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.spec.slots);
    out += "# HELP inc_job_busy_copies Slot copies holding an aggregation in progress.\n# TYPE inc_job_busy_copies gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_busy_copies", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.busy_copies);
    out += "# HELP inc_job_members_joined Members currently joined.\n# TYPE inc_job_members_joined gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_members_joined", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.joined);
    out += "# HELP inc_job_failed 1 if the job failed upstream.\n# TYPE inc_job_failed gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_failed", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.failed);
  }
  return out;
}

std::string render_stats(const SwitchSnapshot& s, const std::string& switch_name) {
  std::string out;
  char b[512];
  const auto& c = s.counters;
  std::snprintf(b, sizeof b,
                "switch %s: packets in %" PRIu64 " out %" PRIu64 ", bytes in %" PRIu64 " out %" PRIu64
                ", aggregations %" PRIu64 ", results %" PRIu64 ", retransmissions %" PRIu64
                ", duplicates %" PRIu64 ", results resent %" PRIu64 ", results multicast %" PRIu64 ", gaps signalled %" PRIu64
                ", probes %" PRIu64 ", drops %" PRIu64 ", slots %u/%u allocated, cpu %.3f s\n",
                switch_name.c_str(), c.packets_in, c.packets_out, c.bytes_in, c.bytes_out,
                c.aggregations, c.results, c.retransmissions, c.duplicates, c.results_resent,
                c.results_multicast, c.gaps_signalled, c.probes, c.drops, s.slots_allocated, s.slots_total, s.cpu_seconds);
  out += b;
  for (const auto& l : s.lanes) {
    std::snprintf(b, sizeof b,
                  "  lane %u %s: packets in %" PRIu64 " out %" PRIu64 ", bytes in %" PRIu64 " out %" PRIu64
                  ", aggregations %" PRIu64 ", drops %" PRIu64 ", slots %u/%u, cpu %.3f s\n",
                  unsigned(l.lane), l.endpoint.str().c_str(), l.counters.packets_in, l.counters.packets_out,
                  l.counters.bytes_in, l.counters.bytes_out, l.counters.aggregations, l.counters.drops,
                  l.slots_allocated, l.slots_total, l.cpu_seconds);
    out += b;
  }
  for (int r = 1; r < proto::kNumReasons; ++r)
    if (c.drops_by_reason[std::size_t(r)]) {
      std::snprintf(b, sizeof b, "  drops %-16s %" PRIu64 "\n",
                    std::string(proto::name(proto::Reason(r))).c_str(), c.drops_by_reason[std::size_t(r)]);
      out += b;
    }
  if (s.faults_enabled) {
    std::snprintf(b, sizeof b,
                  "  faults injected into the datagrams it sent: lost %" PRIu64 ", duplicated %" PRIu64
                  ", reordered %" PRIu64 "\n",
                  s.faults_injected.lost, s.faults_injected.duplicated, s.faults_injected.reordered);
    out += b;
  }
  for (const auto& j : s.jobs) {
    std::snprintf(b, sizeof b,
                  "  job %u: members %u (joined %u)%s, slots %u%s at %u (busy copies %u), in %" PRIu64
                  " out %" PRIu64 ", aggregations %" PRIu64 ", retransmissions %" PRIu64
                  ", probes %" PRIu64 ", duplicates %" PRIu64 ", drops %" PRIu64 "%s\n",
                  j.spec.job, j.spec.members, j.joined,
                  j.spec.parent_member == proto::kNoMember ? " root" : " leaf", j.spec.slots,
                  s.lanes.size() > 1 ? " per lane" : "", j.slot_base, j.busy_copies, j.counters.packets_in, j.counters.packets_out,
                  j.counters.aggregations, j.counters.retransmissions, j.counters.probes, j.counters.duplicates,
                  j.counters.drops, j.failed ? " FAILED" : "");
    out += b;
  }
  return out;
}

}  // namespace inc::sw
