// `inc sim`: the discrete-event simulator (docs/SIMULATOR.md).
//   inc sim run     simulate jobs (from a scenario TOML or flags) on a topology
//   inc sim links   which links one collective touches (e.g. one Allgather contribution:
//                   switch multicast vs pipelined host broadcast)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/analytical.hpp"
#include "sim/config.hpp"
#include "sim/engine.hpp"
#include "sim/plot.hpp"
#include "sim/scenario.hpp"
#include "sim/skew.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"
#include "tools/text_util.hpp"

namespace inc::tools {
namespace {

using json = nlohmann::json;
using namespace inc::sim;

// `inc sim run --net FILE`: the file's [network] values (sim::read_net_file) replace the defaults;
// flags given explicitly win. path_hops and inc_tree_levels are the model's: the topology has them.
void apply_net_file(const std::string& path, const CLI::App& run, Scenario& sc) {
  const NetParams f = read_net_file(path);
  auto given = [&](const char* flag) { return run.count(flag) > 0; };
  NetParams& n = sc.opt.np;
  if (!given("--overhead-us")) n.host_overhead_us = f.host_overhead_us;
  if (!given("--nic-overhead-us")) n.nic_overhead_us = f.nic_overhead_us;
  if (!given("--ready-notice-us")) n.ready_notice_us = f.ready_notice_us;
  if (!given("--send-buffer")) n.send_buffer_bytes = f.send_buffer_bytes;
  if (!given("--reduce-GBps")) n.reduce_GBps = f.reduce_GBps;
  if (!given("--host-mem-GBps")) n.host_mem_GBps = f.host_mem_GBps;
  if (!given("--switch-reduce-GBps")) n.switch_reduce_GBps = f.switch_reduce_GBps;
  if (!given("--switch-packet-us")) n.switch_packet_us = f.switch_packet_us;
  if (!given("--host-packet-us")) n.host_packet_us = f.host_packet_us;
  if (!given("--switch-multicast")) n.switch_multicast = f.switch_multicast;
  if (!given("--cpu-cores")) n.cpu_cores = f.cpu_cores;
  if (!given("--link-burst")) {
    n.link_burst_bytes = f.link_burst_bytes;
    n.link_burst_s = f.link_burst_s;
  }
  if (!given("--link-burst-min")) n.link_burst_min_bytes = f.link_burst_min_bytes;
  if (!given("--burst-peak-gbps")) n.burst_peak_gbps = f.burst_peak_gbps;
  if (!given("--start-skew-us")) n.start_skew_us = f.start_skew_us;
  if (!given("--start-skew-us-per-MiB")) n.start_skew_us_per_MiB = f.start_skew_us_per_MiB;
  if (!given("--switch-memory")) n.switch_memory_bytes = f.switch_memory_bytes;
  if (!given("--inc-chunk")) n.inc_chunk_bytes = f.inc_chunk_bytes;
  if (!given("--link-gbps")) n.link_gbps = sc.topo.link_gbps = f.link_gbps;
  if (!given("--hop-latency-us")) n.hop_latency_us = sc.topo.hop_latency_us = f.hop_latency_us;
}

// The analytical model's prediction for a job, with alpha from the job's own placement and,
// when `contended_bw_s` (the per-step most-loaded link, sim/contention.hpp) exceeds the closed
// form's full-bisection bandwidth term, that term instead. full_bisection receives the other.
// With a start skew (base.start_skew()) both include the model's skew term over `skew_draws`.
double model_time(const JobSpec& j, const Topology& topo, const NetParams& base, double contended_bw_s,
                  double* full_bisection, int skew_draws) {
  NetParams np = base;
  const AggTree t = topo.build_tree(j.hosts, 0);
  np.path_hops = 2 * t.depth;
  np.inc_tree_levels = t.depth;
  np.inc_leaf_fan_in = 0;  // the most members under one switch (the switches above the hosts)
  for (const auto& node : t.nodes)
    if (!node.children.empty() && t.nodes[node.children.front()].member >= 0)
      np.inc_leaf_fan_in = std::max(np.inc_leaf_fan_in, static_cast<int>(node.children.size()));
  const double n = static_cast<double>(input_bytes(j.params) > output_bytes(j.params)
                                           ? coll::input_bytes(j.params)
                                           : coll::output_bytes(j.params));
  try {
    const Cost c = collective_cost(j.params.coll, j.params.algo, j.params.nranks, n, np,
                                   j.edge_offload ? Offload::edge : Offload::host, skew_draws);
    *full_bisection = c.total_s;
    return c.total_s + std::max(0.0, contended_bw_s - c.bandwidth_s);
  } catch (const std::exception&) {
    *full_bisection = 0;
    return 0;
  }
}

struct TopoFlags {
  std::string kind = "fat_tree2";
  int hosts = 64, radix = 64, gpus = 8;
  double oversub = 1, link_gbps = 400, hop_us = 0.6, nvlink_gbps = 7200, uplink_gbps = 0;
  std::vector<std::string> failed;
  std::string routing = "ecmp";
  void add(CLI::App& app) {
    app.add_option("--routing", routing, "ecmp | dmodk | adaptive (up-link choice; docs/SIMULATOR.md)")
        ->check(CLI::IsMember({"ecmp", "dmodk", "adaptive"}))
        ->capture_default_str();
    app.add_option("--topology", kind, "single_switch | fat_tree2 | fat_tree3 | rail")->capture_default_str();
    app.add_option("--hosts", hosts, "hosts (GPUs for rail)")->capture_default_str();
    app.add_option("--radix", radix, "switch ports")->capture_default_str();
    app.add_option("--oversubscription", oversub, "host ports : up ports at the first level")->capture_default_str();
    app.add_option("--link-gbps", link_gbps, "link bandwidth, Gb/s")->capture_default_str();
    app.add_option("--uplink-gbps", uplink_gbps,
                   "switch-to-switch link bandwidth, Gb/s (0 = --link-gbps; e.g. the testbed's one fat uplink per leaf)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--hop-latency-us", hop_us, "latency per link, us")->capture_default_str();
    app.add_option("--gpus-per-server", gpus, "rail: GPUs per server")->capture_default_str();
    app.add_option("--nvlink-gbps", nvlink_gbps, "rail: NVLink bandwidth per GPU, Gb/s")->capture_default_str();
    app.add_option("--fail", failed, "failed cable, e.g. leaf0-spine1 (repeatable)");
  }
  TopoSpec spec() const {
    TopoSpec t;
    if (kind == "single_switch" || kind == "single") t.kind = TopoKind::single_switch;
    else if (kind == "fat_tree2" || kind == "ft2") t.kind = TopoKind::fat_tree2;
    else if (kind == "fat_tree3" || kind == "ft3") t.kind = TopoKind::fat_tree3;
    else if (kind == "rail") t.kind = TopoKind::rail;
    else throw Error(Error::Kind::invalid_argument, "unknown topology '" + kind + "'");
    t.hosts = hosts;
    t.radix = radix;
    t.oversubscription = oversub;
    t.link_gbps = link_gbps;
    t.uplink_gbps = uplink_gbps;
    t.hop_latency_us = hop_us;
    t.gpus_per_server = gpus;
    t.nvlink_gbps = nvlink_gbps;
    t.failed_links = failed;
    parse_routing(routing, t.routing);
    return t;
  }
};

int run_scenario(Scenario sc, bool progress, const std::string& csv_path, const std::string& json_path,
                 const std::string& links_csv, const std::string& plot_dir) {
  if (auto e = validate(sc.opt.np); !e.empty()) throw Error(Error::Kind::invalid_argument, "network parameter " + e);
  Topology topo(sc.topo);
  std::vector<JobSpec> specs = place_jobs(sc, topo);
  sc.opt.progress = progress;
  Simulator sim(topo, sc.opt);
  if (progress) std::fprintf(stderr, "building schedules...\n");
  const auto b0 = std::chrono::steady_clock::now();
  // With a start skew every draw builds and runs the jobs again (sim/skew.hpp); its schedules'
  // time is inside the draws' wall time.
  const bool skewed = sc.opt.np.start_skew();
  SkewedRun sk;
  if (skewed) {
    std::vector<double> sizes;
    for (const auto& j : specs)
      sizes.push_back(static_cast<double>(std::max(coll::input_bytes(j.params), coll::output_bytes(j.params))));
    sk = run_skewed(topo, sc.opt, specs, sizes);
  } else {
    for (const auto& j : specs) sim.add_job(j);
  }
  const double build_s = skewed ? 0 : std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  const SimResult r = skewed ? std::move(sk.first) : sim.run();
  fmt::print("{}\n", topo.describe());
  fmt::print("{:<12} {:<15} {:<18} {:>6} {:>11} {:>12} {:>11} {:>11} {:>11} {:>7}  links touched host/switch-switch\n",
             "job", "collective", "algorithm", "ranks", "size", "time", "algbw", "busbw", "model", "sim/mod");
  json jobs = json::array();
  std::string csv = "job,collective,algorithm,ranks,bytes,offload,start_s,time_s,algbw_GBps,busbw_GBps,model_s,links_host,links_switch,bytes_host_links,bytes_switch_links,tree_switches,inc_window_cap_GBps";
  csv += skewed ? ",start_skew_s,mean_rank_s,span_s\n" : "\n";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& j = specs[i];
    const JobResult& jr = r.jobs[i];
    const double n = static_cast<double>(std::max(coll::input_bytes(j.params), coll::output_bytes(j.params)));
    // Skewed: inc bench's figure, the most over ranks of a rank's mean time over the draws.
    const double t = skewed ? sk.jobs[i].time_s : jr.time_s();
    const double algbw = t > 0 ? n / t / 1e9 : 0;
    const double busbw = algbw * bus_factor(j.params.coll, j.params.nranks);
    double m_full = 0;
    const double m = model_time(j, topo, sc.opt.np, jr.contended_bandwidth_s, &m_full, sc.opt.start_skew_draws);
    const int lsw = jr.links_touched[1] + jr.links_touched[2];
    const std::string algo = std::string(coll::name(j.params.algo)) + (j.edge_offload ? "+edge" : "");
    fmt::print("{:<12} {:<15} {:<18} {:>6} {:>11} {:>12} {:>6.1f}GB/s {:>6.1f}GB/s {:>11} {:>7.3f}  {}/{}\n", j.name,
               name(j.params.coll), algo, j.params.nranks, format_size(n), tstr(t), algbw, busbw,
               m > 0 ? tstr(m) : "-", m > 0 ? t / m : 0, jr.links_touched[0] + jr.links_touched[3], lsw);
    csv += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.4f},{:.4f},{:.9g},{},{},{},{},{},{:.3f}", j.name,
                       name(j.params.coll), coll::name(j.params.algo), j.params.nranks, n,
                       j.edge_offload ? "edge" : "host", jr.start_s, t, algbw, busbw, m,
                       jr.links_touched[0] + jr.links_touched[3], lsw, jr.tier_bytes[0] + jr.tier_bytes[3],
                       jr.tier_bytes[1] + jr.tier_bytes[2], jr.tree_switches, jr.inc_window_cap_GBps);
    csv += skewed ? fmt::format(",{:.9g},{:.9g},{:.9g}\n", sk.jobs[i].width_s, sk.jobs[i].mean_rank_s, sk.jobs[i].span_s)
                  : "\n";
    jobs.push_back({{"job", j.name}, {"collective", std::string(name(j.params.coll))},
                    {"algorithm", std::string(coll::name(j.params.algo))}, {"ranks", j.params.nranks},
                    {"bytes", n}, {"offload", j.edge_offload ? "edge" : "host"}, {"hosts", j.hosts},
                    {"start_s", jr.start_s}, {"time_s", t}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                    {"model_s", m}, {"model_full_bisection_s", m_full},
                    {"model_worst_step_share", jr.worst_step_share}, {"messages", jr.messages}, {"inc_chunks", jr.inc_chunks},
                    {"host_mem_bytes", jr.host_mem_bytes},
                    {"links_touched", {{"host", jr.links_touched[0]}, {"edge_up", jr.links_touched[1]},
                                       {"core", jr.links_touched[2]}, {"nvlink", jr.links_touched[3]}}},
                    {"link_bytes", {{"host", jr.tier_bytes[0]}, {"edge_up", jr.tier_bytes[1]},
                                    {"core", jr.tier_bytes[2]}, {"nvlink", jr.tier_bytes[3]}}},
                    {"tree_switches", jr.tree_switches}, {"inc_window_cap_GBps", jr.inc_window_cap_GBps},
                    {"fold", jr.fold}});
    if (skewed)
      jobs.back()["start_skew"] = {{"width_s", sk.jobs[i].width_s}, {"draws", sk.draws},
                                   {"seed", sc.opt.start_skew_seed}, {"slowest_rank", sk.jobs[i].slowest_rank},
                                   {"mean_rank_s", sk.jobs[i].mean_rank_s}, {"span_s", sk.jobs[i].span_s}};
  }
  if (!skewed)
    fmt::print("\nmakespan {}; {} events, {} flows in {:.3f} s ({:.2f} M events/s); schedules built in {:.3f} s\n",
               tstr(r.makespan_s), r.events, r.flows, r.wall_s, r.wall_s > 0 ? r.events / r.wall_s / 1e6 : 0, build_s);
  else
    fmt::print("\nmakespan of draw 0 {}; {} events in {} draws, {:.3f} s ({:.2f} M events/s)\n", tstr(r.makespan_s),
               sk.events, sk.draws, sk.wall_s, sk.wall_s > 0 ? sk.events / sk.wall_s / 1e6 : 0);
  for (std::size_t i = 0; skewed && i < specs.size(); ++i)
    fmt::print("start skew, job '{}': ranks start uniform in [0, {}] ({} us + {} us per MiB), {} draws, seed {}; time "
               "= inc bench's, the most over ranks of a rank's mean time (rank {}); mean rank time {}, span (first "
               "start to last end) {}; links, routing and bytes below are draw 0's\n",
               specs[i].name, tstr(sk.jobs[i].width_s), sc.opt.np.start_skew_us, sc.opt.np.start_skew_us_per_MiB,
               sk.draws, sc.opt.start_skew_seed, sk.jobs[i].slowest_rank, tstr(sk.jobs[i].mean_rank_s),
               tstr(sk.jobs[i].span_s));
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (r.jobs[i].fold > 1)
      fmt::print("job '{}' folded by the symmetry of its routes: {} of {} ranks simulated, each standing for {} "
                 "(events counts the simulated ones; --no-fold: every rank)\n",
                 r.jobs[i].name, specs[i].params.nranks / static_cast<int>(r.jobs[i].fold), specs[i].params.nranks,
                 r.jobs[i].fold);
  fmt::print("model: alpha-beta-gamma closed form; for host algorithms its bandwidth term is the larger of full "
             "bisection's and the per-step most-loaded link's (contention), see --json model_full_bisection_s\n");
  if (skewed)
    fmt::print("model: with the start skew it adds S x (p/(p+1) - E[least of p means of {} uniforms]), the expected "
               "wait of inc bench's figure over the draws (none for broadcasts and the Core-INC allgather; docs/MODEL.md, Start skew)\n",
               sc.opt.start_skew_draws);
  const double coll_pct = r.routed_flows ? 100.0 * r.collided_flows / r.routed_flows : 0;
  fmt::print("routing {}: {} messages crossed switch-to-switch links, {} ({:.1f}%) found one already carrying a "
             "flow; at most {} flows at once on one such link\n",
             name(sc.topo.routing), r.routed_flows, r.collided_flows, coll_pct, r.max_link_flows);
  const bool has_threshold = sc.opt.matching == Matching::eager || sc.opt.matching == Matching::ready;
  fmt::print("matching {}{}\n", name(sc.opt.matching),
             has_threshold ? fmt::format(" (eager up to {})", format_size(sc.opt.eager_threshold)) : std::string());
  if (sc.opt.np.buckets())
    fmt::print("token buckets on {} links (those slower than the peak; {} on a {} Gb/s link), passed at {} Gb/s: "
               "buckets ran dry {} times\n", r.buckets,
               format_size(sc.opt.np.burst_bytes(sc.topo.link_gbps * 1e9 / 8)), sc.topo.link_gbps,
               sc.opt.np.burst_peak_gbps, r.buckets_emptied);
  if (!csv_path.empty()) write_file(csv_path, csv);
  if (!json_path.empty()) {
    json j = {{"topology", topo.describe()}, {"scenario", sc.source}, {"jobs", jobs}, {"makespan_s", r.makespan_s},
              {"events", r.events}, {"flows", r.flows}, {"wall_s", r.wall_s}, {"schedule_build_s", build_s},
              {"routing", name(sc.topo.routing)}, {"matching", name(sc.opt.matching)},
              {"eager_threshold", sc.opt.eager_threshold},
              {"collisions", {{"routed_flows", r.routed_flows}, {"collided_flows", r.collided_flows},
                              {"max_link_flows", r.max_link_flows}}}};
    write_file(json_path, j.dump(2) + "\n");
  }
  if (!links_csv.empty() || !plot_dir.empty()) {
    std::string lc = "link,tier,bytes,utilisation\n";
    for (std::uint32_t l = 0; l < r.link_bytes.size(); ++l) {
      if (r.link_bytes[l] <= 0) continue;
      const Link& L = topo.link(l);
      const char* tier[] = {"host", "edge_up", "core", "nvlink"};
      lc += fmt::format("{},{},{:.0f},{:.4f}\n", topo.link_name(l), tier[static_cast<int>(L.tier)], r.link_bytes[l],
                        r.makespan_s > 0 ? r.link_bytes[l] / (L.bw * r.makespan_s) : 0);
    }
    std::string path = links_csv;
    if (!plot_dir.empty()) {
      std::filesystem::create_directories(plot_dir);
      if (path.empty()) path = plot_dir + "/links.csv";
      write_file(plot_dir + "/jobs.csv", csv);
    }
    write_file(path, lc);
    if (!plot_dir.empty()) {
      render_plot(plot_dir + "/jobs",
                  fmt::format("set datafile separator ','\nset title 'Simulated vs modelled time per job'\n"
                              "set style data histogram\nset style histogram clustered gap 1\n"
                              "set style fill solid 0.85 border -1\nset ylabel 'time (ms)'\nset yrange [0:*]\n"
                              "set grid ytics\nset xtics rotate by -30\n"
                              "plot '{0}/jobs.csv' every ::1 using ($8*1000):xtic(1) title 'inc sim' lc rgb '#1b9e77', "
                              "'' every ::1 using ($11*1000) title 'alpha-beta model' lc rgb '#7570b3'\n",
                              plot_dir));
      render_plot(plot_dir + "/links",
                  fmt::format("set datafile separator ','\nset title 'Link utilisation over the makespan'\n"
                              "set xlabel 'utilisation'\nset ylabel 'links'\nbinw = 0.05\n"
                              "bin(x) = binw * floor(x / binw) + binw / 2\nset boxwidth binw * 0.9\n"
                              "set style fill solid 0.8\nset grid ytics\n"
                              "plot '{0}' every ::1 using (bin($4)):(1) smooth frequency with boxes title 'links' lc rgb '#d95f02'\n",
                              path));
      fmt::print("wrote {0}/jobs.csv, {1}, {0}/jobs.png/.svg, {0}/links.png/.svg\n", plot_dir, path);
    }
  }
  return 0;
}

