#include "sim/analytical.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "sim/config.hpp"

namespace inc::sim {

using coll::Algorithm;
using coll::OpKind;

std::string validate(const NetParams& p) {
  if (!(p.link_gbps > 0)) return "link_gbps: must be > 0";
  if (!(p.hop_latency_us >= 0)) return "hop_latency_us: must be >= 0";
  if (p.path_hops < 1) return "path_hops: must be >= 1";
  if (!(p.host_overhead_us >= 0)) return "host_overhead_us: must be >= 0";
  if (!(p.nic_overhead_us >= 0)) return "nic_overhead_us: must be >= 0";
  if (!(p.ready_notice_us >= 0)) return "ready_notice_us: must be >= 0";
  if (!(p.send_buffer_bytes >= 0)) return "send_buffer: must be >= 0 (0 = a send is done on delivery)";
  if (!(p.reduce_GBps >= 0)) return "reduce_GBps: must be >= 0 (0 = free)";
  if (!(p.host_mem_GBps >= 0)) return "host_mem_GBps: must be >= 0 (0 = unlimited)";
  if (!(p.switch_reduce_GBps >= 0)) return "switch_reduce_GBps: must be >= 0 (0 = line rate)";
  if (!(p.inc_chunk_bytes > 0)) return "inc_chunk_bytes: must be > 0";
  if (!(p.switch_memory_bytes >= p.inc_chunk_bytes))
    return "switch_memory_bytes: must hold at least one chunk (inc_chunk_bytes)";
  if (p.inc_tree_levels < 1) return "inc_tree_levels: must be >= 1";
  if (p.inc_leaf_fan_in < 0) return "inc_leaf_fan_in: must be >= 0 (0 = a balanced tree)";
  if (!(p.switch_packet_us >= 0)) return "switch_packet_us: must be >= 0 (0 = not modelled)";
  if (!(p.host_packet_us >= 0)) return "host_packet_us: must be >= 0 (0 = not modelled)";
  if (p.cpu_cores < 0) return "cpu_cores: must be >= 0 (0 = every host and switch has its own CPU)";
  if (!(p.link_burst_s >= 0) || !(p.link_burst_bytes >= 0)) return "link_burst: must be >= 0 (0 = no token buckets)";
  if (!(p.link_burst_min_bytes >= 0)) return "link_burst_min: must be >= 0";
  if (!(p.burst_peak_gbps >= 0)) return "burst_peak_gbps: must be >= 0";
  if (!(p.start_skew_us >= 0) || !(p.start_skew_us_per_MiB >= 0)) return "start_skew_us(_per_MiB): must be >= 0 (0 = off)";
  if (p.link_burst_min_bytes > 0 && !p.buckets()) return "link_burst_min: needs link_burst (the buckets are off)";
  if (p.buckets() && !(p.burst_peak_gbps > 0))
    return "burst_peak_gbps: must be > 0 with link_burst set (the rate a link passes its bucket at; links as fast get none)";
  return "";
}

// ---- Costs ---------------------------------------------------------------------------------

Cost inc_pass_cost(double bytes, const NetParams& np, int members) {
  Cost c;
  const int h = np.inc_tree_levels;  // links from a host up to the root switch
  // The tree: per level (h: above the hosts, 1: the root) its switches, the children of the
  // whole level and of its fullest switch.
  auto up = [](double x) { return std::ceil(x - 1e-9); };
  const double n = std::max(1, members);
  const double leaf_k = h == 1 ? n
                        : np.inc_leaf_fan_in > 0 ? std::min(n, static_cast<double>(np.inc_leaf_fan_in))
                                                 : up(std::pow(n, 1.0 / h));
  std::vector<double> switches(static_cast<std::size_t>(h) + 1), children(switches.size()), fullest(switches.size());
  switches[h] = up(n / leaf_k);
  children[h] = n;
  const double upper_k = h > 1 ? up(std::pow(switches[h], 1.0 / (h - 1))) : 1;
  for (int level = h - 1; level >= 1; --level) {
    children[level] = switches[level + 1];
    switches[level] = level == 1 ? 1 : up(children[level] / upper_k);
  }
  double fan_in = 1;  // the most children of one switch
  for (int level = 1; level <= h; ++level) {
    fullest[level] = up(children[level] / switches[level]);
    fan_in = std::max(fan_in, fullest[level]);
  }
  const double beta = np.beta();
  const double chunk = std::min(bytes, np.inc_chunk_bytes);
  // Latency: overhead, up and down the tree, and store-and-forward of one chunk per switch.
  c.latency_s = np.host_overhead_us * 1e-6 + 2 * h * np.hop_s() + (2 * h - 1) * chunk * beta;
  double rate = 1.0 / beta;
  if (np.switch_reduce_GBps > 0) rate = std::min(rate, np.switch_reduce_GBps * 1e9 / std::max(1.0, fan_in));
  // CPU per datagram (one per inc_chunk) of software switches and hosts, as the simulator
  // charges it: per chunk a switch handles one in per child, 2 with its parent (not the root)
  // and the results out (once to hosts with switch_multicast, else one per child); a host sends
  // one and receives one. On their own CPUs the busiest sets the pace; on cpu_cores shared cores
  // (emulated testbed) the sum of all of them over the cores does.
  if (np.switch_packet_us > 0 || np.host_packet_us > 0) {
    const double p_us = np.switch_packet_us, hp_us = np.host_packet_us;
    double busiest = 2 * hp_us, total = 2 * hp_us * n;
    for (int level = 1; level <= h; ++level) {
      const double k = fullest[level];
      const bool multicast = level == h && np.switch_multicast;
      const double parent = level > 1 ? 2 : 0;
      busiest = std::max(busiest, (k + parent + (multicast ? 1 : k)) * p_us);
      total += (children[level] + switches[level] * parent + (multicast ? switches[level] : children[level])) * p_us;
    }
    const double per_chunk_s = 1e-6 * (np.cpu_cores > 0 ? total / np.cpu_cores : busiest);
    if (per_chunk_s > 0) rate = std::min(rate, np.inc_chunk_bytes / per_chunk_s);
  }
  // Slot window: at most W chunks per tree in flight, each held for one round trip.
  const double W = std::max(1.0, std::floor(np.switch_memory_bytes / np.inc_chunk_bytes));
  const double rtt = 2 * h * np.hop_s() + 2 * h * chunk * beta;
  if (rtt > 0) rate = std::min(rate, W * np.inc_chunk_bytes / rtt);
  c.bandwidth_s = bytes / rate;
  c.total_s = c.latency_s + c.bandwidth_s;
  return c;
}

Cost cost(const StepCounts& s, const NetParams& np, Offload off) {
  Cost c;
  const double alpha = off == Offload::edge ? np.alpha_nic() : np.alpha();
  const double p2p_rounds = s.rounds - s.inc_rounds;
  c.latency_s = p2p_rounds * alpha;
  double bw = std::max(s.bytes_sent, s.bytes_recv) * np.beta();  // full duplex links
  if (np.host_mem_GBps > 0) {
    // Every received byte is written by DMA; every sent byte read, except that an Edge-INC
    // NIC forwards received data without parking and re-reading it.
    bw = std::max(bw, host_memory_bytes(s, off) / (np.host_mem_GBps * 1e9));
  }
  c.bandwidth_s = bw;
  c.reduce_s = s.bytes_reduced * np.gamma();
  if (s.inc_rounds > 0) {
    const Cost one = inc_pass_cost(s.inc_bytes / s.inc_rounds, np, static_cast<int>(s.inc_members));
    c.latency_s += s.inc_rounds * one.latency_s;
    double bw_inc = s.inc_rounds * one.bandwidth_s;
    // The NIC reads the contribution from host memory and writes the result back.
    if (np.host_mem_GBps > 0) bw_inc = std::max(bw_inc, 2 * s.inc_bytes / (np.host_mem_GBps * 1e9));
    c.bandwidth_s += bw_inc;
  }
  c.total_s = c.latency_s + c.bandwidth_s + c.reduce_s;
  return c;
}

double host_memory_bytes(const StepCounts& c, Offload off) { return off == Offload::edge ? c.mem_edge : c.mem_host; }

Cost collective_cost(Collective c, Algorithm a, int p, double n, const NetParams& np, Offload off, int skew_draws) {
  Cost k = cost(closed_form_counts(c, a, p, n), np, off);
  k.skew_s = start_skew_cost(c, a, p, n, np, skew_draws);
  k.total_s += k.skew_s;
  return k;
}

// ---- Start skew ----------------------------------------------------------------------------

bool start_skew_couples(Collective c, Algorithm a) {
  return c != Collective::broadcast && !(c == Collective::allgather && a == Algorithm::inc);
}

namespace {
// Gauss-Legendre rule of kNodes nodes on [0, 1] (Newton on the Legendre polynomial's roots).
constexpr int kNodes = 32;
struct GaussLegendre {
  double t[kNodes], w[kNodes];
  GaussLegendre() {
    const double pi = std::acos(-1.0);
    for (int i = 0; i < kNodes; ++i) {
      double x = std::cos(pi * (i + 0.75) / (kNodes + 0.5)), dp = 1;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1, p1 = x;  // P_0, P_1, then up to P_kNodes by Bonnet's recursion
        for (int k = 2; k <= kNodes; ++k) {
          const double p2 = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
          p0 = p1;
          p1 = p2;
        }
        dp = kNodes * (x * p1 - p0) / (x * x - 1);
        const double dx = p1 / dp;
        x -= dx;
        if (std::fabs(dx) < 1e-15) break;
      }
      t[i] = (1 - x) / 2;
      w[i] = 1 / ((1 - x * x) * dp * dp);  // 2 / ((1 - x^2) P'^2), halved for [0, 1]
    }
  }
};
const GaussLegendre& gauss_legendre() {
  static const GaussLegendre g;
  return g;
}

// E[the least of p means of K uniforms on [0, 1]] = the integral over [0, 1] of (1 - B(x))^p,
// B the CDF of such a mean (Bates). K <= 256: B(x) = F_K(K x), F_K the Irwin-Hall CDF of the
// sum, from the recursion F_n(y) = (y F_{n-1}(y) + (n - y) F_{n-1}(y - 1)) / n (non-negative
// weights on [0, n], so no cancellation), at the same fractional points of every unit of y, each
// unit cut in q pieces fine enough for the steepest part, where F_K(y) ~ y^K / K! meets 1/p.
// Beyond, B is taken as its normal limit, mean 1/2 and variance 1/(12K).
double least_mean_of_uniforms(int p, int K) {
  const GaussLegendre& g = gauss_legendre();
  const double P = p;
  double sum = 0;
  if (K > 256) {
    const double sd = std::sqrt(1.0 / (12.0 * K)), lo = 0.5 - 10 * sd, hi = 0.5 + 10 * sd;
    const int pieces = 64;
    const double h = (hi - lo) / pieces;
    for (int i = 0; i < pieces; ++i)
      for (int k = 0; k < kNodes; ++k) {
        const double x = lo + (i + g.t[k]) * h;
        sum += g.w[k] * h * std::pow(0.5 * std::erfc((x - 0.5) / (sd * std::sqrt(2.0))), P);
      }
    return lo + sum;  // below lo every mean is above x with probability 1 - 1e-23
  }
  const double y_star = std::exp((std::lgamma(K + 1.0) - std::log(P)) / K);
  const int q = static_cast<int>(std::clamp(std::ceil(2.0 * K / y_star), 1.0, 16384.0));
  std::vector<double> F(static_cast<std::size_t>(K) + 1), G(F.size());
  for (int i = 0; i < q; ++i)
    for (int k = 0; k < kNodes; ++k) {
      const double t = (i + g.t[k]) / q;  // y = j + t in unit j
      F[0] = t;
      for (int j = 1; j <= K; ++j) F[j] = 1;
      for (int n = 2; n <= K; ++n) {
        for (int j = 0; j < n; ++j) G[j] = ((j + t) * F[j] + (n - j - t) * (j > 0 ? F[j - 1] : 0.0)) / n;
        for (int j = 0; j < n; ++j) F[j] = G[j];
      }
      for (int j = 0; j < K; ++j) sum += g.w[k] / q * std::pow(1 - F[j], P);
    }
  return sum / K;
}
}  // namespace

