// `inc model`: the analytical model (docs/MODEL.md).
//   inc model cost        alpha-beta-gamma cost of every algorithm of one collective
//   inc model iteration   training-iteration time with host vs Core-INC collectives
//   inc model paper-figure5   the paper's Figure 5, our numbers beside the published ones
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "coll/schedule.hpp"
#include "sim/analytical.hpp"
#include "sim/config.hpp"
#include "sim/plot.hpp"
#include "tools/commands.hpp"
#include "tools/text_util.hpp"

namespace inc::tools {
namespace {

using sim::NetParams;
using json = nlohmann::json;

struct NetOptions {
  std::string file;
  std::string inc_chunk, switch_memory;  // sizes, applied by resolve()
  void add(CLI::App& app, NetParams& np) {
    auto* g = app.add_option_group("network", "network and endpoint parameters (defaults: docs/MODEL.md)");
    g->add_option("--net", file, "TOML file with a [network] table");
    g->add_option("--link-gbps", np.link_gbps, "link bandwidth, Gb/s per direction")->capture_default_str();
    g->add_option("--hop-latency-us", np.hop_latency_us, "latency of one link + switch, us")->capture_default_str();
    g->add_option("--hops", np.path_hops, "links on a host-to-host path")->capture_default_str();
    g->add_option("--overhead-us", np.host_overhead_us, "host per-message overhead, us")->capture_default_str();
    g->add_option("--nic-overhead-us", np.nic_overhead_us, "Edge-INC per-message overhead, us")->capture_default_str();
    g->add_option("--reduce-GBps", np.reduce_GBps, "endpoint reduction rate GB/s (0 = overlapped)")->capture_default_str();
    g->add_option("--host-mem-GBps", np.host_mem_GBps, "host memory bus GB/s (0 = unlimited)")->capture_default_str();
    g->add_option("--switch-reduce-GBps", np.switch_reduce_GBps, "switch ALU rate GB/s (0 = line rate)")->capture_default_str();
    g->add_option("--tree-levels", np.inc_tree_levels, "Core-INC: links from a host to the tree root")->capture_default_str();
    g->add_option("--tree-leaf-fan-in", np.inc_leaf_fan_in,
                  "Core-INC: members under one switch above the hosts, the levels above balanced (0 = a balanced tree)")
        ->capture_default_str();
    g->add_option("--inc-chunk", inc_chunk, "Core-INC: payload of one aggregation slot (e.g. 8KiB) [256KiB]");
    g->add_option("--switch-memory", switch_memory, "Core-INC: aggregation memory per switch [8MiB]");
    g->add_option("--start-skew-us", np.start_skew_us,
                  "emulated testbed: ranks start uniform in [0, S], S = this + --start-skew-us-per-MiB x MiB; adds "
                  "the skew term (0 = off; docs/MODEL.md)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    g->add_option("--start-skew-us-per-MiB", np.start_skew_us_per_MiB, "emulated testbed: S's growth per MiB of the collective")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  }
  // Applies the file first, then re-applies nothing: CLI values given explicitly win because
  // the file is read into a copy and only fields left at their defaults are taken from it.
  NetParams resolve(const NetParams& cli, const CLI::App& app) const {
    NetParams np = cli;
    if (!file.empty()) {
      const NetParams from = sim::read_net_file(file);
      auto given = [&](const char* opt) { return app.count(opt) > 0; };
      NetParams out = from;
      if (given("--link-gbps")) out.link_gbps = cli.link_gbps;
      if (given("--hop-latency-us")) out.hop_latency_us = cli.hop_latency_us;
      if (given("--hops")) out.path_hops = cli.path_hops;
      if (given("--overhead-us")) out.host_overhead_us = cli.host_overhead_us;
      if (given("--nic-overhead-us")) out.nic_overhead_us = cli.nic_overhead_us;
      if (given("--reduce-GBps")) out.reduce_GBps = cli.reduce_GBps;
      if (given("--host-mem-GBps")) out.host_mem_GBps = cli.host_mem_GBps;
      if (given("--switch-reduce-GBps")) out.switch_reduce_GBps = cli.switch_reduce_GBps;
      if (given("--tree-levels")) out.inc_tree_levels = cli.inc_tree_levels;
      if (given("--tree-leaf-fan-in")) out.inc_leaf_fan_in = cli.inc_leaf_fan_in;
      if (given("--start-skew-us")) out.start_skew_us = cli.start_skew_us;
      if (given("--start-skew-us-per-MiB")) out.start_skew_us_per_MiB = cli.start_skew_us_per_MiB;
      np = out;
    }
    if (!inc_chunk.empty()) np.inc_chunk_bytes = static_cast<double>(sim::parse_size(inc_chunk));
    if (!switch_memory.empty()) np.switch_memory_bytes = static_cast<double>(sim::parse_size(switch_memory));
    if (auto e = sim::validate(np); !e.empty())
      throw Error(Error::Kind::invalid_argument, "network parameter " + e);
    return np;
  }
};

std::string ms(double s) { return fmt::format("{:.1f} ms", s * 1e3); }
std::string pct(double x) { return fmt::format("{:.1f}%", x * 100); }

// ---- cost ------------------------------------------------------------------------------------

std::vector<coll::Algorithm> algorithms_for(Collective c) {
  using A = coll::Algorithm;
  std::vector<A> out;
  for (A a : {A::ring, A::recursive_doubling, A::rabenseifner, A::binomial_tree, A::pipelined_chain,
              A::pairwise, A::dissemination, A::inc})
    if (coll::supports(c, a)) out.push_back(a);
  return out;
}

int run_cost(const std::string& coll_name, int ranks, const std::string& size, std::string algo_name,
             bool from_schedules, bool edge, const NetParams& np, int skew_draws, const std::string& csv_path,
             const std::string& json_path) {
  auto c = parse_collective(coll_name);
  if (!c) throw Error(Error::Kind::invalid_argument, "unknown collective '" + coll_name + "'");
  const double n = static_cast<double>(sim::parse_size(size));
  std::vector<coll::Algorithm> algos;
  if (algo_name == "all") {
    algos = algorithms_for(*c);
  } else {
    coll::Algorithm a;
    if (!coll::parse_algorithm(algo_name, a))
      throw Error(Error::Kind::invalid_argument, "unknown algorithm '" + algo_name + "'");
    algos = {a};
  }
  fmt::print("{} of {} on {} ranks; link {} Gb/s, alpha {:.2f} us/step, {}\n\n", name(*c),
             sim::format_size(n), ranks, np.link_gbps, np.alpha() * 1e6,
             edge ? "Edge-INC (NIC-driven) host algorithms" : "host-driven");
  // The start skew (emulated testbed) adds a column, CSV columns and JSON keys only when on.
  const bool skewed = np.start_skew() && ranks > 1;
  const double skew_width = np.start_skew_s(n), skew_wait = skewed ? sim::start_skew_wait(ranks, skew_draws) : 0;
  fmt::print("{:<20} {:>8} {:>12} {:>12} {:>11} {:>11} {:>11}{} {:>11} {:>9}{}\n", "algorithm", "rounds",
             "sent/rank", "reduced", "latency", "bandwidth", "reduction", skewed ? fmt::format(" {:>11}", "skew") : "",
             "total", "busbw", from_schedules ? "  schedule check" : "");
  bool uncharged = false;  // an algorithm of the table gets no skew term
  json out = json::array();
  std::string csv = "collective,algorithm,ranks,bytes,rounds,bytes_sent,bytes_reduced,inc_bytes,latency_s,bandwidth_s,reduce_s,total_s,busbw_GBps,schedule_check";
  csv += skewed ? ",start_skew_s,skew_s\n" : "\n";
  for (auto a : algos) {
    sim::StepCounts cf;
    try {
      cf = sim::closed_form_counts(*c, a, ranks, n);
    } catch (const Error& e) {
      fmt::print("{:<20} {}\n", coll::name(a), e.what());
      continue;
    }
    std::string check;
    if (from_schedules) {
      try {
        sim::StepCounts sc = sim::schedule_counts(*c, a, ranks, static_cast<std::uint64_t>(n));
        const bool same = sc.rounds == cf.rounds && std::fabs(sc.bytes_sent - cf.bytes_sent) <= 1e-9 * n + 64 * ranks &&
                          std::fabs(sc.inc_bytes - cf.inc_bytes) <= 1e-9 * n + 64 * ranks;
        check = same ? "agrees" : fmt::format("DIFFERS: rounds {} bytes {:.0f} inc {:.0f}", sc.rounds, sc.bytes_sent, sc.inc_bytes);
      } catch (const std::exception& e) {
        check = std::string("n/a: ") + e.what();
      }
    }
    sim::Cost k = sim::cost(cf, np, edge ? sim::Offload::edge : sim::Offload::host);
    k.skew_s = sim::start_skew_cost(*c, a, ranks, n, np, skew_draws);
    k.total_s += k.skew_s;
    const bool charged = skewed && sim::start_skew_couples(*c, a);
    uncharged = uncharged || (skewed && !charged);
    // nccl-tests bus bandwidth factor: what a bandwidth-optimal host algorithm moves per rank.
    double factor = 1;
    if (*c == Collective::allreduce) factor = 2.0 * (ranks - 1) / ranks;
    if (*c == Collective::reduce_scatter || *c == Collective::allgather || *c == Collective::alltoall)
      factor = double(ranks - 1) / ranks;
    const double busbw = k.total_s > 0 ? n * factor / k.total_s / 1e9 : 0;
    fmt::print("{:<20} {:>8} {:>12} {:>12} {:>11} {:>11} {:>11}{} {:>11} {:>7.1f}GB/s{}\n", coll::name(a), cf.rounds,
               sim::format_size(cf.bytes_sent + cf.inc_bytes), sim::format_size(cf.bytes_reduced),
               tstr(k.latency_s), tstr(k.bandwidth_s), tstr(k.reduce_s),
               skewed ? fmt::format(" {:>11}", charged ? tstr(k.skew_s) : "-") : "", tstr(k.total_s), busbw,
               check.empty() ? "" : "  " + check);
    out.push_back({{"collective", std::string(name(*c))}, {"algorithm", std::string(coll::name(a))},
                   {"ranks", ranks}, {"bytes", n}, {"rounds", cf.rounds}, {"bytes_sent", cf.bytes_sent},
                   {"bytes_reduced", cf.bytes_reduced}, {"inc_bytes", cf.inc_bytes},
                   {"latency_s", k.latency_s}, {"bandwidth_s", k.bandwidth_s}, {"reduce_s", k.reduce_s},
                   {"total_s", k.total_s}, {"busbw_GBps", busbw}, {"schedule_check", check},
                   {"host_mem_bytes", sim::host_memory_bytes(cf, edge ? sim::Offload::edge : sim::Offload::host)}});
    if (skewed)
      out.back().update({{"skew_s", k.skew_s},
                         {"start_skew", {{"width_s", skew_width}, {"draws", skew_draws}, {"wait_fraction", skew_wait},
                                         {"charged", charged}}}});
    csv += fmt::format("{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.4f},{}", name(*c), coll::name(a), ranks,
                       n, cf.rounds, cf.bytes_sent, cf.bytes_reduced, cf.inc_bytes, k.latency_s,
                       k.bandwidth_s, k.reduce_s, k.total_s, busbw, check);
    csv += skewed ? fmt::format(",{:.9g},{:.9g}\n", skew_width, k.skew_s) : "\n";
  }
  if (skewed)
    fmt::print("\nStart skew (emulated testbed): the ranks start uniform in [0, S], S = {} us + {} us per MiB = {},\n"
               "independently in each of {} draws (--start-skew-draws; inc sim's default 16), and the times are inc\n"
               "bench's figure, the most over ranks of a rank's mean time from its own start. Every rank ends after\n"
               "the latest one starts, so the skew column is S x (p/(p+1) - E[least of p means of {} uniforms]) =\n"
               "S x {:.4f} (docs/MODEL.md, Start skew).{}\n",
               np.start_skew_us, np.start_skew_us_per_MiB, tstr(skew_width), skew_draws, skew_draws, skew_wait,
               uncharged ? "\n'-': no term: a broadcast's rank waits only for its path from the root, and the latest\n"
                           "rank of a Core-INC allgather adds only its own block."
                         : "");
  fmt::print("\nThese figures assume full bisection (every message at link rate). On an oversubscribed or\n"
             "unevenly routed fabric use `inc sim run`: its model column charges each step its most-loaded\n"
             "link (docs/MODEL.md, Oversubscription and contention).\n");
  if (!csv_path.empty()) write_file(csv_path, csv);
  if (!json_path.empty()) write_file(json_path, out.dump(2) + "\n");
  return 0;
}

// ---- iteration -------------------------------------------------------------------------------

int run_iteration(sim::TrainingConfig cfg, const std::string& json_path) {
  const sim::IterationResult r = sim::model_iteration(cfg);
  fmt::print("training iteration: {}\n", cfg.name);
  if (cfg.parameters > 0)
    fmt::print("  {:.3g} parameters, dp {} tp {} pp {} ep {}{}, {} accelerators\n", cfg.parameters, cfg.dp,
               cfg.tp, cfg.pp, cfg.ep, cfg.fsdp ? " (FSDP)" : "", cfg.dp * cfg.tp * cfg.pp);
  fmt::print("  compute {}  pipeline bubble {}\n\n", tstr(r.compute_s), tstr(r.bubble_s));
  fmt::print("{:<32} {:<18} {:>7} {:>11} {:>9} {:>11} {:>11} {:>8} {:>12} {:>12}\n", "communication", "host algorithm", "ranks",
             "bytes/call", "calls", "host", "Core-INC", "overlap", "exposed host", "exposed INC");
  json lines = json::array();
  for (const auto& l : r.lines) {
    fmt::print("{:<32} {:<18} {:>7} {:>11} {:>9.0f} {:>11} {:>11} {:>7.0f}% {:>12} {:>12}\n", l.what, l.host_algo, l.ranks,
               sim::format_size(l.bytes), l.calls, tstr(l.host_s), tstr(l.inc_s), l.overlap * 100,
               tstr(l.exposed_host_s), tstr(l.exposed_inc_s));
    lines.push_back({{"what", l.what}, {"collective", std::string(name(l.coll))}, {"host_algorithm", l.host_algo}, {"ranks", l.ranks},
                     {"bytes", l.bytes}, {"calls", l.calls}, {"host_s", l.host_s}, {"inc_s", l.inc_s},
                     {"overlap", l.overlap}, {"exposed_host_s", l.exposed_host_s},
                     {"exposed_inc_s", l.exposed_inc_s}});
  }
  fmt::print("\niteration with host collectives: {}  (exposed communication {} of it)\n", tstr(r.iter_host_s),
             pct(r.comm_share_host));
  fmt::print("iteration with Core-INC:         {}\n", tstr(r.iter_inc_s));
  fmt::print("end-to-end gain:                 {}\n", pct(r.gain));
  if (!json_path.empty()) {
    json j = {{"name", cfg.name}, {"compute_s", r.compute_s}, {"bubble_s", r.bubble_s}, {"lines", lines},
              {"iteration_host_s", r.iter_host_s}, {"iteration_inc_s", r.iter_inc_s},
              {"comm_share_host", r.comm_share_host}, {"gain", r.gain}};
    write_file(json_path, j.dump(2) + "\n");
  }
  return 0;
}

// ---- paper-figure5 ---------------------------------------------------------------------------

int run_figure5(const NetParams& np, const std::string& out_dir, bool plot) {
  const sim::PaperFigure5 f = sim::paper_figure5(np);
  const double p = f.nodes;
  fmt::print("The paper's Figure 5: data-parallel training, Allreduce of {} on {} nodes at {} Gb/s\n",
             sim::format_size(f.bytes), f.nodes, np.link_gbps);
  fmt::print("(our parameters: alpha = {:.2f} us per ring step = {} us overhead + {} hops x {} us; "
             "Core-INC tree of {} levels, {} chunks; reduction overlapped)\n\n",
             np.alpha() * 1e6, np.host_overhead_us, np.path_hops, np.hop_latency_us, np.inc_tree_levels,
             sim::format_size(np.inc_chunk_bytes));
  fmt::print("{:<28} {:>10} {:>10}   {}\n", "", "paper", "ours", "how ours is made up");
  fmt::print("{:<28} {:>10} {:>10}   {} bandwidth (2(p-1)/p n beta) + {} latency ({} steps)\n",
             "host ring Allreduce T_P2P", ms(f.paper_ring_s), ms(f.ring.total_s), ms(f.ring.bandwidth_s),
             ms(f.ring.latency_s), 2 * (f.nodes - 1));
  fmt::print("{:<28} {:>10} {:>10}   {} bandwidth (n beta) + {} tree latency\n", "Core-INC Allreduce T_INC",
             ms(f.paper_inc_s), ms(f.inc.total_s), ms(f.inc.bandwidth_s), tstr(f.inc.latency_s));
  fmt::print("{:<28} {:>10.3f} {:>10.3f}\n", "ratio T_INC / T_P2P", f.paper_inc_s / f.paper_ring_s,
             f.inc.total_s / f.ring.total_s);
  fmt::print("{:<28} {:>10.3f} {:>10}   least-squares fit of 1/(1-f(1-r))-1 to the labels\n",
             "ratio implied by the labels", f.implied_ratio, "");
  fmt::print("{:<28} {:>10} {:>10}   8 GiB once at link rate\n\n", "bandwidth floor (INC)", "", ms(f.floor_s));
  fmt::print("{:>10} {:^40} {:>14} {:>14}\n", "", "speed-up = iter (ring) / iter (INC) - 1", "", "");
  fmt::print("{:>10} {:>12} {:>16} {:>10} {:>14} {:>14}\n", "comm share", "paper label", "paper's times",
             "ours", "iter (ring)", "iter (INC)");
  // speedup_* = iter_ring / iter_inc - 1 (0.05: the iteration with Core-INC runs 5% faster).
  std::string csv =
      "comm_share,speedup_paper_label,speedup_from_paper_times,speedup_ours,iter_ring_s,iter_inc_s\n";
  json rows = json::array();
  for (const auto& r : f.rows) {
    fmt::print("{:>10} {:>12} {:>16} {:>10} {:>14} {:>14}\n", pct(r.share), fmt::format("{:.0f}%", r.paper_label * 100),
               pct(r.gain_paper_times), pct(r.gain_ours), ms(r.iter_base_s), ms(r.iter_inc_s));
    csv += fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.6f}\n", r.share, r.paper_label, r.gain_paper_times,
                       r.gain_ours, r.iter_base_s, r.iter_inc_s);
    rows.push_back({{"comm_share", r.share}, {"speedup_paper_label", r.paper_label},
                    {"speedup_from_paper_times", r.gain_paper_times}, {"speedup_ours", r.gain_ours}, {"iter_ring_s", r.iter_base_s}, {"iter_inc_s", r.iter_inc_s}});
  }
  const double r_paper = f.paper_inc_s / f.paper_ring_s;
  fmt::print("\nWhere the paper and this model differ:\n");
  fmt::print(" * T_INC: moving {} once over a {} Gb/s link takes {}. Core-INC sends and receives the\n"
             "   vector once (full duplex), so no INC Allreduce can finish below that floor; the\n"
             "   published {} is {} below it. Ours is the floor plus the tree latency: {}.\n",
             sim::format_size(f.bytes), np.link_gbps, ms(f.floor_s), ms(f.paper_inc_s),
             ms(f.floor_s - f.paper_inc_s), ms(f.inc.total_s));
  fmt::print(" * T_P2P: the ring moves 2(p-1)/p x {} per rank, {} at link rate; the paper's {} leaves {} for\n"
             "   {} steps, i.e. {:.2f} us per step. Our alpha is {:.2f} us, hence {}.\n",
             sim::format_size(f.bytes), ms(f.ring_bw_s), ms(f.paper_ring_s), ms(f.paper_ring_s - f.ring_bw_s),
             2 * (f.nodes - 1), (f.paper_ring_s - f.ring_bw_s) / (2 * (p - 1)) * 1e6, np.alpha() * 1e6,
             ms(f.ring.total_s));
  fmt::print(" * Gains: the labels 5/11/18/26/34% fit a ratio r = {:.2f}, close to our {:.2f} (a\n"
             "   bandwidth-bound INC at the floor), not the paper's own 151/352 = {:.2f}, which would\n"
             "   give {:.0f}/{:.0f}/{:.0f}/{:.0f}/{:.0f}%. At a 50% share our gain is {} (r = {:.2f}).\n",
             f.implied_ratio, f.inc.total_s / f.ring.total_s, r_paper, f.rows[0].gain_paper_times * 100,
             f.rows[1].gain_paper_times * 100, f.rows[2].gain_paper_times * 100, f.rows[3].gain_paper_times * 100,
             f.rows[4].gain_paper_times * 100, pct(f.rows[4].gain_ours), f.inc.total_s / f.ring.total_s);

  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    write_file(out_dir + "/figure5.csv", csv);
    json j = {{"bytes", f.bytes}, {"nodes", f.nodes}, {"link_gbps", np.link_gbps}, {"alpha_s", np.alpha()},
              {"paper", {{"ring_s", f.paper_ring_s}, {"inc_s", f.paper_inc_s}, {"speedup_labels", f.paper_gain_labels}}},
              {"ours", {{"ring_s", f.ring.total_s}, {"ring_bandwidth_s", f.ring.bandwidth_s},
                        {"ring_latency_s", f.ring.latency_s}, {"inc_s", f.inc.total_s}}},
              {"bandwidth_floor_s", f.floor_s}, {"ratio_paper_times", r_paper},
              {"ratio_ours", f.inc.total_s / f.ring.total_s}, {"ratio_implied_by_labels", f.implied_ratio},
              {"rows", rows}};
    write_file(out_dir + "/figure5.json", j.dump(2) + "\n");
    if (plot) {
      const std::string data = out_dir + "/figure5.csv";
      std::string body = fmt::format(
          "set datafile separator ','\n"
          "set title 'DP training, {5} Allreduce on {6} nodes at {7} Gb/s: end-to-end gain of Core-INC'\n"
          "set xlabel 'Allreduce share of the baseline iteration'\nset ylabel 'iteration speed-up (%)'\n"
          "set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
          "set boxwidth 0.9\nset yrange [0:*]\nset offsets 0,0,4,0\nset key left top\nset grid ytics\n"
          "plot '{0}' every ::1 using ($2*100):xtic(sprintf('%.0f%%',$1*100)) title 'paper (labels)' lc rgb '#888888', "
          "'' every ::1 using ($3*100) title 'paper times 352/151 ms (r = {1:.2f})' lc rgb '#d95f02', "
          "'' every ::1 using ($4*100) title 'this model {2:.0f}/{3:.0f} ms (r = {4:.2f})' lc rgb '#1b9e77'\n",
          data, r_paper, f.ring.total_s * 1e3, f.inc.total_s * 1e3, f.inc.total_s / f.ring.total_s,
          sim::format_size(f.bytes), f.nodes, np.link_gbps);
      sim::render_plot(out_dir + "/figure5-gain", body);
      std::string body2 = fmt::format(
          "set datafile separator ','\n"
          "set title 'Iteration time, host ring vs Core-INC (this model)'\n"
          "set xlabel 'Allreduce share of the baseline iteration'\nset ylabel 'iteration time (ms)'\n"
          "set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
          "set boxwidth 0.9\nset yrange [0:*]\nset key right top\nset grid ytics\n"
          "plot '{0}' every ::1 using ($5*1000):xtic(sprintf('%.0f%%',$1*100)) title 'host ring' lc rgb '#7570b3', "
          "'' every ::1 using ($6*1000) title 'Core-INC' lc rgb '#1b9e77'\n",
          data);
      sim::render_plot(out_dir + "/figure5-iteration", body2);
      fmt::print("\nwrote {0}/figure5.csv, figure5.json, figure5-gain.png/.svg, figure5-iteration.png/.svg\n", out_dir);
    } else {
      fmt::print("\nwrote {0}/figure5.csv, {0}/figure5.json (plots skipped)\n", out_dir);
    }
  }
  return 0;
}

}  // namespace