int run_links(const TopoFlags& tf, int ranks, const std::string& placement, std::uint64_t seed, int root,
              const std::string& size) {
  TopoSpec ts = tf.spec();
  Topology topo(ts);
  std::vector<int> free_hosts(topo.num_hosts());
  for (int h = 0; h < topo.num_hosts(); ++h) free_hosts[h] = h;
  if (ranks <= 0) ranks = topo.num_hosts();
  const std::vector<int> hosts =
      placement == "random" ? place_random(free_hosts, ranks, seed) : place_contiguous(free_hosts, ranks);
  const std::uint64_t bytes = parse_size(size);
  fmt::print("{}\none broadcast of {} from rank {} (host {}) to {} ranks (= one Allgather contribution)\n\n",
             topo.describe(), format_size(static_cast<double>(bytes)), root, hosts[root], ranks);
  fmt::print("{:<34} {:>14} {:>22} {:>14} {:>22}\n", "algorithm", "host links", "switch-switch links",
             "traversals", "switch-switch trav.");
  for (auto a : {coll::Algorithm::inc, coll::Algorithm::pipelined_chain, coll::Algorithm::binomial_tree}) {
    SimOptions opt;
    opt.np.link_gbps = ts.link_gbps;
    Simulator sim(topo, opt);
    JobSpec j;
    j.name = std::string(coll::name(a));
    j.params.coll = Collective::broadcast;
    j.params.algo = a;
    j.params.root = root;
    j.params.count = bytes / 4;
    j.params.segment_bytes = bytes;  // one message per hop: count links, not segments
    j.hosts = hosts;
    sim.add_job(j);
    const SimResult r = sim.run();
    const JobResult& jr = r.jobs[0];
    const double b = static_cast<double>(j.params.count * 4);
    const char* label = a == coll::Algorithm::inc ? "Core-INC (switch replication)"
                        : a == coll::Algorithm::pipelined_chain ? "pipelined chain (host)"
                                                                 : "binomial tree (host)";
    fmt::print("{:<34} {:>14} {:>22} {:>14.0f} {:>22.0f}\n", label, jr.links_touched[0] + jr.links_touched[3],
               jr.links_touched[1] + jr.links_touched[2], jr.link_bytes_total / b,
               (jr.tier_bytes[1] + jr.tier_bytes[2]) / b);
  }
  fmt::print("\n(links: distinct directed links that carried data; traversals: link crossings of the data)\n");
  return 0;
}

}  // namespace