double start_skew_wait(int p, int draws) {
  if (p <= 1) return 0;
  if (draws < 1) throw Error(Error::Kind::invalid_argument, fmt::format("start skew: {} draws (at least 1)", draws));
  const double P = p;
  if (draws == 1) return (P - 1) / (P + 1);  // E[max - min] of p uniforms
  return P / (P + 1) - least_mean_of_uniforms(p, draws);
}

double start_skew_cost(Collective c, Algorithm a, int p, double n, const NetParams& np, int draws) {
  if (!np.start_skew() || p <= 1 || !start_skew_couples(c, a)) return 0;
  return np.start_skew_s(n) * start_skew_wait(p, draws);
}

// ---- Paper Figure 5 ------------------------------------------------------------------------

double amdahl_gain(double share, double ratio) { return 1.0 / (1.0 - share * (1.0 - ratio)) - 1.0; }

double fit_ratio(const std::vector<double>& shares, const std::vector<double>& gains) {
  auto err = [&](double r) {
    double e = 0;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      const double d = amdahl_gain(shares[i], r) - gains[i];
      e += d * d;
    }
    return e;
  };
  double lo = 0, hi = 1;
  for (int it = 0; it < 200; ++it) {  // error is unimodal in r on [0, 1]
    const double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
    if (err(m1) < err(m2))
      hi = m2;
    else
      lo = m1;
  }
  return (lo + hi) / 2;
}

