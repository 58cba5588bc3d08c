// Internal to the simulator (engine.cpp, engine_build.cpp, engine_inc.cpp): the event loop's
// records and Simulator::Impl, whose methods are split by job: adding jobs and their layout
// (engine_build.cpp), Core-INC trees (engine_inc.cpp), ops, point-to-point messages and the
// event loop (engine.cpp). Not a public header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "sim/flow.hpp"

namespace inc::sim {

namespace engine_detail {

enum EvType : std::uint8_t { kFlowDone, kXferStart, kOpDone, kJobStart, kAluDone, kIncHostReady, kNotice, kHostSent, kHostRecvd, kCpuDone, kBucketEmpty, kRankStart, kNoticeSent };

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
  bool send_done = false;  // p2p: the send op completed when handed over (send_buffer_bytes)
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
  std::vector<std::uint32_t> alu_queued; // reduce: chunks handed to the ALU; at a member with
                                         // host_packet_us: chunks handed to its CPU to send
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
  // 0 waiting, 1 posted, 2 moving, 3 done; receives of eager messages also 4 (data moving,
  // receive not posted) and 5 (data arrived, receive not posted); under Matching::ready a posted
  // receive whose notice has reached its sender is 6.
  std::uint8_t state = 0;
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

}  // namespace engine_detail

using namespace engine_detail;
using coll::OpKind;

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
    // Rotation-symmetric jobs (add_symmetric) keep no EngOp records: op i of rank r (event-loop
    // index i S + r) is template op i with peers shifted by r, and its state and pending count
    // share one byte (`dyn`), so 4,096 ranks need 67 MB instead of 3.7 GB. S = P unless the run
    // is folded (engine_fold.cpp): then only ranks 0..S-1 are simulated, rank r + jS being rank
    // r's image, and a peer's rank is taken mod S after the shift mod P.
    struct Sym {
      std::uint32_t P = 0, S = 0, npeers = 0;
      std::vector<SimOp> ops;  // rank 0's
      std::vector<std::uint32_t> match, seq, conn;  // matching template op, message index, connection
      std::vector<std::uint32_t> succ_begin, succ;  // template numbering
      std::vector<std::uint8_t> pending0;  // initial pending count (dependencies + step gate)
      std::vector<std::uint32_t> step;     // program_steps of the template (rendezvous, eager)
    };
    bool sym = false;
    Sym T;
    BigVec<std::uint8_t> dyn;  // sym: state | pending << kPendShift
    static constexpr int kPendShift = 3;
    static constexpr std::uint32_t kMaxPending = 0xffu >> kPendShift;
    std::vector<double> rank_busy;    // endpoint compute engine
    std::vector<double> mem_bytes;    // per rank: message bytes through host memory
    AggTree tree;
    std::vector<std::int32_t> runs;          // group -> run id (-1 none)
    double inc_cap = FlowNet::kNoCap;
    double inc_window = 0;  // bytes of switch slots the job may have outstanding
    std::vector<ChunkQueue> up_q, down_q;  // per tree node: chunks waiting for the edge
    std::vector<std::uint8_t> up_busy, down_busy;
    // Point-to-point connections: one message at a time in its bandwidth phase, in order.
    std::vector<ChunkQueue> pair_q;
    std::vector<std::uint8_t> pair_busy;
    std::vector<std::uint32_t> pair_next;  // seq of the next message each connection delivers
    double inc_chunk = 0;
    // Step gates (Matching::rendezvous / eager): E indices in program order, where each step
    // begins, and per rank the end of its open step and how many of its ops are not done.
    BigVec<std::uint32_t> gate_ops;
    std::vector<std::uint8_t> step_start;
    std::vector<std::uint32_t> rank_end, step_end, step_left;
    JobResult res;
    std::uint64_t ops_done = 0;
    // Per-rank starts (JobSpec::rank_start_s): each rank's ops ready at its start (not kept for
    // a symmetric layout, whose rank r's ops are every S-th), posted by its kRankStart event.
    std::vector<std::vector<std::uint32_t>> start_ops;
    // Static routings (not adaptive): each connection's route, [length, links...] per pair,
    // filled at its first message (empty: not cached).
    static constexpr std::size_t kRouteSlot = 8;
    std::vector<std::uint32_t> route_cache;