int cmd_sim(int argc, char** argv) {
  CLI::App app{"Discrete-event simulator of collectives on fat trees and rail clusters (docs/SIMULATOR.md)", "inc sim"};
  app.require_subcommand(1);

  auto* run = app.add_subcommand("run", "simulate jobs on a topology");
  std::string file, coll_name = "allreduce", algo = "ring", size = "64MiB", placement = "contiguous";
  std::string csv, json_out, links_csv, plot_dir;
  int ranks = 0, njobs = 1;
  bool edge = false, no_progress = false, progress = false;
  std::uint64_t seed = 1;
  TopoFlags tf;
  NetParams np;
  int max_inc_chunks = 16, max_inc_ops = 8;
  run->add_option("-f,--scenario", file, "scenario TOML (examples/sim/); flags below are then ignored");
  tf.add(*run);
  run->add_option("-c,--collective", coll_name, "collective")->capture_default_str();
  run->add_option("-a,--algo", algo, "algorithm")->capture_default_str();
  run->add_option("-b,--bytes", size, "collective size")->capture_default_str();
  run->add_option("-n,--ranks", ranks, "ranks per job (default: all hosts / jobs)");
  run->add_option("--jobs", njobs, "identical jobs sharing the fabric")->capture_default_str();
  run->add_option("--placement", placement, "contiguous | random")->capture_default_str();
  run->add_option("--seed", seed, "placement seed")->capture_default_str();
  run->add_flag("--edge", edge, "Edge-INC offload (NIC-driven host algorithm)");
  std::string seg, dtype_name = "f32", acc_name = "automatic";
  run->add_option("-d,--dtype", dtype_name, "element type")->capture_default_str();
  run->add_option("--accumulate", acc_name,
                  "narrow | widen | wide | reproducible (f16/bf16/fp8/MX sums on the hosts: widen/wide move f32 partials)")
      ->capture_default_str();
  bool rtt = false;
  run->add_option("--segment", seg, "message segment size (default: the algorithm's)");
  run->add_flag("--rtt-weighted", rtt, "share bottlenecks by route latency, as SimGrid does");
  bool no_fold = false;
  run->add_flag("--no-fold", no_fold,
                "simulate every rank of a symmetric ring even when its routes repeat (same results, slower; "
                "docs/SIMULATOR.md)");
  std::string matching = "dataflow", eager_thr = "64KiB";
  run->add_option("--matching", matching,
                  "dataflow | rendezvous | eager | ready (when messages move; ready: as the runtime, eager up to "
                  "the threshold, larger messages after the receiver's notice; docs/SIMULATOR.md)")
      ->check(CLI::IsMember({"dataflow", "rendezvous", "eager", "ready"}))
      ->capture_default_str();
  run->add_option("--eager-threshold", eager_thr, "largest eager message (--matching eager, ready)")->capture_default_str();
  std::string net_file;
  run->add_option("--net", net_file,
                  "TOML file with a [network] table (as inc model --net; e.g. a testbed calibration): its values "
                  "replace the defaults, flags given explicitly win");
  run->add_option("--overhead-us", np.host_overhead_us, "host per-message overhead, us")->capture_default_str();
  run->add_option("--nic-overhead-us", np.nic_overhead_us, "Edge-INC per-message overhead, us")->capture_default_str();
  run->add_option("--ready-notice-us", np.ready_notice_us,
                  "--matching ready: a ready notice's cost beyond the host overhead and path latency, us")
      ->capture_default_str();
  run->add_option("--reduce-GBps", np.reduce_GBps, "endpoint reduction rate GB/s (0 = free)")->capture_default_str();
  run->add_option("--host-mem-GBps", np.host_mem_GBps, "host memory bus GB/s (0 = unlimited)")->capture_default_str();
  run->add_option("--switch-reduce-GBps", np.switch_reduce_GBps, "switch ALU GB/s (0 = line rate)")->capture_default_str();
  run->add_option("--switch-packet-us", np.switch_packet_us,
                  "software switch CPU per datagram received or sent, us (0 = not modelled)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--host-packet-us", np.host_packet_us, "host CPU per Core-INC datagram sent or received, us (0 = not modelled)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--switch-multicast", np.switch_multicast,
                  "a switch sends each result once to all its host children (true/false)")
      ->capture_default_str();
  run->add_option("--cpu-cores", np.cpu_cores,
                  "emulated testbed: hosts' and switches' packet CPU share this many cores (0 = own CPUs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string link_burst, link_burst_min;
  run->add_option("--link-burst", link_burst,
                  "emulated testbed: token bucket of every link, bytes (125000, 128KiB) or time at the link's rate "
                  "(1ms); passed at --burst-peak-gbps after an idle period (0 = off; docs/SIMULATOR.md)");
  run->add_option("--link-burst-min", link_burst_min, "emulated testbed: a bucket's floor in bytes (the testbed's: 74550)");
  run->add_option("--burst-peak-gbps", np.burst_peak_gbps,
                  "emulated testbed: a link's rate while its bucket holds tokens (veth speed), Gb/s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--start-skew-us", np.start_skew_us,
                  "emulated testbed: every rank starts at an offset uniform in [0, S], S = this + --start-skew-us-per-MiB "
                  "x MiB; time = inc bench's over the draws (0 = all start together; docs/SIMULATOR.md)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--start-skew-us-per-MiB", np.start_skew_us_per_MiB, "emulated testbed: S's growth per MiB of the collective")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  int skew_draws = 16;
  std::uint64_t skew_seed = 1;
  run->add_option("--start-skew-draws", skew_draws, "start skew: independent draws of the ranks' offsets")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--start-skew-seed", skew_seed, "start skew: seed of the draws")->capture_default_str();
  std::string switch_mem = "8MiB";
  run->add_option("--switch-memory", switch_mem, "switch aggregation memory")->capture_default_str();
  std::string send_buffer;
  run->add_option("--send-buffer", send_buffer,
                  "transport send buffer: a send of at most this size is done once handed to the transport, "
                  "not on delivery (a TCP socket's; e.g. 4MiB) [0: on delivery]");
  std::string inc_chunk;
  run->add_option("--inc-chunk", inc_chunk, "payload of one Core-INC aggregation slot (e.g. 8KiB) [256KiB]");
  run->add_option("--max-inc-chunks", max_inc_chunks, "simulated chunks per Core-INC op")->capture_default_str();
  run->add_option("--max-inc-ops", max_inc_ops, "Core-INC ops per region when unsegmented")->capture_default_str();
  run->add_flag("--progress", progress, "progress bar on stderr even if it is not a terminal");
  run->add_flag("--no-progress", no_progress, "no progress bar");
  run->add_option("--csv", csv, "per-job CSV");
  run->add_option("--json", json_out, "per-job JSON");
  run->add_option("--links-csv", links_csv, "per-link traffic CSV");
  run->add_option("--plot", plot_dir, "directory for jobs/links CSV and PNG/SVG plots");

  auto* links = app.add_subcommand("links", "links touched by one broadcast / Allgather contribution");
  TopoFlags lf;
  lf.hosts = 16;
  lf.radix = 8;
  int lranks = 0, root = 0;
  std::string lplacement = "contiguous", lsize = "1MiB";
  std::uint64_t lseed = 1;
  lf.add(*links);
  links->add_option("-n,--ranks", lranks, "ranks (default: all hosts)");
  links->add_option("--placement", lplacement, "contiguous | random")->capture_default_str();
  links->add_option("--seed", lseed, "placement seed")->capture_default_str();
  links->add_option("--root", root, "broadcasting rank")->capture_default_str();
  links->add_option("-b,--bytes", lsize, "size")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*links) return run_links(lf, lranks, lplacement, lseed, root, lsize);
    Scenario sc;
    if (!file.empty()) {
      if (!net_file.empty())
        throw Error(Error::Kind::invalid_argument, "--net and a scenario file: put the parameters in its [network] table");
      sc = load_scenario(file);
    } else {
      sc.topo = tf.spec();
      sc.opt.np = np;
      sc.opt.np.link_gbps = tf.link_gbps;
      sc.opt.np.hop_latency_us = tf.hop_us;
      sc.opt.np.switch_memory_bytes = static_cast<double>(parse_size(switch_mem));
      if (!inc_chunk.empty()) sc.opt.np.inc_chunk_bytes = static_cast<double>(parse_size(inc_chunk));
      if (!send_buffer.empty()) sc.opt.np.send_buffer_bytes = static_cast<double>(parse_size(send_buffer));
      try {
        if (!link_burst.empty()) parse_size_or_time(link_burst, sc.opt.np.link_burst_bytes, sc.opt.np.link_burst_s);
        if (!link_burst_min.empty()) sc.opt.np.link_burst_min_bytes = static_cast<double>(parse_size(link_burst_min));
      } catch (const std::invalid_argument& e) {
        throw Error(Error::Kind::invalid_argument, fmt::format("--link-burst / --link-burst-min: {}", e.what()));
      }
      if (!net_file.empty()) apply_net_file(net_file, *run, sc);
      sc.opt.max_inc_chunks = max_inc_chunks;
      sc.opt.max_inc_ops = max_inc_ops;
      sc.opt.rtt_weighted = rtt;
      parse_matching(matching, sc.opt.matching);
      sc.opt.eager_threshold = parse_size(eager_thr);
      sc.opt.start_skew_draws = skew_draws;
      sc.opt.start_skew_seed = skew_seed;
      sc.seed = seed;
      if (njobs < 1) throw Error(Error::Kind::invalid_argument, "--jobs must be >= 1");
      const int per = ranks > 0 ? ranks : tf.hosts / njobs;
      if (per * njobs > tf.hosts)
        throw Error(Error::Kind::invalid_argument,
                    fmt::format("{} jobs x {} ranks need {} hosts, the topology has {}", njobs, per, per * njobs, tf.hosts));
      for (int k = 0; k < njobs; ++k) {
        JobDesc j;
        j.name = njobs == 1 ? "job" : fmt::format("job{}", k);
        auto c = parse_collective(coll_name);
        if (!c) throw Error(Error::Kind::invalid_argument, "unknown collective '" + coll_name + "'");
        j.coll = *c;
        if (!coll::parse_algorithm(algo, j.algo)) throw Error(Error::Kind::invalid_argument, "unknown algorithm '" + algo + "'");
        j.ranks = per;
        j.bytes = parse_size(size);
        j.placement = placement;
        j.edge = edge;
        j.segment_bytes = seg.empty() ? 0 : parse_size(seg);
        auto d = parse_data_type(dtype_name);
        if (!d) throw Error(Error::Kind::invalid_argument, "unknown --dtype '" + dtype_name + "'");
        j.dtype = *d;
        auto a = parse_accumulate(acc_name);
        if (!a) throw Error(Error::Kind::invalid_argument, "unknown --accumulate '" + acc_name + "'");
        j.accumulate = *a;
        sc.jobs.push_back(j);
      }
    }
    if (no_fold) sc.opt.fold_symmetric = false;
    const bool bar = !no_progress && (progress || isatty(2));
    return run_scenario(std::move(sc), bar, csv, json_out, links_csv, plot_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc sim: %s\n", e.what());
    return 1;
  }
}

}  // namespace inc::tools
