#include "sim/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/flow.hpp"

namespace inc::sim {

using coll::OpKind;

std::vector<int> place_contiguous(std::vector<int>& free, int n) {
  if (n > static_cast<int>(free.size()))
    throw Error(Error::Kind::config, fmt::format("placement: {} ranks but only {} free hosts", n, free.size()));
  std::vector<int> out(free.begin(), free.begin() + n);
  free.erase(free.begin(), free.begin() + n);
  return out;
}

std::vector<int> place_random(std::vector<int>& free, int n, std::uint64_t seed) {
  if (n > static_cast<int>(free.size()))
    throw Error(Error::Kind::config, fmt::format("placement: {} ranks but only {} free hosts", n, free.size()));
  std::mt19937_64 rng(seed);
  std::shuffle(free.begin(), free.end(), rng);
  std::vector<int> out(free.begin(), free.begin() + n);
  free.erase(free.begin(), free.begin() + n);
  std::sort(free.begin(), free.end());
  return out;
}

namespace {

enum EvType : std::uint8_t { kFlowDone, kXferStart, kOpDone, kJobStart, kAluDone, kIncHostReady };

struct Event {
  double t;
  std::uint64_t seq;
  EvType type;
  std::uint32_t a, b, c;
};
struct EventLater {
  bool operator()(const Event& x, const Event& y) const { return x.t > y.t || (x.t == y.t && x.seq > y.seq); }
};

enum class XKind : std::uint8_t { p2p, inc_up, inc_down };

struct Xfer {
  XKind kind = XKind::p2p;
  std::uint32_t job = 0;
  std::uint32_t a = 0;  // p2p: send op; inc: run id
  std::uint32_t b = 0;  // p2p: recv op; inc: tree node (sender for up, receiver for down)
  std::uint32_t chunk = 0;
  double bytes = 0;
  double cap = FlowNet::kNoCap;
  double latency = 0;  // route latency (the sharing weight in rtt_weighted mode)
  std::uint8_t nres = 0;
  std::uint32_t res[10];
};


struct IncRun {
  std::uint32_t job = 0, group = 0;
  bool bcast = false;
  int root_member = -1;
  std::uint32_t nchunks = 0;
  double chunk = 0, last_chunk = 0;
  std::uint32_t members_done = 0;
  // Per tree node.
  std::vector<std::uint32_t> up_avail;   // chunks this node can send up (own data / aggregated)
  std::vector<std::uint32_t> down_avail; // chunks this node holds for its children (results)
  std::vector<std::uint32_t> up_next;    // next chunk to send to the parent
  std::vector<std::uint32_t> up_done;    // chunks delivered to the parent
  std::vector<std::uint32_t> down_next;  // next chunk the parent sends to this node
  std::vector<std::uint32_t> alu_queued; // reduce: chunks handed to the ALU
  std::vector<std::uint8_t> on_src_path;
  std::vector<std::uint8_t> has_receiver;  // subtree holds a member that wants the data
  bool active = true;
};

// Everything the event loop reads and writes about one op, in one 48-byte record: the loop is
// memory-bound (each event touches another rank's ops), so one cache line per op instead of
// nine arrays roughly halves its time at 1,024 ranks.
struct EngOp {
  SimOp op;
  std::uint32_t match = ~0u, pair_of = ~0u, pair_seq = ~0u, succ_begin = 0, succ_end = 0;
  std::uint32_t pending = 0;
  std::int32_t rank = 0;
  std::uint8_t state = 0;  // 0 waiting, 1 posted, 2 moving, 3 done
};

// FIFO of (run, chunk) with amortised O(1) push/pop and no per-node allocation when idle.
struct ChunkQueue {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> v;
  std::size_t head = 0;
  bool empty() const { return head == v.size(); }
  void push(std::uint32_t run, std::uint32_t chunk) { v.emplace_back(run, chunk); }
  std::pair<std::uint32_t, std::uint32_t> pop() {
    auto x = v[head++];
    if (head == v.size()) {
      v.clear();
      head = 0;
    }
    return x;
  }
};

}  // namespace

struct Simulator::Impl {
  const Topology& topo;
  SimOptions opt;
  FlowNet net;
  std::uint32_t n_links;

