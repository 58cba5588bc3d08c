// A whole job's collective as one graph: the schedules of all ranks (from coll::build_schedule),
// flattened, with intra-rank dependencies turned into successor lists, every point-to-point
// send matched to its receive (FIFO per ordered pair, as every executor does), and the k-th
// Core-INC op of every rank grouped into one switch operation. The analytical model reads its
// counts; the simulator executes it.
#pragma once

#include <cstdint>
#include <vector>

#include "coll/schedule.hpp"
#include "sim/huge_alloc.hpp"

namespace inc::sim {

// Compact op: what the simulator needs of a coll::Op (16 bytes instead of 56).
struct SimOp {
  coll::OpKind kind = coll::OpKind::send;
  bool forwards = false;  // send every byte of which earlier receives of this rank wrote (program.cpp)
  bool receives = true;   // inc ops: dst.bytes > 0
  std::int32_t peer = -1;
  std::uint64_t bytes = 0;  // message / contribution / local work size
};

struct Program {
  int nranks = 0;
  BigVec<std::uint32_t> rank_begin;  // ops of rank r: [rank_begin[r], rank_begin[r+1])
  BigVec<SimOp> ops;
  BigVec<std::uint32_t> ndeps;       // intra-rank dependencies of each op
  BigVec<std::uint32_t> succ_begin;  // CSR successors (intra-rank)
  BigVec<std::uint32_t> succ;
  // send -> matching recv, recv -> matching send, inc op -> its group; ~0u otherwise.
  BigVec<std::uint32_t> match;
  // Ordered (sender, receiver) pair of each send op (a connection: messages on it are delivered
  // in order, one after the other); ~0u for other ops.
  BigVec<std::uint32_t> pair_of;
  BigVec<std::uint32_t> pair_seq;  // send and recv ops: index of the message on its connection
  std::uint32_t num_pairs = 0;
  // inc groups: members of group g are inc_members[inc_begin[g] .. inc_begin[g+1]) (one per rank).
  BigVec<std::uint32_t> inc_begin;
  BigVec<std::uint32_t> inc_members;

  std::size_t num_ops() const { return ops.size(); }
  int rank_of(std::uint32_t op) const;  // binary search in rank_begin
  std::size_t num_inc_groups() const { return inc_begin.empty() ? 0 : inc_begin.size() - 1; }
};

// Builds all ranks' schedules for `proto` (proto.rank is ignored) and links them.
// Throws inc::Error(mismatch) when sends and receives do not pair up in count or size.
Program build_program(const coll::CollectiveParams& proto);
// Rank 0's schedule of a rotation-symmetric collective (coll::rotation_symmetric), checked
// against build_schedule on ranks 1, p/2 and p - 1; false (build every rank) otherwise.
bool symmetric_template(const coll::CollectiveParams& proto, coll::RankSchedule& out);
// One rank's schedule as a one-rank Program: ops, dependencies and successor lists, no matching
// (its peers are rank 0's; the simulator rotates them per rank).
Program template_program(const coll::RankSchedule& s0);
// Links given schedules (tests, hand-written schedules). Schedules must have dependencies.
Program link_program(const std::vector<coll::RankSchedule>& ranks);

// Steps of each op (Matching::rendezvous and eager): in program order per rank, an op starts a
// new step when it depends on an op of the current step; a step is thus a run of consecutive
// ops that may run together (one Sendrecv / Waitall of an MPI program). Steps are numbered from
// 0 in each rank; `out[i]` is op i's.
std::vector<std::uint32_t> program_steps(const Program& prog);

// Element count that makes a collective of `bytes` total size (see MODEL.md for the
// definition per collective) with `p` ranks; rounds down to whole elements.
std::uint64_t count_for_bytes(Collective c, int p, std::uint64_t bytes, DataType dt);

}  // namespace inc::sim
