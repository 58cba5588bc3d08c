// The `inc switch` daemon's main loop: bind the lanes, admit the static jobs on every lane, serve
// /metrics and --stats from the lanes' published snapshots, run until asked to stop.
#include "src/switch/daemon.hpp"

#include <httplib.h>

#include <chrono>
#include <cinttypes>
#include <memory>
#include <random>
#include <thread>

#include "src/control/switch_agent.hpp"

namespace inc::sw {

namespace {
std::uint64_t random_incarnation() {
  std::random_device rd;
  std::uint64_t x = (std::uint64_t(rd()) << 32) ^ rd() ^
                    std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return x ? x : 1;
}
}  // namespace

int run_switch_daemon(const SwitchDaemonOptions& o, const std::atomic<bool>& stop, std::FILE* log,
                      const std::function<void(SwitchLanes&, int)>& on_ready) {
  LanesConfig lc;
  lc.cfg = o.cfg;
  if (!o.incarnation_given) lc.cfg.incarnation = random_incarnation();
  lc.bind = o.bind;
  lc.lanes = std::max<std::uint16_t>(o.lanes, 1);
  lc.faults = o.faults;
  lc.batch = o.batch;
  lc.offload = o.offload;
  lc.group_base = o.group_base;
  lc.group_span = o.group_span;
  std::unique_ptr<SwitchLanes> lanes;
  try {
    lanes = std::make_unique<SwitchLanes>(lc);
  } catch (const std::exception& e) {
    std::fprintf(log, "inc switch: %s\n", e.what());
    return 1;
  }
  for (const auto& j : o.jobs) {
    std::uint16_t lane = 0;
    auto r = lanes->admit_static(j, monotonic_now(), lane);
    if (r != proto::Reason::ok) {
      std::fprintf(log, "inc switch: cannot admit job %u (%u members, %u slots per lane) on lane %u: %s\n",
                   j.job, j.members, j.slots, unsigned(lane), std::string(proto::name(r)).c_str());
      return 1;
    }
  }
  httplib::Server http;
  std::thread http_thread;
  int metrics_port = -1;
  if (o.metrics_port >= 0) {
    // No SO_REUSEPORT (httplib's default): a second switch on the same port must fail to
    // bind, not share it (scrapes would alternate between the two). Slow or idle clients hold
    // a worker thread at most a few seconds, and 8 of them cannot take all the workers.
    http.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http.new_task_queue = [] { return new httplib::ThreadPool(32); };
    http.set_read_timeout(2, 0);
    http.set_write_timeout(2, 0);
    http.set_keep_alive_timeout(2);
    http.set_keep_alive_max_count(8);
    http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(render_prometheus(lanes->snapshot(), o.name), "text/plain; version=0.0.4");
    });
    metrics_port = o.metrics_port == 0 ? http.bind_to_any_port(o.metrics_bind)
                                       : (http.bind_to_port(o.metrics_bind, o.metrics_port) ? o.metrics_port : -1);
    if (metrics_port < 0) {
      std::fprintf(log, "inc switch: cannot serve metrics on %s:%d (in use by another process, or not a local address)\n",
                   o.metrics_bind.c_str(), o.metrics_port);
      return 1;
    }
    http_thread = std::thread([&] { http.listen_after_bind(); });
  }
  const SwitchConfig& cfg = lc.cfg;
  const unsigned L = lanes->lanes();
  const unsigned port0 = lanes->local(0).port();
  std::fprintf(log,
               "inc switch %s: serving %s, %u lane%s (ports %u-%u), %u slots (%u per lane) x %u elements, "
               "types%s%s%s%s%s%s%s, incarnation %016" PRIx64 "%s%s, %zu static job(s)",
               o.name.c_str(), lanes->local(0).str().c_str(), L, L == 1 ? "" : "s", port0, port0 + L - 1,
               cfg.slots, lanes->slots_per_lane(), cfg.slot_elems,
               (cfg.caps & proto::cap::i32_sum) ? " i32" : "", (cfg.caps & proto::cap::f32_sum) ? " f32" : "",
               (cfg.caps & proto::cap::h16_sum) ? " f16 bf16" : "",
               (cfg.caps & proto::cap::i8_sum) ? " i8 u8" : "",
               (cfg.caps & proto::cap::fp8_sum) ? " e4m3 e5m2" : "", (cfg.caps & proto::cap::i4_sum) ? " i4" : "",
               (cfg.caps & proto::cap::mx_sum) ? " mx" : "", cfg.incarnation, cfg.parent.valid() ? ", parent " : "",
               cfg.parent.valid() ? cfg.parent.str().c_str() : "", o.jobs.size());
  const UdpPort& p0 = lanes->lane(0).port();
  std::fprintf(log, ", offload %s", p0.gso() && p0.gro() ? "gso+gro" : p0.gso() ? "gso" : p0.gro() ? "gro" : "none");
  if (metrics_port >= 0) std::fprintf(log, ", metrics http://%s:%d/metrics", o.metrics_bind.c_str(), metrics_port);
  std::fprintf(log, "\n");
  for (const auto& j : o.jobs)
    std::fprintf(log, j.key ? "inc switch %s: job %u is keyed: its packets are authenticated\n"
                            : "inc switch %s: job %u has no key: anyone who reaches this switch can join it, "
                              "forge its sums and read them (give it one with --key-file)\n",
                 o.name.c_str(), j.job);
  for (const auto& j : o.jobs)
    if (j.multicast.valid())
      std::fprintf(log,
                   "inc switch %s: job %u: results every member gets alike go once to multicast group "
                   "%s (anyone on the link who joins it can read them; keyed packets cannot be "
                   "forged or replayed)\n",
                   o.name.c_str(), j.job,
                   Endpoint::ipv4(j.multicast.ipv4_addr(), p0.local().port()).str().c_str());
  if (o.group_span != 0)
    std::fprintf(log,
                 "inc switch %s: jobs admitted at run time: results every member gets alike go once to "
                 "multicast group %u.%u.%u.%u + (job mod %u), port %u (for members that are hosts, not switches)\n",
                 o.name.c_str(), o.group_base >> 24, (o.group_base >> 16) & 255, (o.group_base >> 8) & 255,
                 o.group_base & 255, o.group_span, unsigned(p0.local().port()));
  std::fflush(log);
  std::atomic<bool> stats_stop{false};
  std::thread stats_thread;
  if (o.stats_interval > 0)
    stats_thread = std::thread([&] {
      auto next = std::chrono::steady_clock::now();
      while (!stats_stop.load()) {
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(o.stats_interval));
        while (!stats_stop.load() && std::chrono::steady_clock::now() < next)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (stats_stop.load()) break;
        std::fputs(render_stats(lanes->snapshot(), o.name).c_str(), log);
        std::fflush(log);
      }
    });
  if (on_ready) on_ready(*lanes, metrics_port);
  std::unique_ptr<control::SwitchAgent> agent;
  if (!o.controller.empty() && o.controller_key)
    agent = std::make_unique<control::SwitchAgent>(o.controller, *o.controller_key, o.name, *lanes, lanes->lane(0).dataplane().config(), log);
  lanes->run(stop);
  agent.reset();
  stats_stop.store(true);
  if (stats_thread.joinable()) stats_thread.join();
  if (http_thread.joinable()) {
    http.stop();
    http_thread.join();
  }
  if (o.stats) std::fputs(render_stats(lanes->snapshot(), o.name).c_str(), log);
  std::fprintf(log, "inc switch %s: stopped\n", o.name.c_str());
  std::fflush(log);
  return 0;
}

}  // namespace inc::sw