  struct Job {
    JobSpec spec;
    Program prog;
    BigVec<EngOp> E;              // ops in step-major order (see add)
    BigVec<std::uint32_t> succ;   // successors, in E's numbering
    std::vector<double> rank_busy;    // endpoint compute engine
    AggTree tree;
    std::vector<std::int32_t> runs;          // group -> run id (-1 none)
    double inc_cap = FlowNet::kNoCap;
    std::vector<ChunkQueue> up_q, down_q;  // per tree node: chunks waiting for the edge
    std::vector<std::uint8_t> up_busy, down_busy;
    // Point-to-point connections: one message at a time in its bandwidth phase, in order.
    std::vector<ChunkQueue> pair_q;
    std::vector<std::uint8_t> pair_busy;
    std::vector<std::uint32_t> pair_next;  // seq of the next message each connection delivers
    double inc_chunk = 0;
    JobResult res;
    std::uint64_t ops_done = 0;
  };
  std::vector<Job> jobs;
  std::vector<IncRun> runs;
  std::vector<std::uint32_t> free_runs;
  std::vector<Xfer> xfers;
  std::vector<std::uint32_t> free_xfers;
  std::vector<std::uint32_t> flow_xfer;  // flow id -> xfer
  std::vector<double> alu_free;          // per topology node
  std::priority_queue<Event, std::vector<Event>, EventLater> heap;
  std::uint64_t seq = 0, events = 0, flows = 0;
  double now = 0;
  std::vector<double> link_bytes;
  std::vector<std::vector<double>> job_link_bytes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> work;  // (job, op) ready
  std::vector<std::uint32_t> path;
  std::vector<std::uint32_t> finished;  // xfers whose flows completed in the current batch
  std::uint64_t total_ops = 0, done_ops = 0;

  Impl(const Topology& t, SimOptions o)
      : topo(t), opt(std::move(o)), net(capacities(t, opt)), n_links(static_cast<std::uint32_t>(t.links().size())) {
    alu_free.assign(t.num_nodes(), 0);
    link_bytes.assign(n_links, 0);
  }

  static std::vector<double> capacities(const Topology& t, const SimOptions& o) {
    std::vector<double> c;
    for (const auto& l : t.links()) c.push_back(l.bw);
    // Host memory buses follow the links (one per host), unlimited unless configured.
    for (int h = 0; h < t.num_hosts(); ++h)
      c.push_back(o.np.host_mem_GBps > 0 ? o.np.host_mem_GBps * 1e9 : FlowNet::kNoCap);
    return c;
  }
  std::uint32_t mem_res(int host) const { return n_links + static_cast<std::uint32_t>(host); }
  bool mem_on() const { return opt.np.host_mem_GBps > 0; }

  void push(double t, EvType type, std::uint32_t a, std::uint32_t b = 0, std::uint32_t c = 0) {
    heap.push(Event{t, seq++, type, a, b, c});
  }

  std::uint32_t new_xfer() {
    if (!free_xfers.empty()) {
      const std::uint32_t x = free_xfers.back();
      free_xfers.pop_back();
      return x;
    }
    xfers.emplace_back();
    return static_cast<std::uint32_t>(xfers.size() - 1);
  }

  void account(Job& J, std::uint32_t ji, const Xfer& x) {
    for (std::uint8_t i = 0; i < x.nres; ++i) {
      const std::uint32_t r = x.res[i];
      if (r >= n_links) continue;
      link_bytes[r] += x.bytes;
      if (!job_link_bytes.empty()) job_link_bytes[ji][r] += x.bytes;
      J.res.link_bytes_total += x.bytes;
    }
  }

  // ---- adding jobs -------------------------------------------------------------------------

