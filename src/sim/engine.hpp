// The discrete-event simulator: executes the schedules of one or more jobs (Programs built from
// coll::build_schedule) on a Topology, at message-segment granularity for point-to-point ops and
// chunk granularity for Core-INC trees, with max-min fair sharing of links (FlowNet).
//
// Semantics (docs/SIMULATOR.md):
//  * An op starts when its intra-rank dependencies are done. A message moves when its send and
//    its matching receive are both posted (rendezvous, FIFO per ordered pair); it pays the
//    per-message overhead (host, or NIC for Edge-INC jobs) and the path latency, then shares
//    bandwidth with every other flow on its links. recv_reduce adds bytes x gamma of local work.
//  * Core-INC ops: the k-th inc op of all ranks is one switch operation on the job's aggregation
//    tree. Data moves hop by hop in chunks, one chunk at a time per tree edge; a switch forwards
//    chunk c up once all children delivered it (and its ALU processed it, if a rate is set), the
//    root multicasts results down. The switch aggregation memory available to the job
//    (switch_memory / trees sharing the switch) bounds data in flight: each host's stream is
//    capped at window / round-trip time (Little's law).
//  * Edge-INC jobs (offload = edge): NIC overhead per message, and a send that forwards data this
//    rank received does not cross the host memory bus again (when host_mem_GBps > 0 the bus is a
//    shared resource that every DMA read and write crosses).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/params.hpp"
#include "sim/program.hpp"
#include "sim/topology.hpp"

