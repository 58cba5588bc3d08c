#include "sim/contention.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "inc/types.hpp"

namespace inc::sim {

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
  std::vector<double> bytes(topo.links().size(), 0);
  std::vector<std::uint32_t> flows(topo.links().size(), 0);
  std::vector<std::uint32_t> touched, cursor(P.rank_begin.begin(), P.rank_begin.end() - 1);
  double worst_load = 0;
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
                     flows.data());
          q0 = path.data();
          nq = path.size();
        }
        for (std::size_t q = 0; q < nq; ++q) {
          const std::uint32_t l = q0[q];
          if (flows[l]++ == 0) touched.push_back(l);
          bytes[l] += static_cast<double>(P.ops[i].bytes);
        }
      }
    }
    if (!any) break;
    double t = 0;
    for (std::uint32_t l : touched) {
      const double tl = bytes[l] / topo.link(l).bw;
      if (tl > t) t = tl;
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
    out.steps = k + 1;
  }
  return out;
}

Contention contention_symmetric(const Program& T, int p, const std::vector<int>& hosts, const Topology& topo) {
  Contention out;
  if (static_cast<int>(hosts.size()) != p)
    throw Error(Error::Kind::config, fmt::format("contention: {} ranks but {} hosts", p, hosts.size()));
  const std::vector<std::uint32_t> step = program_steps(T);  // the same on every rank
  const bool adaptive = topo.spec().routing == Routing::adaptive;
  std::vector<double> bytes(topo.links().size(), 0);
  std::vector<std::uint32_t> flows(topo.links().size(), 0), touched, path;
  double worst_load = 0;
  for (std::uint32_t i = 0; i < T.num_ops();) {
    const std::uint32_t k = step[i];
    std::uint32_t e = i;
    while (e < T.num_ops() && step[e] == k) ++e;
    for (int r = 0; r < p; ++r)
      for (std::uint32_t o = i; o < e; ++o) {
        if (T.ops[o].kind != coll::OpKind::send) continue;
        const int a = hosts[static_cast<std::size_t>(r)], b = hosts[static_cast<std::size_t>((T.ops[o].peer + r) % p)];
        path.clear();
        if (!topo.route(a, b, path, adaptive ? flows.data() : nullptr))
          throw Error(Error::Kind::config, fmt::format("contention: no path from host {} to host {}", a, b));
        for (std::uint32_t l : path) {
          if (flows[l]++ == 0) touched.push_back(l);
          bytes[l] += static_cast<double>(T.ops[o].bytes);
        }
      }
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
    out.steps = k + 1;
    i = e;
  }
  return out;
}

}  // namespace inc::sim
