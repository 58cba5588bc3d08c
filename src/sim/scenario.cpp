#include "sim/scenario.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "sim/analytical.hpp"
#include "sim/config.hpp"

namespace inc::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string> algorithm_names() {
  return {"ring", "recursive_doubling", "rd", "rabenseifner", "binomial_tree", "tree", "pipelined_chain",
          "chain", "pairwise", "dissemination", "inc", "auto", "automatic"};
}
}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& file) {
  toml::table root = parse_toml_text(text, file);
  Scenario s;
  s.source = file;
  TableReader top(root, file, "");
  const toml::table* t = nullptr;
  if (!top.sub("topology", t)) top.fail("topology", "missing table [topology]");
  {
    TableReader r(*t, file, "topology");
    const std::string kind = r.require_string("kind", {"single_switch", "fat_tree2", "fat_tree3", "rail"});
    s.topo.kind = kind == "single_switch" ? TopoKind::single_switch
                  : kind == "fat_tree2"   ? TopoKind::fat_tree2
                  : kind == "fat_tree3"   ? TopoKind::fat_tree3
                                          : TopoKind::rail;
    s.topo.hosts = static_cast<int>(r.require_int("hosts", 1, 1 << 22));
    s.topo.radix = static_cast<int>(r.get_int("radix", s.topo.radix, 2, 4096));
    s.topo.oversubscription = r.get_double("oversubscription", 1.0, 1e-3, 1e3);
    s.topo.link_gbps = r.get_double("link_gbps", s.topo.link_gbps, 1e-6, kInf);
    if (r.has("link_gbps") && !(s.topo.link_gbps > 0)) r.fail("link_gbps", "must be > 0");
    s.topo.hop_latency_us = r.get_double("hop_latency_us", s.topo.hop_latency_us, 0, kInf);
    s.topo.uplink_gbps = r.get_double("uplink_gbps", 0, 0, kInf);  // 0: link_gbps
    s.topo.gpus_per_server = static_cast<int>(r.get_int("gpus_per_server", s.topo.gpus_per_server, 1, 1024));
    s.topo.nvlink_gbps = r.get_double("nvlink_gbps", s.topo.nvlink_gbps, 1e-6, kInf);
    s.topo.nvlink_latency_us = r.get_double("nvlink_latency_us", s.topo.nvlink_latency_us, 0, kInf);
    s.topo.failed_links = r.get_string_list("failed_links");
    s.topo.ecmp_seed = static_cast<std::uint64_t>(r.get_int("ecmp_seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
    parse_routing(r.get_string("routing", "ecmp", {"ecmp", "dmodk", "adaptive"}), s.topo.routing);
    if (s.topo.kind == TopoKind::rail && s.topo.hosts % s.topo.gpus_per_server != 0)
      r.fail("hosts", fmt::format("{} is not a multiple of gpus_per_server = {}", s.topo.hosts, s.topo.gpus_per_server));
    r.finish();
  }
  s.opt.np.link_gbps = s.topo.link_gbps;
  s.opt.np.hop_latency_us = s.topo.hop_latency_us;
  if (top.sub("network", t)) {
    TableReader r(*t, file, "network");
    for (const char* k : {"link_gbps", "hop_latency_us", "path_hops", "inc_tree_levels", "inc_leaf_fan_in"})
      if (r.has(k)) r.fail(k, "set by the topology in a scenario; remove it from [network]");
    read_net_params(r, s.opt.np);
    r.finish();
  }
  if (top.sub("sim", t)) {
    TableReader r(*t, file, "sim");
    s.opt.max_inc_ops = static_cast<int>(r.get_int("max_inc_ops", s.opt.max_inc_ops, 1, 1 << 20));
    s.opt.max_inc_chunks = static_cast<int>(r.get_int("max_inc_chunks", s.opt.max_inc_chunks, 1, 1 << 20));
    s.seed = static_cast<std::uint64_t>(r.get_int("seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
    s.opt.rtt_weighted = r.get_bool("rtt_weighted", false);
    parse_matching(r.get_string("matching", "dataflow", {"dataflow", "rendezvous", "eager", "ready"}), s.opt.matching);
    s.opt.eager_threshold = r.get_size("eager_threshold", s.opt.eager_threshold);
    s.opt.start_skew_draws = static_cast<int>(r.get_int("start_skew_draws", s.opt.start_skew_draws, 1, 1 << 20));
    s.opt.start_skew_seed = static_cast<std::uint64_t>(
        r.get_int("start_skew_seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
    r.finish();
  }
  const auto jobs = top.sub_array("job");
  if (jobs.empty()) top.fail("job", "missing: at least one [[job]] table");
  int used = 0;
  std::set<int> listed;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    TableReader r(*jobs[i], file, fmt::format("job[{}]", i));
    JobDesc j;
    j.name = r.get_string("name", fmt::format("job{}", i));
    const std::string c = r.get_string("collective", "allreduce",
                                       {"allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall", "barrier"});
    j.coll = *parse_collective(c);
    const std::string a = r.get_string("algorithm", "ring", algorithm_names());
    coll::parse_algorithm(a, j.algo);
    if (j.algo != coll::Algorithm::automatic && !coll::supports(j.coll, j.algo))
      r.fail("algorithm", fmt::format("{} has no '{}' algorithm", c, a));
    j.ranks = static_cast<int>(r.require_int("ranks", 1, 1 << 22));
    j.bytes = r.require_size("bytes");
    const std::string dt = r.get_string("dtype", "f32");
    auto d = parse_data_type(dt);
    if (!d) r.fail("dtype", fmt::format("unknown type '{}'", dt));
    j.dtype = *d;
    const std::string acc = r.get_string("accumulate", "automatic", {"automatic", "narrow", "widen", "wide", "reproducible", "fixed"});
    j.accumulate = *parse_accumulate(acc);
    if (r.has("stream_of")) {
      const std::string of = r.get_string("stream_of", "");
      for (std::size_t k = 0; k < s.jobs.size(); ++k)
        if (s.jobs[k].name == of && s.jobs[k].stream_of < 0) j.stream_of = static_cast<int>(k);
      if (j.stream_of < 0)
        r.fail("stream_of", fmt::format("no earlier job named '{}' (a stream joins a job listed before it)", of));
      if (s.jobs[static_cast<std::size_t>(j.stream_of)].ranks != j.ranks)
        r.fail("ranks", fmt::format("a stream of '{}' has its {} ranks", of, s.jobs[static_cast<std::size_t>(j.stream_of)].ranks));
      if (r.has("placement") || r.has("hosts")) r.fail("stream_of", "a stream runs on its job's hosts: no placement or hosts");
    }
    j.placement = r.get_string("placement", "contiguous", {"contiguous", "random", "list"});
    if (j.placement == "list") {
      if (!r.has("hosts")) r.fail("hosts", "missing value (required with placement = \"list\")");
      for (std::int64_t v : r.get_int_list("hosts")) {
        if (v < 0 || v >= s.topo.hosts)
          r.fail("hosts", fmt::format("entries must be host indices in [0, {})", s.topo.hosts));
        if (!listed.insert(static_cast<int>(v)).second)
          r.fail("hosts", fmt::format("host {} is given to two ranks", v));
        j.hosts.push_back(static_cast<int>(v));
      }
      if (static_cast<int>(j.hosts.size()) != j.ranks)
        r.fail("hosts", fmt::format("{} hosts listed for {} ranks", j.hosts.size(), j.ranks));
    }
    if (j.stream_of < 0) used += j.ranks;
    if (used > s.topo.hosts)
      r.fail("ranks", fmt::format("the jobs up to this one need {} hosts, the topology has {}", used, s.topo.hosts));
    const std::string off = r.get_string("offload", "host", {"host", "edge"});
    j.edge = off == "edge";
    j.start_s = r.get_double("start_us", 0, 0, kInf) * 1e-6;
    j.segment_bytes = r.get_size("segment", 0);
    j.root = static_cast<int>(r.get_int("root", 0, 0, j.ranks - 1));
    r.finish();
    s.jobs.push_back(std::move(j));
  }
  top.finish();
  return s;
}

Scenario load_scenario(const std::string& path) { return parse_scenario(read_text_file(path), path); }

std::vector<JobSpec> place_jobs(const Scenario& s, const Topology& topo) {
  std::vector<int> free_hosts(topo.num_hosts());
  for (int h = 0; h < topo.num_hosts(); ++h) free_hosts[h] = h;
  // Listed hosts are reserved first so that other placements avoid them.
  for (const auto& j : s.jobs)
    for (int h : j.hosts) free_hosts.erase(std::remove(free_hosts.begin(), free_hosts.end(), h), free_hosts.end());
  std::vector<JobSpec> out;
  std::uint64_t k = 0;
  for (const auto& j : s.jobs) {
    JobSpec spec;
    spec.name = j.name;
    spec.params.coll = j.coll;
    spec.params.algo = j.algo;
    spec.params.nranks = j.ranks;
    spec.params.dtype = j.dtype;
    spec.params.accumulate = j.accumulate;
    spec.params.count = count_for_bytes(j.coll, j.ranks, j.bytes, j.dtype);
    spec.params.root = j.root;
    spec.params.segment_bytes = j.segment_bytes;
    if (spec.params.algo == coll::Algorithm::automatic) spec.params.algo = coll::select_algorithm(spec.params);
    spec.edge_offload = j.edge;
    spec.start_s = j.start_s;
    try {
      if (j.stream_of >= 0)
        spec.hosts = out[static_cast<std::size_t>(j.stream_of)].hosts;
      else if (j.placement == "list")
        spec.hosts = j.hosts;
      else if (j.placement == "random")
        spec.hosts = place_random(free_hosts, j.ranks, s.seed * 1000003 + k);
      else
        spec.hosts = place_contiguous(free_hosts, j.ranks);
    } catch (const Error& e) {
      throw Error(Error::Kind::config, fmt::format("{}: job '{}': {}", s.source, j.name, e.what()));
    }
    ++k;
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace inc::sim