namespace inc::sim {

struct JobSpec {
  std::string name;
  coll::CollectiveParams params;  // nranks, coll, algo, count, dtype, segment_bytes
  std::vector<int> hosts;         // rank -> host (distinct)
  bool edge_offload = false;
  double start_s = 0;
  // Per rank, when it starts after start_s (NetParams::start_skew: drawn by run_skewed,
  // sim/skew.hpp); empty = every rank at start_s. A rank posts nothing before its start.
  std::vector<double> rank_start_s;
};

// When a message may move (docs/SIMULATOR.md, Matching semantics).
//  dataflow:   every op is posted as soon as its own dependencies are done (receives are posted
//              as early as their buffers allow); a message moves when its send and its receive
//              are both posted. This is how the library's executors run a schedule: the default.
//  rendezvous: ops are posted one step at a time, as an MPI program of Sendrecv/Waitall does: a
//              step is a run of consecutive ops with no dependency among them, and a rank posts
//              step k + 1 only when all its ops of step k are done. A message moves when both
//              ends are posted, so a sender waits for a late receiver.
//  eager:      posted in steps as rendezvous, but a message of at most `eager_threshold` bytes
//              moves as soon as its send is posted (the receiver buffers it, as MPI's and
//              NCCL's eager protocols do); the send is done when the data has left, the receive
//              when it is posted and the data has arrived. Larger messages wait (rendezvous).
//  ready:      what the runtime does (src/coll/executor_ready.cpp): posted as dataflow; a message
//              of at most `eager_threshold` bytes moves as soon as its send is posted (eager), a
//              larger one once its send is posted and the receiver's ready notice has arrived:
//              the receive, when posted, sends a notice that takes the host overhead, the
//              notice's own cost (NetParams::ready_notice_us) and the path's latency back.
enum class Matching : std::uint8_t { dataflow, rendezvous, eager, ready };
const char* name(Matching m);
bool parse_matching(std::string_view s, Matching& out);

struct SimOptions {
  NetParams np;                // overheads, gamma, host memory, switch memory/ALU, INC chunk
  // Simulation granularity of Core-INC jobs (docs/SIMULATOR.md): a job whose schedule leaves the
  // segment size to the algorithm is built with at most `max_inc_ops` switch operations per
  // contiguous region, each simulated as at most `max_inc_chunks` chunks (never smaller than
  // np.inc_chunk_bytes). The pipeline-fill error is about (2 x depth - 1) / chunks per edge.
  int max_inc_ops = 8;
  int max_inc_chunks = 16;
  bool progress = false;       // progress bar on stderr
  // Share bottlenecks in inverse proportion to each flow's route latency (SimGrid's flow
  // models, TCP's RTT unfairness) instead of plain max-min. Off by default.
  bool rtt_weighted = false;
  bool per_job_links = true;   // keep per-job per-link byte counts (links-touched queries)
  // Rotation-symmetric rings (coll::rotation_symmetric) are built from rank 0's schedule alone
  // (no per-rank schedules or Program: the 4,096- and 16,384-rank rings of docs/SIMULATOR.md).
  bool symmetric_schedules = true;
  // A symmetric job alone on the fabric whose ranks repeat every S in routes too (contiguous
  // placements on trees, static routing) simulates S ranks, each standing for P / S identical
  // ones (engine_fold.cpp); the results are those of simulating every rank.
  bool fold_symmetric = true;
  bool model_contention = true;  // fill JobResult::contended_bandwidth_s (one pass over the program)
  Matching matching = Matching::dataflow;
  std::uint64_t eager_threshold = 64 << 10;  // bytes; Matching::eager and ready (Open MPI's TCP: 64 KiB)
  // NetParams::start_skew: independent draws of the ranks' start offsets (run_skewed,
  // sim/skew.hpp), and the seed they are drawn from (deterministic).
  int start_skew_draws = 16;
  std::uint64_t start_skew_seed = 1;
};

struct JobResult {
  std::string name;
  double start_s = 0, end_s = 0;
  double time_s() const { return end_s - start_s; }
  std::uint64_t ops = 0, messages = 0, inc_chunks = 0;
  double bytes_injected = 0;          // p2p bytes sent by hosts + bytes hosts sent into trees
  double link_bytes_total = 0;        // sum over links of bytes (traffic x hops)
  // Message bytes through host memory, most of any rank (docs/EDGE.md, "Memory traffic"): every
  // received byte written once, every sent byte read once, except a forwarding send of an
  // Edge-INC job (the NIC keeps what it received); local copies and reductions not counted.
  double host_mem_bytes = 0;
  int links_touched[4] = {0, 0, 0, 0};  // by Tier
  double tier_bytes[4] = {0, 0, 0, 0};
  int tree_switches = 0, tree_depth = 0;
  double inc_window_cap_GBps = 0;     // 0 = not limited
  // The analytical model's bandwidth term with contention (sim/contention.hpp): per step, the
  // most-loaded link's bytes / bandwidth, summed; 0 for jobs without point-to-point messages.
  double contended_bandwidth_s = 0;
  double worst_step_share = 0;  // most of this job's messages on one link in one step
  bool symmetric_layout = false;  // built from rank 0's schedule alone (SimOptions::symmetric_schedules)
  std::uint32_t fold = 1;  // ranks each simulated rank stood for (SimOptions::fold_symmetric)
  // A job with per-rank starts (JobSpec::rank_start_s): each rank's start and last op's end.
  std::vector<double> rank_start_s, rank_end_s;
};

struct SimResult {
  std::vector<JobResult> jobs;
  double makespan_s = 0;
  std::uint64_t events = 0, flows = 0, refills = 0, refill_flows = 0;
  // Routing collisions: messages whose route crosses switch-to-switch links, those that found
  // one of these links already carrying another flow when they were routed, and the most flows
  // seen at once on one switch-to-switch link.
  std::uint64_t routed_flows = 0, collided_flows = 0;
  std::uint32_t max_link_flows = 0;
  // Token-bucket links (NetParams::buckets): links with a bucket, and how often one ran dry
  // (counted once per simulated link, as events: not multiplied by a fold).
  std::uint64_t buckets = 0, buckets_emptied = 0;
  double wall_s = 0;
  std::vector<double> link_bytes;             // per directed link
  std::vector<std::vector<double>> job_link_bytes;  // [job][link] if per_job_links
};

class Simulator {
 public:
  Simulator(const Topology& topo, SimOptions opt);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;
  // Builds the job's program from its schedules. Throws inc::Error on bad placements.
  void add_job(JobSpec job);
  // Adds a job whose program is given (tests with hand-written schedules).
  void add_job(JobSpec job, Program prog);
  SimResult run();

 private:
  struct Impl;
  Impl* impl_;
};

// Placement helpers: `n` distinct hosts out of `free` (consumed), in order or at random.
std::vector<int> place_contiguous(std::vector<int>& free, int n);
std::vector<int> place_random(std::vector<int>& free, int n, std::uint64_t seed);

}  // namespace inc::sim