    // The event loop reads ops through these, whichever the layout.
    std::size_t num_ops() const { return sym ? dyn.size() : E.size(); }
    SimOp op(std::uint32_t i) const {
      if (!sym) return E[i].op;
      SimOp o = T.ops[i / T.S];
      if (o.peer >= 0) o.peer = static_cast<std::int32_t>((static_cast<std::uint32_t>(o.peer) + i % T.S) % T.P);
      return o;
    }
    std::uint32_t match(std::uint32_t i) const {
      if (!sym) return E[i].match;
      const std::uint32_t t = i / T.S, m = T.match[t];
      if (m == ~0u) return m;
      return m * T.S + (static_cast<std::uint32_t>(T.ops[t].peer) + i % T.S) % T.P % T.S;
    }
    std::uint32_t pair_of(std::uint32_t i) const {
      if (!sym) return E[i].pair_of;
      const std::uint32_t c = T.conn[i / T.S];
      return c == ~0u ? c : (i % T.S) * T.npeers + c;
    }
    std::uint32_t pair_seq(std::uint32_t i) const { return sym ? T.seq[i / T.S] : E[i].pair_seq; }
    std::int32_t rank(std::uint32_t i) const { return sym ? static_cast<std::int32_t>(i % T.S) : E[i].rank; }
    std::uint8_t state(std::uint32_t i) const {
      return sym ? static_cast<std::uint8_t>(dyn[i] & ((1u << kPendShift) - 1)) : E[i].state;
    }
    void set_state(std::uint32_t i, std::uint8_t s) {
      if (sym)
        dyn[i] = static_cast<std::uint8_t>((dyn[i] & ~((1u << kPendShift) - 1)) | s);
      else
        E[i].state = s;
    }
    bool ready(std::uint32_t i) const { return sym ? (dyn[i] >> kPendShift) == 0 : E[i].pending == 0; }
    // Op i is posted at its rank's start: no dependency left and not yet posted (state 0, or 4-5:
    // an eager message for it is on its way); one another op released meanwhile (1-3, 6) is not.
    bool startable(std::uint32_t i) const {
      const std::uint8_t st = state(i);
      return ready(i) && (st == 0 || st == 4 || st == 5);
    }
    // One dependency of op i is done; true when it was the last.
    bool release(std::uint32_t i) {
      if (!sym) return --E[i].pending == 0;
      dyn[i] = static_cast<std::uint8_t>(dyn[i] - (1u << kPendShift));
      return (dyn[i] >> kPendShift) == 0;
    }
    template <class F>
    void for_succ(std::uint32_t i, F&& f) const {
      if (!sym) {
        for (std::uint32_t s = E[i].succ_begin; s < E[i].succ_end; ++s) f(succ[s]);
        return;
      }
      const std::uint32_t t = i / T.S, r = i % T.S;
      for (std::uint32_t s = T.succ_begin[t]; s < T.succ_begin[t + 1]; ++s) f(T.succ[s] * T.S + r);
    }
  };
  std::vector<Job> jobs;
  std::vector<IncRun> runs;
  std::vector<std::uint32_t> free_runs;
  std::vector<Xfer> xfers;
  std::vector<std::uint32_t> free_xfers;
  std::vector<std::uint32_t> flow_xfer;  // flow id -> xfer
  // CPU (and switch ALU) work per topology node, one thread each, run in FIFO order; with
  // cpu_cores > 0 the nodes with work wait in one round-robin line for the shared cores.
  struct CpuWork {
    double s;
    EvType done;  // the event that follows the work
    std::uint32_t a, b;
  };
  std::vector<std::vector<CpuWork>> cpu_q;  // per topology node, from cpu_head
  std::vector<std::uint32_t> cpu_head;
  std::vector<std::uint8_t> cpu_busy;       // running or waiting for a core
  std::deque<std::uint32_t> cpu_line;       // nodes waiting for a core
  int cores_idle = 0;
  std::priority_queue<Event, std::vector<Event>, EventLater> heap;
  std::uint64_t seq = 0, events = 0, flows = 0;
  double now = 0;
  std::vector<double> link_bytes;
  std::vector<std::vector<double>> job_link_bytes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> work;  // (job, op) ready
  std::vector<std::uint32_t> path;
  std::vector<std::uint32_t> finished;  // xfers whose flows completed in the current batch
  std::uint64_t total_ops = 0, done_ops = 0;
  std::vector<std::uint32_t> link_load;  // xfers routed over each directed link, not yet done
  std::uint64_t routed_flows = 0, collided_flows = 0;
  std::uint32_t max_link_flows = 0;

  Impl(const Topology& t, SimOptions o)
      : topo(t), opt(std::move(o)), net(capacities(t, opt)), n_links(static_cast<std::uint32_t>(t.links().size())) {
    cpu_q.resize(static_cast<std::size_t>(t.num_nodes()));
    cpu_head.assign(static_cast<std::size_t>(t.num_nodes()), 0);
    cpu_busy.assign(static_cast<std::size_t>(t.num_nodes()), 0);
    cores_idle = opt.np.cpu_cores;
    link_bytes.assign(n_links, 0);
    link_load.assign(n_links, 0);
    set_buckets();
  }
  // The emulated testbed's shapers (NetParams::buckets): a token bucket on each directed link
  // slower than the peak. Identical links get identical buckets, so folding still holds.
  void set_buckets() {
    if (!opt.np.buckets()) return;
    const double peak = opt.np.burst_peak_gbps * 1e9 / 8;
    for (std::uint32_t l = 0; l < n_links; ++l) {
      const double bw = topo.link(l).bw;
      if (bw < peak) net.set_bucket(l, bw, peak, opt.np.burst_bytes(bw));
    }
  }

  std::uint32_t mem_res(int host) const { return n_links + static_cast<std::uint32_t>(host); }
  bool mem_on() const { return opt.np.host_mem_GBps > 0; }

  double chunk_bytes(const IncRun& R, std::uint32_t c) const { return c + 1 == R.nchunks ? R.last_chunk : R.chunk; }

  static std::vector<double> capacities(const Topology& t, const SimOptions& o) {
    std::vector<double> c;
    for (const auto& l : t.links()) c.push_back(l.bw);
    // Host memory buses follow the links (one per host), unlimited unless configured.
    for (int h = 0; h < t.num_hosts(); ++h)
      c.push_back(o.np.host_mem_GBps > 0 ? o.np.host_mem_GBps * 1e9 : FlowNet::kNoCap);
    return c;
  }
  // Consecutive pushes of one batched type (kXferStart, kFlowDone: the loop handles every such
  // event of an instant together) at the same time share one heap entry, a bucket of their (a, b):
  // their seqs are consecutive, so nothing could pop between them and the order is the same. A
  // symmetric collective starts and finishes thousands of messages at one instant.
  void push(double t, EvType type, std::uint32_t a, std::uint32_t b = 0, std::uint32_t c = 0) {
    if (type != kXferStart && type != kFlowDone) {
      heap.push(Event{t, seq++, type, a, b, c});
      return;
    }
    if (open_bucket != ~0u && open_seq == seq && open_t == t && open_type == type) {
      buckets[open_bucket].emplace_back(a, b);
      open_seq = ++seq;
      return;
    }
    std::uint32_t id;
    if (!free_buckets.empty()) {
      id = free_buckets.back();
      free_buckets.pop_back();
    } else {
      id = static_cast<std::uint32_t>(buckets.size());
      buckets.emplace_back();
    }
    buckets[id].emplace_back(a, b);
    heap.push(Event{t, seq++, type, id, 0, 0});
    open_bucket = id;
    open_seq = seq;
    open_t = t;
    open_type = type;
  }
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> buckets;
  std::vector<std::uint32_t> free_buckets;
  std::uint32_t open_bucket = ~0u;
  std::uint64_t open_seq = 0;
  double open_t = 0;
  EvType open_type = kFlowDone;
  // Runs f(a, b) on every event of bucket `id` (popped), then frees it; counts the events.
  template <class F>
  void run_bucket(std::uint32_t id, F&& f) {
    if (open_bucket == id) open_bucket = ~0u;
    for (std::size_t k = 0; k < buckets[id].size(); ++k) {
      const auto [a, b] = buckets[id][k];
      f(a, b);
    }
    events += buckets[id].size() - 1;  // the loop counted the heap entry
    buckets[id].clear();
    free_buckets.push_back(id);
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
  void add(JobSpec spec, Program prog);
  // Sizes the job's route cache (static routings, up to 2^20 connections).
  void init_route_cache(Job& J) const {
    if (topo.spec().routing != Routing::adaptive && J.prog.num_pairs <= (1u << 20))
      J.route_cache.assign(std::size_t{J.prog.num_pairs} * Job::kRouteSlot, 0);
  }
  // Throws unless spec places p ranks on distinct existing hosts.
  void check_hosts(const JobSpec& spec, int p) const;
  // A rotation-symmetric job from rank 0's schedule (template_program): no per-rank schedules.
  void add_symmetric(JobSpec spec, int p, Program templ);
  // Its per-rank part for S simulated ranks (P, or the fold's period), when the run starts.
  void layout_symmetric(Job& J, std::uint32_t S);
  // Folding (engine_fold.cpp): a symmetric job alone on the fabric whose routes repeat every S
  // ranks (a link bijection maps rank r's routes onto rank r + S's, preserving bandwidth,
  // latency and tier, every orbit of P / S links) runs ranks 0..S-1 only, whose routes' links are
  // the orbits' representatives. Returns S (P: no fold) and fills link_rep and host_rep.
  std::uint32_t fold_period(const Job& J);
  // The folded run's figures for the whole job: counts times the fold, link bytes per orbit.
  void unfold();
  std::uint32_t fold = 1;
  std::vector<std::uint32_t> link_rep;  // folded: link -> its orbit's representative (~0u unused)
  std::vector<int> host_rep;            // folded: host -> its orbit's representative
  int rep_host(int h) const { return host_rep.empty() ? h : host_rep[static_cast<std::size_t>(h)]; }
  // Every op after a rank's first step waits for one more thing: its step opening.
  void setup_steps(Job& J, const BigVec<std::uint32_t>& perm);
  // Opens the step of rank r that begins at program index `from` (if any).
  void open_step(Job& J, int r, std::uint32_t from, bool release);
  bool eager(std::uint64_t bytes) const {
    return (opt.matching == Matching::eager || opt.matching == Matching::ready) && bytes <= opt.eager_threshold;
  }
  // Matching::ready: a message above the eager threshold waits for its receiver's notice.
  bool needs_notice(std::uint64_t bytes) const {
    return opt.matching == Matching::ready && bytes > opt.eager_threshold;
  }
  // Rendezvous and eager post ops one step at a time (step gates); dataflow and ready do not.
  bool stepped() const { return opt.matching == Matching::rendezvous || opt.matching == Matching::eager; }
  std::vector<std::uint32_t> notice_path;  // scratch of notice_flight
  // A posted receive's ready notice, once sent, reaches its sender after o + the path's latency
  // back; the sending itself costs ready_notice_us (a fixed delay, or with cpu_cores work on
  // the receiver's host's CPU).
  double notice_flight(const Job& J, std::uint32_t recv);
  void notice_arrived(std::uint32_t ji, std::uint32_t recv);
  // Slot memory is shared by the trees crossing a switch; the job's window is its smallest share.
  void setup_inc();
  // Per-rank starts: queue each rank's start event; post a rank's ready ops at it.
  void schedule_rank_starts(std::uint32_t ji);
  void start_rank(std::uint32_t ji, std::uint32_t r);
  void op_ready(std::uint32_t ji, std::uint32_t op);
  void compute(std::uint32_t ji, std::uint32_t op, double dur);
  void op_done(std::uint32_t ji, std::uint32_t op);
  void finish_recv(std::uint32_t ji, std::uint32_t recv);
  void drain();
  void start_p2p(std::uint32_t ji, std::uint32_t send, std::uint32_t recv);
  // Load and collision statistics of a routed message (switch-to-switch links only: host links
  // are shared by every route of their host whatever the routing).
  void count_route(const std::vector<std::uint32_t>& p);
  // The message's overhead and latency have elapsed; it takes the connection when it is free.
  void xfer_start(std::uint32_t xi);
  void begin_flow(std::uint32_t xi);
  // Recompute the rates changed by this instant's starts and finishes; schedule completions.
  void commit();
  void reschedule();
  // A flow finished: remove it (rates are recomputed once per batch); false if the event is stale.
  bool flow_done(std::uint32_t f, std::uint32_t version, std::vector<std::uint32_t>& finished);
  void xfer_done(std::uint32_t xi);
  std::uint32_t get_run(std::uint32_t ji, std::uint32_t group);
  void inc_member_ready(std::uint32_t ji, std::uint32_t op);
  void inc_host_ready(std::uint32_t ri, std::uint32_t node);
  void send_edge(std::uint32_t ri, std::uint32_t node, bool up, std::uint32_t c);
  // A run's newly available chunks join the job's FIFO on node's up edge (a port sends one
  // chunk at a time, in the order the chunks became ready, whichever op they belong to).
  void try_up(std::uint32_t ri, std::uint32_t node);
  // Same for the edge from node's parent down to node.
  void try_down(std::uint32_t ri, std::uint32_t node);
  void pump(std::uint32_t ji, std::uint32_t node, bool up);
  void push_down(std::uint32_t ri, int node);
  // Reduce: one more chunk aggregated at a switch.
  void aggregated(std::uint32_t ri, int node);
  void cpu_submit(std::uint32_t topo_node, double seconds, EvType done, std::uint32_t a, std::uint32_t b);
  void cpu_dispatch();
  void cpu_done(std::uint32_t topo_node);
  double datagrams(const IncRun& R, std::uint32_t c) const;
  double switch_chunk_s(const IncRun& R, int node, std::uint32_t c) const;
  void host_send_next(std::uint32_t ri, std::uint32_t node);
  void host_sent(std::uint32_t ri, std::uint32_t node);
  void host_recvd(std::uint32_t ri, std::uint32_t node);
  void inc_up_delivered(std::uint32_t ri, std::uint32_t node);
  void inc_down_delivered(std::uint32_t ri, std::uint32_t node, std::uint32_t chunk);
  void maybe_member_done(std::uint32_t ri, int node);
  SimResult run();
};

}  // namespace inc::sim
