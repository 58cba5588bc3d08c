// The analytical (alpha-beta-gamma) model.
//
// Every collective is described by the counts of its schedule (StepCounts): message rounds on
// the critical path, bytes sent/received/reduced per rank, bytes handed to switch trees. They
// come either from the real schedules (`schedule_counts`, via coll::build_schedule) or from the
// closed forms (`closed_form_counts`); tests check that both agree. A time follows from the
// counts and NetParams (`cost`). Sizes: n is the collective's total vector size in bytes:
// allreduce/broadcast: the buffer; reduce_scatter: the input (p shards); allgather: the output
// (p contributions); alltoall: one rank's send buffer (p blocks).
#pragma once

#include <string>
#include <vector>

#include "coll/schedule.hpp"
#include "sim/params.hpp"
#include "sim/program.hpp"

namespace inc::sim {

class TableReader;
// Reads the [network] keys of a model or scenario file into `np` (see docs/MODEL.md).
void read_net_params(TableReader& t, NetParams& np);
// The [network] table of a TOML file over the defaults (`inc model --net`, `inc sim run --net`:
// a hand-written file or a calibration such as bench/testbed/calibration.toml); unknown keys or
// tables are rejected naming file, line and key.
NetParams read_net_file(const std::string& path);

struct StepCounts {
  double rounds = 0;           // dependent message rounds on the critical path (incl. inc ops)
  double inc_rounds = 0;       // of which Core-INC tree passes
  double messages = 0;         // max point-to-point messages sent by one rank
  double bytes_sent = 0;       // max over ranks, point-to-point
  double bytes_recv = 0;       // max over ranks, point-to-point
  double bytes_reduced = 0;    // max over ranks, endpoint reduction input (recv_reduce + reduce)
  double bytes_forwarded = 0;  // max over ranks: sent bytes that arrived by an earlier receive
  double inc_bytes = 0;        // max over ranks: bytes contributed to or received from switch trees
  double inc_members = 0;      // ranks in the switch trees (their switches' fan-in, see cost())
  // Max over ranks: message bytes through host memory (docs/EDGE.md, "Memory traffic"): every
  // received byte written, every sent byte read; with Edge-INC (mem_edge) a forwarding send
  // (bytes_forwarded) is not read back. Local copies and reductions are not counted.
  double mem_host = 0, mem_edge = 0;
};

// Counts derived from the schedules of all p ranks (builds them; p up to a few thousand).
StepCounts schedule_counts(const Program& prog);
StepCounts schedule_counts(Collective c, coll::Algorithm a, int p, std::uint64_t n,
                           DataType dt = DataType::f32);
// Closed forms of the same counts (Thakur/Rabenseifner/Gropp and the Core-INC tree).
// Throws inc::Error(invalid_argument) for unsupported combinations.
StepCounts closed_form_counts(Collective c, coll::Algorithm a, int p, double n);

struct Cost {
  double latency_s = 0;    // rounds x alpha (+ tree latency)
  double bandwidth_s = 0;  // bytes x beta (or the host memory / switch ALU bound)
  double reduce_s = 0;     // bytes reduced x gamma
  double skew_s = 0;       // the ranks' start skew (emulated testbed; 0 when off): start_skew_cost
  double total_s = 0;
};

enum class Offload { host, edge };  // who drives host algorithms: host software or the NIC

Cost cost(const StepCounts& c, const NetParams& np, Offload off = Offload::host);
// The bytes through host memory of `c` when `off` drives the algorithm (mem_host or mem_edge).
double host_memory_bytes(const StepCounts& c, Offload off);
// Time of one Core-INC tree pass of `bytes` over `members` hosts (latency + pipelined bandwidth
// with slot window). The tree has inc_tree_levels switch levels: inc_leaf_fan_in members under
// each switch above the hosts (0: ceil(members^(1/levels))), the levels above balanced over those
// switches. A switch's ALU (switch_reduce_GBps, input bytes/s as in the simulator) aggregates
// every child's chunk, so the switch with the most children passes switch_reduce_GBps / children
// per tree; the CPU terms count every switch's and host's datagrams per chunk.
Cost inc_pass_cost(double bytes, const NetParams& np, int members = 1);

// ---- Start skew (NetParams::start_skew, the emulated testbed; docs/MODEL.md "Start skew") ------
// The ranks start at offsets s_k uniform in [0, S] (S = np.start_skew_s(n)), independently in
// each of K draws (inc bench's calls, inc sim's start_skew_draws), and the figure reported is
// inc bench's: the most over ranks of the rank's mean, over the draws, of (its end - s_k).

// inc sim's default number of draws (SimOptions::start_skew_draws), the model's too.
inline constexpr int kStartSkewDraws = 16;
// Whether the model charges `a` the skew: every rank's last op waits for the latest rank, which
// still has the whole collective's work ahead of it when it starts (allreduce, reduce-scatter,
// host allgathers, alltoall, barrier). Not broadcasts (a rank waits only for the ranks on its
// path from the root) nor the Core-INC allgather (the latest rank adds only its own block).
bool start_skew_couples(Collective c, coll::Algorithm a);
// E[the most over p ranks of a rank's mean wait over `draws` draws] for offsets uniform in [0, 1]
// when every rank ends together, T after the latest start: E[mean of the maxima] - E[the least
// of p means of `draws` uniforms] = p/(p+1) - E[min]; (p-1)/(p+1) for one draw, tending to
// (p-1)/(2(p+1)) for many. E[min] is integrated from the Irwin-Hall distribution (exact up to
// 256 draws; beyond, its normal limit, which agrees with it to 4 digits at 256).
double start_skew_wait(int p, int draws);
// The skew term of one collective of n bytes: S(n) x start_skew_wait(p, draws) when the skew is
// on and `a` couples every rank (start_skew_couples), else 0.
double start_skew_cost(Collective c, coll::Algorithm a, int p, double n, const NetParams& np,
                       int draws = kStartSkewDraws);

// Convenience: closed-form time of one collective (with start_skew_cost when np's skew is on).
Cost collective_cost(Collective c, coll::Algorithm a, int p, double n, const NetParams& np,
                     Offload off = Offload::host, int skew_draws = kStartSkewDraws);

// The paper's Figure 5 scenario and our reproduction of it.
struct PaperFigure5 {
  // Inputs.
  double bytes = 8.0 * (1ull << 30);
  int nodes = 1024;
  NetParams np;  // link_gbps = 400
  std::vector<double> shares{0.1, 0.2, 0.3, 0.4, 0.5};
  // Published.
  double paper_ring_s = 0.352, paper_inc_s = 0.151;
  std::vector<double> paper_gain_labels{0.05, 0.11, 0.18, 0.26, 0.34};
  // Ours.
  Cost ring, inc;
  double floor_s = 0;            // 8 GiB once at link rate: below it no INC Allreduce can go
  double ring_bw_s = 0;          // 2(p-1)/p n beta
  double implied_ratio = 0;      // r fitted to the published gain labels (least squares)
  struct Row {
    double share;
    double paper_label;
    double gain_paper_times;  // 1/(1 - f(1 - 151/352)) - 1
    double gain_ours;
    double iter_base_s;       // ours: ring / share
    double iter_inc_s;        // ours
  };
  std::vector<Row> rows;
};
PaperFigure5 paper_figure5(const NetParams& np, double bytes = 8.0 * (1ull << 30), int nodes = 1024);
// End-to-end gain when a fraction `share` of the baseline iteration is communication that
// becomes `ratio` times as long: 1 / (1 - share (1 - ratio)) - 1.
double amdahl_gain(double share, double ratio);
// Ratio r that best fits (least squares) the given gains at the given shares.
double fit_ratio(const std::vector<double>& shares, const std::vector<double>& gains);

// ---- Training-iteration model --------------------------------------------------------------

struct TrainingConfig {
  std::string name = "explicit";
  // Model.
  double parameters = 0;         // total
  double active_parameters = 0;  // per token (MoE); 0 = parameters
  int layers = 1;
  int hidden = 0;
  int seq_len = 0;
  int global_batch = 0;  // sequences per iteration
  int micro_batch = 1;
  int experts = 0;              // 0 = dense
  int top_k = 1;
  double moe_layer_fraction = 1.0;
  double grad_bytes = 2, act_bytes = 2;
  // Parallelism.
  int dp = 1, tp = 1, pp = 1, ep = 1;
  bool fsdp = false;
  // Hardware.
  double flops = 989e12;  // per accelerator, dense bf16
  double efficiency = 0.4;
  double compute_s = -1;  // explicit compute time; overrides the FLOP estimate when >= 0
  // Networks: DP/FSDP/PP/MoE traffic on `net`, TP on `tp_net` (NVLink-class by default).
  NetParams net;
  NetParams tp_net;
  // Fraction of each collective's time hidden behind compute.
  double overlap_dp = 0, overlap_tp = 0, overlap_pp = 0, overlap_moe = 0;
  // Explicit extra collectives: allreduce of `extra_allreduce_bytes` on `extra_ranks` ranks.
  double extra_allreduce_bytes = 0;
  int extra_ranks = 0;
  std::string source;  // file it came from
};

struct IterationLine {
  std::string what;    // "DP allreduce", ...
  Collective coll;
  int ranks;
  std::string host_algo;  // fastest host algorithm by the model
  double bytes;        // per call
  double calls;        // per iteration
  double host_s;       // per iteration, total, host algorithms
  double inc_s;        // per iteration, total, Core-INC where it applies
  double overlap;
  double exposed_host_s, exposed_inc_s;
};

struct IterationResult {
  double compute_s = 0;
  double bubble_s = 0;
  std::vector<IterationLine> lines;
  double iter_host_s = 0, iter_inc_s = 0;
  double comm_share_host = 0;  // exposed communication / iteration, host
  double gain = 0;             // iter_host / iter_inc - 1
};

IterationResult model_iteration(const TrainingConfig& cfg);
// Loads a TOML model description (models/*.toml); errors name file, line and key.
TrainingConfig load_training_config(const std::string& path);
TrainingConfig parse_training_config(std::string_view text, const std::string& name);

}  // namespace inc::sim
