// Simulator::Impl, folding a rotation-symmetric job by the symmetry of its routes (issue 12).
//
// Rank r + S of a symmetric ring runs rank r's schedule with every peer shifted by S. If a
// bijection pi of the links the job uses maps each route of rank r onto the same route of rank
// r + S link by link, keeps every link's bandwidth, latency and tier, and every orbit of pi has
// P / S links (so no route meets two links of one orbit), the whole run is pi-equivariant: ranks
// r and r + S see the same times, rates and events. The folded run simulates ranks 0..S-1; the
// links of their own routes are the orbits' representatives (so their flows keep their real
// routes), and a representative carries one flow of each class that crosses its orbit, as each
// link of the orbit does in the full run, so the max-min rates, and with them every time, are
// the full run's. A receiver's host memory bus, which its sends share, is its representative
// host's (host_rep). Contiguous placements on trees fold by a leaf (or a pod); a single switch
// folds to one rank.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/engine_impl.hpp"

namespace inc::sim {

std::uint32_t Simulator::Impl::fold_period(const Job& J) {
  const std::uint32_t P = J.T.P;
  link_rep.clear();
  host_rep.clear();
  if (P < 2 || topo.spec().routing == Routing::adaptive) return P;  // adaptive reads every link's load
  // The connections' peer offsets (a ring: +1), and every rank's routes to them.
  std::vector<std::uint32_t> peers;
  for (std::uint32_t i = 0; i < J.T.ops.size(); ++i)
    if (J.T.ops[i].kind == OpKind::send) peers.push_back(static_cast<std::uint32_t>(J.T.ops[i].peer));
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  if (peers.empty()) return P;
  const std::size_t Q = peers.size();
  std::vector<std::vector<std::uint32_t>> routes(std::size_t{P} * Q);
  for (std::uint32_t r = 0; r < P; ++r)
    for (std::size_t k = 0; k < Q; ++k) {
      const int hs = J.spec.hosts[r], hd = J.spec.hosts[(r + peers[k]) % P];
      if (!topo.route(hs, hd, routes[r * Q + k])) return P;  // the run reports the failed route
    }
  const auto same = [&](std::uint32_t a, std::uint32_t b) {
    const Link &x = topo.link(a), &y = topo.link(b);
    return x.bw == y.bw && x.latency == y.latency && x.tier == y.tier;
  };
  std::vector<std::uint32_t> rep(n_links), img(n_links), pre(n_links), orbit(n_links);
  for (std::uint32_t S = 1; S < P; ++S) {
    if (P % S != 0) continue;
    // A message between ranks of one class would cross its representative host's memory bus
    // twice (as its read and its write), which max-min with one flow cannot express.
    if (mem_on() && std::any_of(peers.begin(), peers.end(), [&](std::uint32_t q) { return q % S == 0; })) continue;
    std::fill(rep.begin(), rep.end(), ~0u);
    std::fill(img.begin(), img.end(), ~0u);
    std::fill(pre.begin(), pre.end(), ~0u);
    std::fill(orbit.begin(), orbit.end(), 0u);
    bool ok = true;
    for (std::uint32_t r = 0; r < P && ok; ++r)
      for (std::size_t k = 0; k < Q && ok; ++k) {
        const auto& cur = routes[r * Q + k];
        const auto& base = routes[(r % S) * Q + k];
        const auto& next = routes[((r + S) % P) * Q + k];
        if (cur.size() != base.size() || cur.size() != next.size()) {
          ok = false;
          break;
        }
        for (std::size_t h = 0; h < cur.size() && ok; ++h) {
          const std::uint32_t l = cur[h], b = base[h], m = next[h];
          // pi(l) = m, one image and one preimage per link; l's representative is b.
          ok = (img[l] == ~0u || img[l] == m) && (pre[m] == ~0u || pre[m] == l) && (rep[l] == ~0u || rep[l] == b) &&
               same(l, b);
          img[l] = m;
          pre[m] = l;
          if (ok && rep[l] == ~0u) {
            rep[l] = b;
            ++orbit[b];
          }
        }
      }
    for (std::uint32_t l = 0; l < n_links && ok; ++l)
      ok = rep[l] == ~0u || orbit[rep[l]] == P / S;
    if (!ok) continue;
    link_rep = rep;
    host_rep.resize(static_cast<std::size_t>(topo.num_hosts()));
    for (int h = 0; h < topo.num_hosts(); ++h) host_rep[static_cast<std::size_t>(h)] = h;
    for (std::uint32_t r = 0; r < P; ++r) host_rep[static_cast<std::size_t>(J.spec.hosts[r])] = J.spec.hosts[r % S];
    return S;
  }
  return P;
}

void Simulator::Impl::unfold() {
  if (fold == 1) return;
  const double f = fold;
  for (std::uint32_t l = 0; l < n_links; ++l)
    if (link_rep[l] != ~0u && link_rep[l] != l) {
      link_bytes[l] = link_bytes[link_rep[l]];
      for (auto& jl : job_link_bytes) jl[l] = jl[link_rep[l]];
    }
  for (auto& J : jobs) {
    J.res.fold = fold;
    J.res.messages *= fold;
    J.res.bytes_injected *= f;
    J.res.link_bytes_total *= f;
  }
  flows *= fold;
  routed_flows *= fold;
  collided_flows *= fold;
}

}  // namespace inc::sim