PaperFigure5 paper_figure5(const NetParams& np, double bytes, int nodes) {
  PaperFigure5 f;
  f.bytes = bytes;
  f.nodes = nodes;
  f.np = np;
  f.ring = collective_cost(Collective::allreduce, Algorithm::ring, nodes, bytes, np);
  f.inc = collective_cost(Collective::allreduce, Algorithm::inc, nodes, bytes, np);
  f.floor_s = bytes * np.beta();
  f.ring_bw_s = 2.0 * (nodes - 1) / nodes * bytes * np.beta();
  f.implied_ratio = fit_ratio(f.shares, f.paper_gain_labels);
  const double r_paper = f.paper_inc_s / f.paper_ring_s;
  const double r_ours = f.inc.total_s / f.ring.total_s;
  for (std::size_t i = 0; i < f.shares.size(); ++i) {
    PaperFigure5::Row row;
    row.share = f.shares[i];
    row.paper_label = f.paper_gain_labels[i];
    row.gain_paper_times = amdahl_gain(row.share, r_paper);
    row.gain_ours = amdahl_gain(row.share, r_ours);
    row.iter_base_s = f.ring.total_s / row.share;
    row.iter_inc_s = row.iter_base_s - f.ring.total_s + f.inc.total_s;
    f.rows.push_back(row);
  }
  return f;
}