  void add(JobSpec spec, Program prog) {
    const int p = prog.nranks;
    if (static_cast<int>(spec.hosts.size()) != p)
      throw Error(Error::Kind::config, fmt::format("job '{}': {} ranks but {} hosts placed", spec.name, p, spec.hosts.size()));
    std::unordered_set<int> seen;
    for (int h : spec.hosts) {
      if (h < 0 || h >= topo.num_hosts())
        throw Error(Error::Kind::config, fmt::format("job '{}': host {} does not exist ({} hosts)", spec.name, h, topo.num_hosts()));
      if (!seen.insert(h).second)
        throw Error(Error::Kind::config, fmt::format("job '{}': host {} holds two ranks", spec.name, h));
    }
    Job J;
    J.spec = std::move(spec);
    J.prog = std::move(prog);
    J.res.name = J.spec.name;
    J.rank_busy.assign(p, 0);
    // The event loop's op order is step-major: the i-th op of every rank side by side. Ranks
    // advance roughly together, so the ops touched at one moment (a send and its matching
    // receive on the next rank, their successors) share cache lines instead of lying a rank's
    // schedule apart.
    const std::size_t N = J.prog.num_ops();
    BigVec<std::uint32_t> perm(N);
    {
      std::vector<int> active;
      for (int r = 0; r < p; ++r)
        if (J.prog.rank_begin[r + 1] > J.prog.rank_begin[r]) active.push_back(r);
      std::uint32_t next = 0;
      for (std::uint32_t i = 0; !active.empty(); ++i) {
        std::size_t keep = 0;
        for (int r : active) {
          const std::uint32_t pi = J.prog.rank_begin[r] + i;
          perm[pi] = next++;
          if (pi + 1 < J.prog.rank_begin[r + 1]) active[keep++] = r;
        }
        active.resize(keep);
      }
    }
    // Read the program sequentially, scatter into E; successor lists stay in program order
    // (E points into them) with their targets renumbered.
    J.E.resize(N);
    for (int r = 0; r < p; ++r)
      for (std::uint32_t i = J.prog.rank_begin[r]; i < J.prog.rank_begin[r + 1]; ++i) {
        EngOp& x = J.E[perm[i]];
        x.op = J.prog.ops[i];
        const bool inc = x.op.kind == OpKind::inc_reduce || x.op.kind == OpKind::inc_broadcast ||
                         x.op.kind == OpKind::inc_gather;
        x.match = inc || J.prog.match[i] == ~0u ? J.prog.match[i] : perm[J.prog.match[i]];  // inc: group id
        x.pair_of = J.prog.pair_of[i];
        x.pair_seq = J.prog.pair_seq[i];
        x.succ_begin = J.prog.succ_begin[i];
        x.succ_end = J.prog.succ_begin[i + 1];
        x.pending = J.prog.ndeps[i];
        x.rank = r;
      }
    J.succ = std::move(J.prog.succ);
    for (auto& t : J.succ) t = perm[t];
    for (auto& m : J.prog.inc_members) m = perm[m];
    // The event loop reads everything from E, succ and inc_members: release the rest.
    for (auto* v : {&J.prog.ndeps, &J.prog.match, &J.prog.pair_of, &J.prog.pair_seq, &J.prog.succ_begin, &J.prog.succ}) {
      v->clear();
      v->shrink_to_fit();
    }
    J.prog.ops.clear();
    J.prog.ops.shrink_to_fit();
    J.runs.assign(J.prog.num_inc_groups(), -1);
    J.pair_q.resize(J.prog.num_pairs);
    J.pair_busy.assign(J.prog.num_pairs, 0);
    J.pair_next.assign(J.prog.num_pairs, 0);
    if (J.prog.num_inc_groups() > 0) {
      J.tree = topo.build_tree(J.spec.hosts, jobs.size() * 0x51ed27u + 1);
      J.res.tree_switches = J.tree.switch_count();
      J.up_q.resize(J.tree.nodes.size());
      J.down_q.resize(J.tree.nodes.size());
      J.up_busy.assign(J.tree.nodes.size(), 0);
      J.down_busy.assign(J.tree.nodes.size(), 0);
      J.res.tree_depth = J.tree.depth;
    }
    total_ops += J.E.size();
    jobs.push_back(std::move(J));
  }