int cmd_model(int argc, char** argv) {
  CLI::App app{"Analytical alpha-beta-gamma model of collectives and training iterations (docs/MODEL.md)", "inc model"};
  app.require_subcommand(1);
  NetParams np;
  NetOptions netopt;

  auto* cost = app.add_subcommand("cost", "cost of each algorithm of one collective");
  std::string coll_name = "allreduce", size = "8GiB", algo = "all", csv, json_out;
  int ranks = 1024;
  bool from_sched = false, edge = false;
  int skew_draws = sim::kStartSkewDraws;
  cost->add_option("-c,--collective", coll_name, "allreduce, reduce_scatter, allgather, broadcast, alltoall, barrier")->capture_default_str();
  cost->add_option("-n,--ranks", ranks, "ranks")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cost->add_option("-b,--bytes", size, "collective size (8GiB, 1MB, ...; see MODEL.md)")->capture_default_str();
  cost->add_option("-a,--algo", algo, "algorithm or 'all'")->capture_default_str();
  cost->add_flag("--from-schedules", from_sched, "also derive the counts from the real schedules and compare");
  cost->add_flag("--edge", edge, "host algorithms driven by the NIC (Edge-INC)");
  cost->add_option("--csv", csv, "write CSV here");
  cost->add_option("--json", json_out, "write JSON here");
  cost->add_option("--start-skew-draws", skew_draws,
                   "start skew: draws (inc bench's calls) its figure is the most over ranks of the mean over")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  netopt.add(*cost, np);

  auto* iter = app.add_subcommand("iteration", "training-iteration time, host vs Core-INC collectives");
  std::string cfg_file, it_json;
  double compute_ms = -1, share = -1;
  std::string ar_size;
  int ar_ranks = 0;
  iter->add_option("-f,--config", cfg_file, "TOML model description (see models/)");
  iter->add_option("--compute-ms", compute_ms, "explicit: compute time per iteration");
  iter->add_option("--allreduce", ar_size, "explicit: bytes allreduced per iteration (non-overlapped)");
  iter->add_option("--ranks", ar_ranks, "explicit: ranks of that allreduce");
  iter->add_option("--share", share, "explicit: set compute so that the host allreduce is this share of the iteration");
  iter->add_option("--json", it_json, "write JSON here");
  netopt.add(*iter, np);

  auto* fig = app.add_subcommand("paper-figure5", "reproduce the paper's Figure 5 with our numbers beside the paper's");
  std::string out_dir = "paper-figure5";
  bool no_plot = false;
  fig->add_option("-o,--out", out_dir, "directory for CSV, JSON, PNG and SVG")->capture_default_str();
  fig->add_flag("--no-plot", no_plot, "skip the gnuplot figures");
  netopt.add(*fig, np);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*cost) return run_cost(coll_name, ranks, size, algo, from_sched, edge, netopt.resolve(np, *cost), skew_draws, csv,
                                json_out);
    if (*fig) {
      NetParams p = netopt.resolve(np, *fig);
      return run_figure5(p, out_dir, !no_plot);
    }
    if (*iter) {
      sim::TrainingConfig cfg;
      if (!cfg_file.empty()) {
        cfg = sim::load_training_config(cfg_file);
        if (!netopt.file.empty() || iter->count("--link-gbps") || iter->count("--hops") || iter->count("--overhead-us"))
          cfg.net = netopt.resolve(np, *iter);
      } else {
        if (ar_size.empty() || ar_ranks < 2)
          throw Error(Error::Kind::invalid_argument,
                      "inc model iteration: give --config FILE, or --allreduce SIZE --ranks N with --compute-ms or --share");
        cfg.net = netopt.resolve(np, *iter);
        cfg.extra_allreduce_bytes = static_cast<double>(sim::parse_size(ar_size));
        cfg.extra_ranks = ar_ranks;
        if (share > 0 && share < 1) {
          double t = 1e300;  // the fastest host algorithm, as model_iteration uses
          for (auto a : {coll::Algorithm::ring, coll::Algorithm::recursive_doubling, coll::Algorithm::rabenseifner})
            t = std::min(t, sim::collective_cost(Collective::allreduce, a, ar_ranks, cfg.extra_allreduce_bytes, cfg.net).total_s);
          cfg.compute_s = t * (1 - share) / share;
        } else if (compute_ms >= 0) {
          cfg.compute_s = compute_ms / 1e3;
        } else {
          throw Error(Error::Kind::invalid_argument, "inc model iteration: give --compute-ms or --share (0 < share < 1)");
        }
        cfg.name = fmt::format("allreduce of {} on {} ranks", ar_size, ar_ranks);
      }
      return run_iteration(cfg, it_json);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc model: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace inc::tools