// ---- Training iteration --------------------------------------------------------------------

namespace {
double best_host_time(Collective c, int p, double n, const NetParams& np,
                      std::string* which = nullptr) {
  if (p <= 1 || n <= 0) return 0;
  std::vector<Algorithm> cands;
  switch (c) {
    case Collective::allreduce:
      cands = {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner};
      break;
    case Collective::allgather:
      cands = {Algorithm::ring, Algorithm::recursive_doubling};
      break;
    case Collective::reduce_scatter:
      cands = {Algorithm::ring};
      break;
    case Collective::broadcast:
      cands = {Algorithm::binomial_tree, Algorithm::pipelined_chain};
      break;
    case Collective::alltoall:
      cands = {Algorithm::pairwise};
      break;
    case Collective::barrier:
      cands = {Algorithm::dissemination};
      break;
  }
  double best = std::numeric_limits<double>::infinity();
  for (auto a : cands) {
    const double t = collective_cost(c, a, p, n, np).total_s;
    if (t < best) {
      best = t;
      if (which) *which = std::string(coll::name(a));
    }
  }
  return best;
}
double inc_time(Collective c, int p, double n, const NetParams& np) {
  if (p <= 1 || n <= 0) return 0;
  if (c == Collective::alltoall) return best_host_time(c, p, n, np);  // nothing to reduce
  return std::min(best_host_time(c, p, n, np), collective_cost(c, Algorithm::inc, p, n, np).total_s);
}
}  // namespace

