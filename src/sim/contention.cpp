#include "sim/contention.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "inc/types.hpp"

namespace inc::sim {

namespace {

// The messages of one step on the links: per-link bytes and message counts; close() charges the
// step its most-loaded link and clears it for the next.
struct StepLoad {
  const Topology& topo;
  std::vector<double> bytes;
  std::vector<std::uint32_t> flows, touched;
  double worst_load = 0;

  explicit StepLoad(const Topology& t) : topo(t), bytes(t.links().size(), 0), flows(t.links().size(), 0) {}
  void add(std::uint32_t l, double b) {
    if (flows[l]++ == 0) touched.push_back(l);
    bytes[l] += b;
  }
  double close(Contention& out, std::uint32_t step) {  // returns the step's time
    double t = 0;
    for (std::uint32_t l : touched) {
      const double tl = bytes[l] / topo.link(l).bw;
      t = std::max(t, tl);
      if (tl > worst_load) {
        worst_load = tl;
        out.worst_link = l;
      }
      out.worst_step_share = std::max(out.worst_step_share, static_cast<double>(flows[l]));
      bytes[l] = 0;
      flows[l] = 0;
    }
    touched.clear();
    out.bandwidth_s += t;
    out.steps = step + 1;
    return t;
  }
};

}  // namespace

Contention contention(const Program& P, const std::vector<int>& hosts, const Topology& topo) {
  Contention out;
  if (static_cast<int>(hosts.size()) != P.nranks)
    throw Error(Error::Kind::config, fmt::format("contention: {} ranks but {} hosts", P.nranks, hosts.size()));
  const std::vector<std::uint32_t> step = program_steps(P);
  // One route per connection (ordered rank pair).
  std::vector<std::uint32_t> route_begin(P.num_pairs + 1, 0), routes;
  {
    std::vector<std::vector<std::uint32_t>> r(P.num_pairs);
    for (std::uint32_t op = 0; op < P.num_ops(); ++op) {
      const std::uint32_t pr = P.pair_of[op];
      if (P.ops[op].kind != coll::OpKind::send || !r[pr].empty()) continue;
      const int a = hosts[static_cast<std::size_t>(P.rank_of(op))], b = hosts[static_cast<std::size_t>(P.ops[op].peer)];
      if (!topo.route(a, b, r[pr]))
        throw Error(Error::Kind::config, fmt::format("contention: no path from host {} to host {}", a, b));
    }
    for (std::uint32_t pr = 0; pr < P.num_pairs; ++pr) {
      route_begin[pr + 1] = route_begin[pr] + static_cast<std::uint32_t>(r[pr].size());
      routes.insert(routes.end(), r[pr].begin(), r[pr].end());
    }
  }
  // Step by step over all ranks (a cursor per rank): per-link bytes and flows of the step.
  StepLoad load(topo);
  std::vector<std::uint32_t> cursor(P.rank_begin.begin(), P.rank_begin.end() - 1);
  const bool adaptive = topo.spec().routing == Routing::adaptive;
  std::vector<std::uint32_t> path;
  for (std::uint32_t k = 0;; ++k) {
    bool any = false;
    for (int r = 0; r < P.nranks; ++r) {
      std::uint32_t& i = cursor[static_cast<std::size_t>(r)];
      for (; i < P.rank_begin[r + 1] && step[i] == k; ++i) {
        any = true;
        if (P.ops[i].kind != coll::OpKind::send) continue;
        const std::uint32_t pr = P.pair_of[i];
        const std::uint32_t* q0 = routes.data() + route_begin[pr];
        std::size_t nq = route_begin[pr + 1] - route_begin[pr];
        if (adaptive) {  // least-loaded candidate given the step's messages routed so far
          path.clear();
          topo.route(hosts[static_cast<std::size_t>(r)], hosts[static_cast<std::size_t>(P.ops[i].peer)], path,
                     load.flows.data());
          q0 = path.data();
          nq = path.size();
        }
        for (std::size_t q = 0; q < nq; ++q) load.add(q0[q], static_cast<double>(P.ops[i].bytes));
      }
    }
    if (!any) break;
    load.close(out, k);
  }
  return out;
}

Contention contention_symmetric(const Program& T, int p, const std::vector<int>& hosts, const Topology& topo) {
  Contention out;
  if (static_cast<int>(hosts.size()) != p)
    throw Error(Error::Kind::config, fmt::format("contention: {} ranks but {} hosts", p, hosts.size()));
  const std::vector<std::uint32_t> step = program_steps(T);  // the same on every rank
  const bool adaptive = topo.spec().routing == Routing::adaptive;
  StepLoad load(topo);
  std::vector<std::uint32_t> path;
  // Under a static routing a step's load depends only on its sends (peer, bytes): a ring's
  // 2(p-1) steps are one or two kinds, each routed over all ranks once (p routes instead of
  // p x steps; 16,384 ranks: 10^9 routes otherwise). A repeated step adds the same time and
  // changes no maximum, so replaying its time gives the same result.
  std::map<std::vector<std::pair<std::int32_t, std::uint64_t>>, double> seen;
  std::vector<std::pair<std::int32_t, std::uint64_t>> sig;
  for (std::uint32_t i = 0; i < T.num_ops();) {
    const std::uint32_t k = step[i];
    std::uint32_t e = i;
    while (e < T.num_ops() && step[e] == k) ++e;
    sig.clear();
    for (std::uint32_t o = i; o < e; ++o)
      if (T.ops[o].kind == coll::OpKind::send) sig.emplace_back(T.ops[o].peer, T.ops[o].bytes);
    if (!adaptive) {
      if (const auto it = seen.find(sig); it != seen.end()) {
        out.bandwidth_s += it->second;
        out.steps = k + 1;
        i = e;
        continue;
      }
    }
    for (int r = 0; r < p; ++r)
      for (std::uint32_t o = i; o < e; ++o) {
        if (T.ops[o].kind != coll::OpKind::send) continue;
        const int a = hosts[static_cast<std::size_t>(r)], b = hosts[static_cast<std::size_t>((T.ops[o].peer + r) % p)];
        path.clear();
        if (!topo.route(a, b, path, adaptive ? load.flows.data() : nullptr))
          throw Error(Error::Kind::config, fmt::format("contention: no path from host {} to host {}", a, b));
        for (std::uint32_t l : path) load.add(l, static_cast<double>(T.ops[o].bytes));
      }
    const double t = load.close(out, k);
    if (!adaptive) seen.emplace(sig, t);
    i = e;
  }
  return out;
}

}  // namespace inc::sim