  // Slot memory is shared by the trees crossing a switch; the job's window is its smallest share.
  void setup_inc() {
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

  // ---- ops -----------------------------------------------------------------------------------

  void op_ready(std::uint32_t ji, std::uint32_t op) {
    Job& J = jobs[ji];
    EngOp& eo = J.E[op];
    const SimOp& o = eo.op;
    eo.state = 1;
    switch (o.kind) {
      case OpKind::send:
      case OpKind::recv:
      case OpKind::recv_reduce: {
        const std::uint32_t m = eo.match;
        if (J.E[m].state == 1) {
          if (o.kind == OpKind::send)
            start_p2p(ji, op, m);
          else
            start_p2p(ji, m, op);
        }
        break;
      }
      case OpKind::copy:
      case OpKind::reduce:
      case OpKind::repro_scan:  // local passes of a reproducible sum: as a reduce
      case OpKind::repro_encode:
      case OpKind::repro_decode: {
        double dur = 0;
        if (o.kind != OpKind::copy) dur = o.bytes * opt.np.gamma();
        else if (mem_on()) dur = 2.0 * o.bytes / (opt.np.host_mem_GBps * 1e9);  // read + write
        compute(ji, op, dur);
        break;
      }
      case OpKind::inc_reduce:
      case OpKind::inc_broadcast:
      case OpKind::inc_gather:  // an aggregation of zero-padded blocks: as inc_reduce
        inc_member_ready(ji, op);
        break;
    }
  }

  void compute(std::uint32_t ji, std::uint32_t op, double dur) {
    Job& J = jobs[ji];
    if (dur <= 0) {
      op_done(ji, op);
      return;
    }
    const int r = J.E[op].rank;
    const double t0 = std::max(now, J.rank_busy[r]);
    J.rank_busy[r] = t0 + dur;
    J.E[op].state = 2;
    push(t0 + dur, kOpDone, ji, op);
  }

  void op_done(std::uint32_t ji, std::uint32_t op) {
    Job& J = jobs[ji];
    EngOp& eo = J.E[op];
    eo.state = 3;
    ++J.ops_done;
    ++done_ops;
    J.res.end_s = std::max(J.res.end_s, now);
    for (std::uint32_t s = eo.succ_begin; s < eo.succ_end; ++s) {
      const std::uint32_t j = J.succ[s];
      if (--J.E[j].pending == 0) work.emplace_back(ji, j);
    }
  }

  void drain() {
    while (!work.empty()) {
      auto [ji, op] = work.back();
      work.pop_back();
      op_ready(ji, op);
    }
  }

  // ---- point-to-point ------------------------------------------------------------------------

  void start_p2p(std::uint32_t ji, std::uint32_t send, std::uint32_t recv) {
    Job& J = jobs[ji];
    EngOp& es = J.E[send];
    es.state = J.E[recv].state = 2;
    const int src = J.E[recv].op.peer, dst = es.op.peer;
    const int hs = J.spec.hosts[src], hd = J.spec.hosts[dst];
    path.clear();
    if (!topo.route(hs, hd, path))
      throw Error(Error::Kind::config,
                  fmt::format("job '{}': no path from rank {} (host {}) to rank {} (host {}) avoids the failed links",
                              J.spec.name, src, hs, dst, hd));
    const std::uint32_t xi = new_xfer();
    Xfer& x = xfers[xi];
    x.kind = XKind::p2p;
    x.job = ji;
    x.a = send;
    x.b = recv;
    x.bytes = static_cast<double>(es.op.bytes);
    x.cap = FlowNet::kNoCap;
    x.nres = 0;
    for (auto l : path) x.res[x.nres++] = l;
    if (mem_on()) {
      if (!(J.spec.edge_offload && es.op.forwards)) x.res[x.nres++] = mem_res(hs);
      x.res[x.nres++] = mem_res(hd);
    }
    ++J.res.messages;
    J.res.bytes_injected += x.bytes;
    const double o = (J.spec.edge_offload ? opt.np.nic_overhead_us : opt.np.host_overhead_us) * 1e-6;
    x.latency = topo.path_latency(path);
    push(now + o + x.latency, kXferStart, xi);
  }

  // The message's overhead and latency have elapsed; it takes the connection when it is free.
  void xfer_start(std::uint32_t xi) {
    Xfer& x = xfers[xi];
    if (x.kind == XKind::p2p) {
      Job& J = jobs[x.job];
      const EngOp& es = J.E[x.a];
      const std::uint32_t pr = es.pair_of;
      if (J.pair_busy[pr] || es.pair_seq != J.pair_next[pr]) {
        J.pair_q[pr].v.emplace_back(xi, es.pair_seq);  // waits for its turn
        return;
      }
      J.pair_busy[pr] = 1;
    }
    begin_flow(xi);
  }

  void begin_flow(std::uint32_t xi) {
    Xfer& x = xfers[xi];
    account(jobs[x.job], x.job, x);
    if (x.bytes <= 0) {
      xfer_done(xi);
      return;
    }
    const double w = opt.rtt_weighted && x.latency > 0 ? x.latency : 1.0;
    // Added now, rates computed at the end of the current batch of same-time events (commit()).
    const std::uint32_t f = net.add(x.res, x.nres, x.bytes, now, x.cap, w);
    ++flows;
    if (flow_xfer.size() <= f) flow_xfer.resize(f + 1);
    flow_xfer[f] = xi;
  }

  // Recompute the rates changed by this instant's starts and finishes; schedule completions.
  void commit() {
    if (!net.dirty()) return;
    net.commit(now);
    reschedule();
  }

  void reschedule() {
    for (std::uint32_t f : net.changed()) {
      const double t = net.finish_time(f);
      if (t < std::numeric_limits<double>::infinity()) push(t, kFlowDone, f, net.version(f));
    }
  }

  // A flow finished: remove it (rates are recomputed once per batch); false if the event is stale.
  bool flow_done(std::uint32_t f, std::uint32_t version, std::vector<std::uint32_t>& finished) {
    if (!net.active(f) || net.version(f) != version) return false;
    finished.push_back(flow_xfer[f]);
    net.remove(f);
    return true;
  }

  void xfer_done(std::uint32_t xi) {
    const Xfer x = xfers[xi];
    free_xfers.push_back(xi);
    switch (x.kind) {
      case XKind::p2p: {
        Job& J = jobs[x.job];
        // The connection delivers messages in program order: start the next one if it waits.
        const std::uint32_t pr = J.E[x.a].pair_of;
        J.pair_busy[pr] = 0;
        ++J.pair_next[pr];
        auto& w = J.pair_q[pr].v;
        for (std::size_t k = 0; k < w.size(); ++k)
          if (w[k].second == J.pair_next[pr]) {
            const std::uint32_t next = w[k].first;
            w[k] = w.back();
            w.pop_back();
            J.pair_busy[pr] = 1;
            begin_flow(next);
            break;
          }
        op_done(x.job, x.a);
        if (J.E[x.b].op.kind == OpKind::recv_reduce)
          compute(x.job, x.b, J.E[x.b].op.bytes * opt.np.gamma());
        else
          op_done(x.job, x.b);
        break;
      }
      case XKind::inc_up:
        inc_up_delivered(x.a, x.b);
        break;
      case XKind::inc_down:
        inc_down_delivered(x.a, x.b);
        break;
    }
  }

  // ---- Core-INC ------------------------------------------------------------------------------

  std::uint32_t get_run(std::uint32_t ji, std::uint32_t group) {
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

  double chunk_bytes(const IncRun& R, std::uint32_t c) const { return c + 1 == R.nchunks ? R.last_chunk : R.chunk; }

  void inc_member_ready(std::uint32_t ji, std::uint32_t op) {
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

  void inc_host_ready(std::uint32_t ri, std::uint32_t node) {
    IncRun& R = runs[ri];
    R.up_avail[node] = R.nchunks;
    jobs[R.job].res.bytes_injected += R.last_chunk + R.chunk * (R.nchunks - 1);
    if (R.bcast) R.down_avail[node] = R.nchunks;  // the root has its own data
    try_up(ri, node);
  }

  void send_edge(std::uint32_t ri, std::uint32_t node, bool up, std::uint32_t c) {
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
    if (mem_on() && N.member >= 0) x.res[x.nres++] = mem_res(J.spec.hosts[N.member]);
    x.cap = (up && N.member >= 0) ? J.inc_cap : FlowNet::kNoCap;
    ++J.res.inc_chunks;
    x.latency = topo.link(link).latency;
    push(now + x.latency, kXferStart, xi);
  }

  // A run's newly available chunks join the job's FIFO on node's up edge (a port sends one
  // chunk at a time, in the order the chunks became ready, whichever op they belong to).
  void try_up(std::uint32_t ri, std::uint32_t node) {
    IncRun& R = runs[ri];
    Job& J = jobs[R.job];
    if (J.tree.nodes[node].parent < 0) return;
    if (R.bcast && !R.on_src_path[node]) return;
    while (R.up_next[node] < R.up_avail[node]) J.up_q[node].push(ri, R.up_next[node]++);
    pump(R.job, node, true);
  }

  // Same for the edge from node's parent down to node.
  void try_down(std::uint32_t ri, std::uint32_t node) {
    IncRun& R = runs[ri];
    Job& J = jobs[R.job];
    const AggTree::Node& N = J.tree.nodes[node];
    if (N.parent < 0) return;
    if (R.bcast && R.on_src_path[node]) return;  // the data came up this edge
    while (R.down_next[node] < R.down_avail[N.parent]) J.down_q[node].push(ri, R.down_next[node]++);
    pump(R.job, node, false);
  }

  void pump(std::uint32_t ji, std::uint32_t node, bool up) {
    Job& J = jobs[ji];
    auto& busy = up ? J.up_busy[node] : J.down_busy[node];
    auto& q = up ? J.up_q[node] : J.down_q[node];
    if (busy || q.empty()) return;
    const auto [ri, c] = q.pop();
    busy = 1;
    send_edge(ri, node, up, c);
  }

  void push_down(std::uint32_t ri, int node) {
    for (int ch : jobs[runs[ri].job].tree.nodes[node].children) try_down(ri, static_cast<std::uint32_t>(ch));
  }

  // Reduce: one more chunk aggregated at a switch.
  void aggregated(std::uint32_t ri, int node) {
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

  void inc_up_delivered(std::uint32_t ri, std::uint32_t node) {
    IncRun& R = runs[ri];
    Job& J = jobs[R.job];
    J.up_busy[node] = 0;
    ++R.up_done[node];
    const int parent = J.tree.nodes[node].parent;
    pump(R.job, node, true);
    if (J.tree.nodes[node].member >= 0) maybe_member_done(ri, static_cast<int>(node));
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
    const double rate = opt.np.switch_reduce_GBps * 1e9;
    const auto nch = static_cast<double>(J.tree.nodes[parent].children.size());
    while (R.alu_queued[parent] < ready) {
      const std::uint32_t c = R.alu_queued[parent]++;
      if (rate > 0) {
        const std::uint32_t sw = J.tree.nodes[parent].node;
        const double t0 = std::max(now, alu_free[sw]);
        alu_free[sw] = t0 + nch * chunk_bytes(R, c) / rate;
        push(alu_free[sw], kAluDone, ri, static_cast<std::uint32_t>(parent));
      } else {
        aggregated(ri, parent);
      }
    }
  }

  void inc_down_delivered(std::uint32_t ri, std::uint32_t node) {
    IncRun& R = runs[ri];
    jobs[R.job].down_busy[node] = 0;
    ++R.down_avail[node];
    pump(R.job, node, false);
    if (jobs[R.job].tree.nodes[node].member >= 0)
      maybe_member_done(ri, static_cast<int>(node));
    else
      push_down(ri, static_cast<int>(node));
  }

  void maybe_member_done(std::uint32_t ri, int node) {
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

  // ---- main loop -----------------------------------------------------------------------------

  SimResult run() {
    const auto wall0 = std::chrono::steady_clock::now();
    if (opt.per_job_links) job_link_bytes.assign(jobs.size(), std::vector<double>(n_links, 0));
    setup_inc();
    for (std::uint32_t ji = 0; ji < jobs.size(); ++ji) {
      jobs[ji].res.start_s = jobs[ji].res.end_s = jobs[ji].spec.start_s;
      push(jobs[ji].spec.start_s, kJobStart, ji);
    }
    const bool bar = opt.progress;
    auto last_print = wall0;
    while (!heap.empty()) {
      const Event e = heap.top();
      heap.pop();
      now = e.t;
      ++events;
      switch (e.type) {
        case kJobStart: {
          Job& J = jobs[e.a];
          for (std::uint32_t i = 0; i < J.E.size(); ++i)
            if (J.E[i].pending == 0) work.emplace_back(e.a, i);
          break;
        }
        case kXferStart:
          // Every message and chunk that enters the network at this instant, then one refill.
          xfer_start(e.a);
          while (!heap.empty() && heap.top().t == now && heap.top().type == kXferStart) {
            const std::uint32_t xi = heap.top().a;
            heap.pop();
            ++events;
            xfer_start(xi);
          }
          commit();
          break;
        case kFlowDone: {
          // Every flow that completes at this instant, one refill, then their consequences.
          finished.clear();
          flow_done(e.a, e.b, finished);
          while (!heap.empty() && heap.top().t == now && heap.top().type == kFlowDone) {
            const Event x = heap.top();
            heap.pop();
            ++events;
            flow_done(x.a, x.b, finished);
          }
          commit();
          for (std::uint32_t xi : finished) xfer_done(xi);
          commit();  // connections that started their next message
          break;
        }
        case kOpDone:
          op_done(e.a, e.b);
          break;
        case kAluDone:
          aggregated(e.a, static_cast<int>(e.b));
          break;
        case kIncHostReady:
          inc_host_ready(e.a, e.b);
          break;
      }
      drain();
      if (bar && (events & 0x3fff) == 0) {
        const auto t = std::chrono::steady_clock::now();
        if (t - last_print > std::chrono::milliseconds(200)) {
          last_print = t;
          const double frac = total_ops ? double(done_ops) / total_ops : 0;
          const int w = 30, filled = static_cast<int>(frac * w);
          const double el = std::chrono::duration<double>(t - wall0).count();
          std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  sim t=%.6f s  %.2fM events/s  ", filled,
                       "##############################", w - filled, "", frac * 100, now, events / el / 1e6);
          std::fflush(stderr);
        }
      }
    }
    if (bar) std::fprintf(stderr, "\r%*s\r", 90, "");
    SimResult out;
    for (auto& J : jobs) {
      if (J.ops_done != J.E.size())
        throw Error(Error::Kind::mismatch,
                    fmt::format("job '{}' deadlocked: {} of {} ops never ran", J.spec.name, J.E.size() - J.ops_done,
                                J.E.size()));
      J.res.ops = J.ops_done;
      out.makespan_s = std::max(out.makespan_s, J.res.end_s);
    }
    for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
      JobResult& r = jobs[ji].res;
      if (!job_link_bytes.empty())
        for (std::uint32_t l = 0; l < n_links; ++l)
          if (job_link_bytes[ji][l] > 0) {
            const auto t = static_cast<int>(topo.link(l).tier);
            ++r.links_touched[t];
            r.tier_bytes[t] += job_link_bytes[ji][l];
          }
      out.jobs.push_back(r);
    }
    out.events = events;
    out.flows = flows;
    out.refills = net.refills();
    out.refill_flows = net.refill_flows();
    out.link_bytes = std::move(link_bytes);
    out.job_link_bytes = std::move(job_link_bytes);
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return out;
  }
};

Simulator::Simulator(const Topology& topo, SimOptions opt) : impl_(new Impl(topo, std::move(opt))) {}
Simulator::~Simulator() { delete impl_; }

void Simulator::add_job(JobSpec job) {
  coll::CollectiveParams p = job.params;
  p.nranks = static_cast<int>(job.hosts.size());
  if (p.algo == coll::Algorithm::inc && p.segment_bytes == 0) {
    const std::uint64_t e = size_of(p.dtype);
    const std::uint64_t region = p.count * e;  // the unit the INC schedule segments
    const auto ops = static_cast<std::uint64_t>(std::max(1, impl_->opt.max_inc_ops));
    p.segment_bytes = std::max<std::uint64_t>(64 << 10, (region + ops - 1) / ops);
    p.segment_bytes = (p.segment_bytes + e - 1) / e * e;
  }
  job.params = p;
  Program prog = build_program(p);
  impl_->add(std::move(job), std::move(prog));
}

void Simulator::add_job(JobSpec job, Program prog) { impl_->add(std::move(job), std::move(prog)); }

SimResult Simulator::run() { return impl_->run(); }

}  // namespace inc::sim