IterationResult model_iteration(const TrainingConfig& cfg) {
  IterationResult r;
  const double world = double(cfg.dp) * cfg.tp * cfg.pp;
  const int micro = std::max(1, cfg.micro_batch);
  const double m = cfg.global_batch > 0 ? std::max(1.0, double(cfg.global_batch) / (cfg.dp * micro)) : 1.0;
  if (cfg.compute_s >= 0) {
    r.compute_s = cfg.compute_s;
  } else {
    const double active = cfg.active_parameters > 0 ? cfg.active_parameters : cfg.parameters;
    const double tokens = double(cfg.global_batch) * cfg.seq_len;
    r.compute_s = 6.0 * active * tokens / (world * cfg.flops * cfg.efficiency);
  }
  if (cfg.pp > 1) r.bubble_s = (cfg.pp - 1) / m * r.compute_s;

  auto add = [&](std::string what, Collective c, int ranks, double bytes, double calls,
                 double overlap, const NetParams& np, bool p2p = false) {
    if (ranks <= 1 || bytes <= 0 || calls <= 0) return;
    IterationLine l;
    l.what = std::move(what);
    l.coll = c;
    l.ranks = ranks;
    l.bytes = bytes;
    l.calls = calls;
    l.overlap = overlap;
    if (p2p) {
      l.host_s = l.inc_s = calls * (np.alpha() + bytes * np.beta());
      l.host_algo = "send/recv";
    } else {
      l.host_s = calls * best_host_time(c, ranks, bytes, np, &l.host_algo);
      l.inc_s = calls * inc_time(c, ranks, bytes, np);
    }
    l.exposed_host_s = (1 - overlap) * l.host_s;
    l.exposed_inc_s = (1 - overlap) * l.inc_s;
    r.lines.push_back(l);
  };
  const double shard = cfg.parameters / (double(cfg.tp) * cfg.pp);
  if (cfg.fsdp) {
    add("FSDP allgather (fwd+bwd)", Collective::allgather, cfg.dp, shard * cfg.grad_bytes, 2,
        cfg.overlap_dp, cfg.net);
    add("FSDP reduce_scatter", Collective::reduce_scatter, cfg.dp, shard * cfg.grad_bytes, 1,
        cfg.overlap_dp, cfg.net);
  } else {
    add("DP allreduce", Collective::allreduce, cfg.dp, shard * cfg.grad_bytes, 1, cfg.overlap_dp,
        cfg.net);
  }
  const double act = double(micro) * cfg.seq_len * cfg.hidden * cfg.act_bytes;
  const double layers_per_stage = double(cfg.layers) / cfg.pp;
  add("TP allreduce (4 per layer)", Collective::allreduce, cfg.tp, act, 4 * layers_per_stage * m,
      cfg.overlap_tp, cfg.tp_net);
  if (cfg.pp > 1)
    add("PP send/recv", Collective::broadcast, 2, act, 2 * m, cfg.overlap_pp, cfg.net, true);
  if (cfg.experts > 0)
    add("MoE alltoall (4 per MoE layer)", Collective::alltoall, cfg.ep, act * cfg.top_k,
        4 * layers_per_stage * cfg.moe_layer_fraction * m, cfg.overlap_moe, cfg.net);
  if (cfg.extra_allreduce_bytes > 0)
    add("allreduce (explicit)", Collective::allreduce, cfg.extra_ranks, cfg.extra_allreduce_bytes,
        1, 0, cfg.net);

  double exp_host = 0, exp_inc = 0;
  for (const auto& l : r.lines) {
    exp_host += l.exposed_host_s;
    exp_inc += l.exposed_inc_s;
  }
  r.iter_host_s = r.compute_s + r.bubble_s + exp_host;
  r.iter_inc_s = r.compute_s + r.bubble_s + exp_inc;
  r.comm_share_host = r.iter_host_s > 0 ? exp_host / r.iter_host_s : 0;
  r.gain = r.iter_inc_s > 0 ? r.iter_host_s / r.iter_inc_s - 1 : 0;
  return r;
}

