// Simulator::Impl, Core-INC: aggregation trees, chunks hop by hop, switch ALUs and memory.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/engine_impl.hpp"

namespace inc::sim {

// Slot memory is shared by the trees crossing a switch; the job's window is its smallest share.
void Simulator::Impl::setup_inc() {
  std::vector<int> trees_on(topo.num_nodes(), 0);
  for (auto& J : jobs)
    for (const auto& n : J.tree.nodes)
      if (n.member < 0) ++trees_on[n.node];
  const NetParams& np = opt.np;
  for (auto& J : jobs) {
    if (J.tree.nodes.empty()) continue;
    double window = std::numeric_limits<double>::infinity();
    for (const auto& n : J.tree.nodes)
      if (n.member < 0) window = std::min(window, np.switch_memory_bytes / trees_on[n.node]);
    const double c = np.inc_chunk_bytes;
    window = std::max(c, std::floor(window / c) * c);  // whole slots, at least one
    J.inc_window = window;
    double rtt = 0, beta = 0;
    for (const auto& n : J.tree.nodes)
      if (n.parent >= 0) beta = std::max(beta, 1.0 / topo.link(n.up_link).bw);
    // Host -> root -> host: 2 x depth links, store-and-forward of one chunk per hop.
    double lat = 0;
    {
      int x = J.tree.member_node.empty() ? 0 : J.tree.member_node[0];
      while (J.tree.nodes[x].parent >= 0) {
        lat += topo.link(J.tree.nodes[x].up_link).latency;
        x = J.tree.nodes[x].parent;
      }
    }
    rtt = 2 * lat + 2 * J.tree.depth * c * beta;
    J.inc_cap = rtt > 0 ? window / rtt : FlowNet::kNoCap;
    if (J.inc_cap * beta >= 1) J.inc_cap = FlowNet::kNoCap;  // not binding
    J.res.inc_window_cap_GBps = J.inc_cap < FlowNet::kNoCap ? J.inc_cap / 1e9 : 0;
  }
}

std::uint32_t Simulator::Impl::get_run(std::uint32_t ji, std::uint32_t group) {
  Job& J = jobs[ji];
  if (J.runs[group] >= 0) return static_cast<std::uint32_t>(J.runs[group]);
  std::uint32_t ri;
  if (!free_runs.empty()) {
    ri = free_runs.back();
    free_runs.pop_back();
  } else {
    runs.emplace_back();
    ri = static_cast<std::uint32_t>(runs.size() - 1);
  }
  IncRun& R = runs[ri];
  const std::uint32_t first = J.prog.inc_members[J.prog.inc_begin[group]];
  const SimOp& o = J.E[first].op;
  R.job = ji;
  R.group = group;
  R.bcast = o.kind == OpKind::inc_broadcast;
  R.root_member = R.bcast ? o.peer : -1;
  double bytes = 0;
  for (std::uint32_t m = J.prog.inc_begin[group]; m < J.prog.inc_begin[group + 1]; ++m)
    bytes = std::max(bytes, static_cast<double>(J.E[J.prog.inc_members[m]].op.bytes));
  double chunk = std::max(opt.np.inc_chunk_bytes, std::ceil(bytes / std::max(1, opt.max_inc_chunks)));
  R.nchunks = bytes > 0 ? static_cast<std::uint32_t>(std::ceil(bytes / chunk)) : 1;
  R.chunk = bytes > 0 ? chunk : 0;
  R.last_chunk = bytes > 0 ? bytes - chunk * (R.nchunks - 1) : 0;
  R.members_done = 0;
  const std::size_t n = J.tree.nodes.size();
  R.up_avail.assign(n, 0);
  R.down_avail.assign(n, 0);
  R.up_next.assign(n, 0);
  R.up_done.assign(n, 0);
  R.down_next.assign(n, 0);
  R.alu_queued.assign(n, 0);
  R.on_src_path.assign(n, 0);
  if (R.bcast) {
    if (R.root_member < 0 || R.root_member >= J.prog.nranks)
      throw Error(Error::Kind::mismatch, fmt::format("job '{}': inc_broadcast from invalid rank {}", J.spec.name, R.root_member));
    for (int x = J.tree.member_node[R.root_member]; x >= 0; x = J.tree.nodes[x].parent) R.on_src_path[x] = 1;
  }
  // Members whose op has an empty destination (reduce to one rank) get a notice, not data.
  R.has_receiver.assign(n, 0);
  for (std::uint32_t m = J.prog.inc_begin[group]; m < J.prog.inc_begin[group + 1]; ++m) {
    const int member = static_cast<int>(m - J.prog.inc_begin[group]);
    if (!J.E[J.prog.inc_members[m]].op.receives) continue;
    for (int x = J.tree.member_node[member]; x >= 0 && !R.has_receiver[x]; x = J.tree.nodes[x].parent)
      R.has_receiver[x] = 1;
  }
  R.active = true;
  J.runs[group] = static_cast<std::int32_t>(ri);
  return ri;
}

void Simulator::Impl::inc_member_ready(std::uint32_t ji, std::uint32_t op) {
  Job& J = jobs[ji];
  const std::uint32_t ri = get_run(ji, J.E[op].match);
  const int rank = J.E[op].rank;
  J.E[op].state = 2;
  const IncRun& R = runs[ri];
  if (R.bcast && rank != R.root_member) {
    maybe_member_done(ri, J.tree.member_node[rank]);  // data may already be here
    return;
  }
  push(now + opt.np.host_overhead_us * 1e-6, kIncHostReady, ri, static_cast<std::uint32_t>(J.tree.member_node[rank]));
}

void Simulator::Impl::inc_host_ready(std::uint32_t ri, std::uint32_t node) {
  IncRun& R = runs[ri];
  jobs[R.job].res.bytes_injected += R.last_chunk + R.chunk * (R.nchunks - 1);
  if (R.bcast) R.down_avail[node] = R.nchunks;  // the root has its own data
  if (opt.np.host_packet_us > 0) {  // the host's CPU hands the chunks to its link one by one
    host_send_next(ri, node);
    return;
  }
  R.up_avail[node] = R.nchunks;
  try_up(ri, node);
}

// ---- CPU of software switches and hosts (switch_packet_us, host_packet_us, cpu_cores) -------

// `seconds` of work on topo_node's CPU (one thread: after its earlier work), then the event
// `done`. With cpu_cores > 0 a node whose next work is ready waits in one line for a free core;
// each piece of work runs whole on its core and the node rejoins the line's end for its next
// (round robin: the cores are shared about evenly among the nodes that have work, as a
// time-sharing scheduler shares them, at the grain of one chunk's work).
void Simulator::Impl::cpu_submit(std::uint32_t topo_node, double seconds, EvType done, std::uint32_t a, std::uint32_t b) {
  cpu_q[topo_node].push_back(CpuWork{seconds, done, a, b});
  if (cpu_busy[topo_node]) return;
  cpu_busy[topo_node] = 1;
  cpu_line.push_back(topo_node);
  cpu_dispatch();
}

void Simulator::Impl::cpu_dispatch() {
  while (!cpu_line.empty() && (opt.np.cpu_cores == 0 || cores_idle > 0)) {
    const std::uint32_t n = cpu_line.front();
    cpu_line.pop_front();
    if (opt.np.cpu_cores > 0) --cores_idle;
    push(now + cpu_q[n][cpu_head[n]].s, kCpuDone, n);
  }
}

void Simulator::Impl::cpu_done(std::uint32_t n) {
  const CpuWork w = cpu_q[n][cpu_head[n]++];
  if (cpu_head[n] == cpu_q[n].size()) {
    cpu_q[n].clear();
    cpu_head[n] = 0;
    cpu_busy[n] = 0;
  } else {
    cpu_line.push_back(n);
  }
  if (opt.np.cpu_cores > 0) ++cores_idle;
  cpu_dispatch();
  push(now, w.done, w.a, w.b);
}

// Datagrams of one simulated chunk (a simulated chunk may stand for many slots: max_inc_chunks).
double Simulator::Impl::datagrams(const IncRun& R, std::uint32_t c) const {
  return std::max(1.0, std::ceil(chunk_bytes(R, c) / opt.np.inc_chunk_bytes));
}

// A switch's work for chunk c of the tree node `node`: its ALU over every child's input
// (switch_reduce_GBps) and, per datagram, its CPU (switch_packet_us) for every datagram it
// handles for that chunk: one in from each child, one out to and one back from its parent (not
// at the root), and the result out to each child, once when it multicasts to hosts.
double Simulator::Impl::switch_chunk_s(const IncRun& R, int node, std::uint32_t c) const {
  const NetParams& np = opt.np;
  const AggTree::Node& N = jobs[R.job].tree.nodes[node];
  const auto nch = static_cast<double>(N.children.size());
  double s = np.switch_reduce_GBps > 0 ? nch * chunk_bytes(R, c) / (np.switch_reduce_GBps * 1e9) : 0;
  if (np.switch_packet_us > 0) {
    const bool hosts_below = jobs[R.job].tree.nodes[N.children.front()].member >= 0;
    const double out_down = np.switch_multicast && hosts_below ? 1 : nch;
    const double packets = nch + (N.parent >= 0 ? 2 : 0) + out_down;
    s += packets * datagrams(R, c) * np.switch_packet_us * 1e-6;
  }
  return s;
}

// A host sends its chunks one at a time, each after its CPU's per-datagram work, at most the
// job's slots (at least two chunks) ahead of what its link has delivered.
void Simulator::Impl::host_send_next(std::uint32_t ri, std::uint32_t node) {
  IncRun& R = runs[ri];
  const Job& J = jobs[R.job];
  const std::uint32_t c = R.alu_queued[node];
  if (c != R.up_avail[node] || c >= R.nchunks) return;  // one in the CPU already, or all sent
  const double ahead = std::max(2.0, std::floor(J.inc_window / std::max(1.0, R.chunk)));
  if (c >= R.up_done[node] + ahead) return;
  ++R.alu_queued[node];
  cpu_submit(J.tree.nodes[node].node, datagrams(R, c) * opt.np.host_packet_us * 1e-6, kHostSent, ri, node);
}

void Simulator::Impl::host_sent(std::uint32_t ri, std::uint32_t node) {
  ++runs[ri].up_avail[node];
  try_up(ri, node);
  host_send_next(ri, node);
}

// A result chunk a host received counts once its CPU has taken it in.
void Simulator::Impl::host_recvd(std::uint32_t ri, std::uint32_t node) {
  ++runs[ri].down_avail[node];
  maybe_member_done(ri, static_cast<int>(node));
}

void Simulator::Impl::send_edge(std::uint32_t ri, std::uint32_t node, bool up, std::uint32_t c) {
  IncRun& R = runs[ri];
  Job& J = jobs[R.job];
  const AggTree::Node& N = J.tree.nodes[node];
  const std::uint32_t xi = new_xfer();
  Xfer& x = xfers[xi];
  x.kind = up ? XKind::inc_up : XKind::inc_down;
  x.job = R.job;
  x.a = ri;
  x.b = node;
  x.chunk = c;
  x.bytes = (up || R.has_receiver[node]) ? chunk_bytes(R, c) : 0;  // 0: completion notice only
  x.nres = 0;
  const std::uint32_t link = up ? N.up_link : N.down_link;
  x.res[x.nres++] = link;
  ++link_load[link];
  if (mem_on() && N.member >= 0) x.res[x.nres++] = mem_res(J.spec.hosts[N.member]);
  x.cap = (up && N.member >= 0) ? J.inc_cap : FlowNet::kNoCap;
  ++J.res.inc_chunks;
  x.latency = topo.link(link).latency;
  push(now + x.latency, kXferStart, xi);
}

// A run's newly available chunks join the job's FIFO on node's up edge (a port sends one
// chunk at a time, in the order the chunks became ready, whichever op they belong to).
void Simulator::Impl::try_up(std::uint32_t ri, std::uint32_t node) {
  IncRun& R = runs[ri];
  Job& J = jobs[R.job];
  if (J.tree.nodes[node].parent < 0) return;
  if (R.bcast && !R.on_src_path[node]) return;
  while (R.up_next[node] < R.up_avail[node]) J.up_q[node].push(ri, R.up_next[node]++);
  pump(R.job, node, true);
}

// Same for the edge from node's parent down to node.
void Simulator::Impl::try_down(std::uint32_t ri, std::uint32_t node) {
  IncRun& R = runs[ri];
  Job& J = jobs[R.job];
  const AggTree::Node& N = J.tree.nodes[node];
  if (N.parent < 0) return;
  if (R.bcast && R.on_src_path[node]) return;  // the data came up this edge
  while (R.down_next[node] < R.down_avail[N.parent]) J.down_q[node].push(ri, R.down_next[node]++);
  pump(R.job, node, false);
}

void Simulator::Impl::pump(std::uint32_t ji, std::uint32_t node, bool up) {
  Job& J = jobs[ji];
  auto& busy = up ? J.up_busy[node] : J.down_busy[node];
  auto& q = up ? J.up_q[node] : J.down_q[node];
  if (busy || q.empty()) return;
  const auto [ri, c] = q.pop();
  busy = 1;
  send_edge(ri, node, up, c);
}

void Simulator::Impl::push_down(std::uint32_t ri, int node) {
  for (int ch : jobs[runs[ri].job].tree.nodes[node].children) try_down(ri, static_cast<std::uint32_t>(ch));
}

// Reduce: one more chunk aggregated at a switch.
void Simulator::Impl::aggregated(std::uint32_t ri, int node) {
  IncRun& R = runs[ri];
  const AggTree::Node& N = jobs[R.job].tree.nodes[node];
  ++R.up_avail[node];
  if (N.parent >= 0) {
    try_up(ri, static_cast<std::uint32_t>(node));
  } else {
    ++R.down_avail[node];  // the root's aggregate is the result
    push_down(ri, node);
  }
}

void Simulator::Impl::inc_up_delivered(std::uint32_t ri, std::uint32_t node) {
  IncRun& R = runs[ri];
  Job& J = jobs[R.job];
  J.up_busy[node] = 0;
  ++R.up_done[node];
  const int parent = J.tree.nodes[node].parent;
  pump(R.job, node, true);
  if (J.tree.nodes[node].member >= 0) {
    if (opt.np.host_packet_us > 0) host_send_next(ri, node);
    maybe_member_done(ri, static_cast<int>(node));
  }
  if (R.bcast) {
    ++R.up_avail[parent];
    ++R.down_avail[parent];
    try_up(ri, static_cast<std::uint32_t>(parent));
    push_down(ri, parent);
    return;
  }
  // Reduce: chunks every child delivered can be aggregated.
  std::uint32_t ready = std::numeric_limits<std::uint32_t>::max();
  for (int ch : J.tree.nodes[parent].children) ready = std::min(ready, R.up_done[ch]);
  while (R.alu_queued[parent] < ready) {
    const std::uint32_t c = R.alu_queued[parent]++;
    const double work = switch_chunk_s(R, parent, c);
    if (work > 0)
      cpu_submit(J.tree.nodes[parent].node, work, kAluDone, ri, static_cast<std::uint32_t>(parent));
    else
      aggregated(ri, parent);
  }
}

void Simulator::Impl::inc_down_delivered(std::uint32_t ri, std::uint32_t node, std::uint32_t chunk) {
  IncRun& R = runs[ri];
  const AggTree::Node& N = jobs[R.job].tree.nodes[node];
  jobs[R.job].down_busy[node] = 0;
  if (N.member >= 0 && opt.np.host_packet_us > 0) {  // the host's CPU takes the datagrams in
    pump(R.job, node, false);
    cpu_submit(N.node, datagrams(R, chunk) * opt.np.host_packet_us * 1e-6, kHostRecvd, ri, node);
    return;
  }
  ++R.down_avail[node];
  pump(R.job, node, false);
  if (N.member >= 0)
    maybe_member_done(ri, static_cast<int>(node));
  else
    push_down(ri, static_cast<int>(node));
}

void Simulator::Impl::maybe_member_done(std::uint32_t ri, int node) {
  IncRun& R = runs[ri];
  Job& J = jobs[R.job];
  const int member = J.tree.nodes[node].member;
  const std::uint32_t op = J.prog.inc_members[J.prog.inc_begin[R.group] + member];
  if (J.E[op].state != 2) return;  // not posted yet, or done
  bool done;
  if (R.bcast && member == R.root_member)
    done = R.up_done[node] == R.nchunks;
  else if (R.bcast)
    done = R.down_avail[node] == R.nchunks;
  else
    done = R.down_avail[node] == R.nchunks && R.up_done[node] == R.nchunks;
  if (!done) return;
  op_done(R.job, op);
  if (++R.members_done == static_cast<std::uint32_t>(J.prog.nranks)) {
    R.active = false;
    J.runs[R.group] = -1;
    free_runs.push_back(ri);
  }
}

}  // namespace inc::sim