// ---- TOML ----------------------------------------------------------------------------------

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

void read_net(TableReader& t, NetParams& np) {
  np.link_gbps = t.get_double("link_gbps", np.link_gbps, 1e-9, kInf);
  np.hop_latency_us = t.get_double("hop_latency_us", np.hop_latency_us, 0, kInf);
  np.path_hops = static_cast<int>(t.get_int("path_hops", np.path_hops, 1, 64));
  np.host_overhead_us = t.get_double("host_overhead_us", np.host_overhead_us, 0, kInf);
  np.nic_overhead_us = t.get_double("nic_overhead_us", np.nic_overhead_us, 0, kInf);
  np.ready_notice_us = t.get_double("ready_notice_us", np.ready_notice_us, 0, kInf);
  np.send_buffer_bytes =
      static_cast<double>(t.get_size("send_buffer", static_cast<std::uint64_t>(np.send_buffer_bytes), 0));
  np.reduce_GBps = t.get_double("reduce_GBps", np.reduce_GBps, 0, kInf);
  np.host_mem_GBps = t.get_double("host_mem_GBps", np.host_mem_GBps, 0, kInf);
  np.switch_reduce_GBps = t.get_double("switch_reduce_GBps", np.switch_reduce_GBps, 0, kInf);
  np.switch_memory_bytes = static_cast<double>(
      t.get_size("switch_memory", static_cast<std::uint64_t>(np.switch_memory_bytes), 1));
  np.inc_chunk_bytes =
      static_cast<double>(t.get_size("inc_chunk", static_cast<std::uint64_t>(np.inc_chunk_bytes), 1));
  np.inc_tree_levels = static_cast<int>(t.get_int("inc_tree_levels", np.inc_tree_levels, 1, 8));
  np.inc_leaf_fan_in = static_cast<int>(t.get_int("inc_leaf_fan_in", np.inc_leaf_fan_in, 0, 1 << 20));
  np.switch_packet_us = t.get_double("switch_packet_us", np.switch_packet_us, 0, kInf);
  np.host_packet_us = t.get_double("host_packet_us", np.host_packet_us, 0, kInf);
  np.switch_multicast = t.get_bool("switch_multicast", np.switch_multicast);
  np.cpu_cores = static_cast<int>(t.get_int("cpu_cores", np.cpu_cores, 0, 4096));
  if (t.has("link_burst")) t.get_size_or_time("link_burst", np.link_burst_bytes, np.link_burst_s);
  np.link_burst_min_bytes = static_cast<double>(
      t.get_size("link_burst_min", static_cast<std::uint64_t>(np.link_burst_min_bytes)));
  np.burst_peak_gbps = t.get_double("burst_peak_gbps", np.burst_peak_gbps, 0, kInf);
  np.start_skew_us = t.get_double("start_skew_us", np.start_skew_us, 0, kInf);
  np.start_skew_us_per_MiB = t.get_double("start_skew_us_per_MiB", np.start_skew_us_per_MiB, 0, kInf);
  if (np.link_burst_min_bytes > 0 && !np.buckets()) t.fail("link_burst_min", "needs link_burst (the buckets are off)");
  if (np.switch_memory_bytes < np.inc_chunk_bytes)
    t.fail("switch_memory", "must hold at least one chunk (inc_chunk)");
}
}  // namespace

void read_net_params(TableReader& t, NetParams& np) { read_net(t, np); }

NetParams read_net_file(const std::string& path) {
  toml::table root = parse_toml_file(path);
  TableReader top(root, path, "");
  const toml::table* t = nullptr;
  if (!top.sub("network", t)) top.fail("network", "missing table [network]");
  NetParams np;
  TableReader tr(*t, path, "network");
  read_net(tr, np);
  tr.finish();
  top.finish();
  return np;
}

TrainingConfig parse_training_config(std::string_view text, const std::string& file) {
  toml::table root = parse_toml_text(text, file);
  TrainingConfig c;
  c.source = file;
  TableReader top(root, file, "");
  const toml::table* tab = nullptr;
  if (!top.sub("model", tab)) top.fail("model", "missing table [model]");
  {
    TableReader t(*tab, file, "model");
    c.name = t.get_string("name", file);
    c.parameters = t.require_double("parameters", 1, kInf);
    c.active_parameters = t.get_double("active_parameters", 0, 0, c.parameters);
    c.layers = static_cast<int>(t.require_int("layers", 1, 1 << 20));
    c.hidden = static_cast<int>(t.require_int("hidden", 1, 1 << 30));
    c.seq_len = static_cast<int>(t.require_int("seq_len", 1, 1 << 30));
    c.global_batch = static_cast<int>(t.require_int("global_batch", 1, 1 << 30));
    c.micro_batch = static_cast<int>(t.get_int("micro_batch", 1, 1, 1 << 30));
    c.experts = static_cast<int>(t.get_int("experts", 0, 0, 1 << 20));
    c.top_k = static_cast<int>(t.get_int("top_k", 1, 1, 1 << 20));
    c.moe_layer_fraction = t.get_double("moe_layer_fraction", 1.0, 0, 1);
    c.grad_bytes = t.get_double("grad_bytes", 2, 0.125, 16);
    c.act_bytes = t.get_double("act_bytes", 2, 0.125, 16);
    t.finish();
  }
  if (top.sub("parallelism", tab)) {
    TableReader t(*tab, file, "parallelism");
    c.dp = static_cast<int>(t.get_int("dp", 1, 1, 1 << 24));
    c.tp = static_cast<int>(t.get_int("tp", 1, 1, 1 << 16));
    c.pp = static_cast<int>(t.get_int("pp", 1, 1, 1 << 16));
    c.ep = static_cast<int>(t.get_int("ep", 1, 1, 1 << 24));
    c.fsdp = t.get_bool("fsdp", false);
    const std::int64_t world = std::int64_t(c.dp) * c.tp * c.pp;
    const std::int64_t acc = t.get_int("accelerators", world, 1, std::int64_t(1) << 40);
    if (acc != world)
      t.fail("accelerators", fmt::format("{} accelerators but dp x tp x pp = {} x {} x {} = {}",
                                         acc, c.dp, c.tp, c.pp, world));
    if (c.ep > c.dp * c.tp)
      t.fail("ep", fmt::format("expert parallelism {} exceeds dp x tp = {}", c.ep, c.dp * c.tp));
    if (c.global_batch % (c.dp * c.micro_batch) != 0)
      t.fail("dp", fmt::format("global_batch {} is not a multiple of dp x micro_batch = {}",
                               c.global_batch, c.dp * c.micro_batch));
    t.finish();
  }
  if (c.experts > 0 && c.top_k > c.experts)
    config_error(file, 0, "model.top_k", "exceeds the number of experts");
  if (top.sub("hardware", tab)) {
    TableReader t(*tab, file, "hardware");
    c.flops = t.get_double("flops", c.flops, 1, kInf);
    c.efficiency = t.get_double("efficiency", c.efficiency, 1e-6, 1);
    if (t.has("compute_ms")) c.compute_s = t.get_double("compute_ms", 0, 0, kInf) / 1e3;
    t.finish();
  }
  c.tp_net = c.net;
  c.tp_net.link_gbps = 7200;  // NVLink-class scale-up domain by default (900 GB/s)
  c.tp_net.path_hops = 2;
  if (top.sub("network", tab)) {
    TableReader t(*tab, file, "network");
    read_net(t, c.net);
    t.finish();
  }
  if (top.sub("tp_network", tab)) {
    TableReader t(*tab, file, "tp_network");
    read_net(t, c.tp_net);
    t.finish();
  }
  if (top.sub("overlap", tab)) {
    TableReader t(*tab, file, "overlap");
    c.overlap_dp = t.get_double("dp", 0, 0, 1);
    c.overlap_tp = t.get_double("tp", 0, 0, 1);
    c.overlap_pp = t.get_double("pp", 0, 0, 1);
    c.overlap_moe = t.get_double("moe", 0, 0, 1);
    t.finish();
  }
  top.finish();
  return c;
}

TrainingConfig load_training_config(const std::string& path) {
  return parse_training_config(read_text_file(path), path);
}

}  // namespace inc::sim
