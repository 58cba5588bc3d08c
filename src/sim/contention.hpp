// Contention for the analytical model (docs/MODEL.md, "Oversubscription and contention"): the
// alpha-beta-gamma closed forms assume full bisection, every message at link rate. On an
// oversubscribed or unevenly routed fabric several messages of one step share a link. This
// reads the same schedules the simulator runs, routes every message of a placed job with the
// topology's routing, and charges each step the time of its most-loaded link.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/program.hpp"
#include "sim/topology.hpp"

namespace inc::sim {

struct Contention {
  // Sum over steps (program_steps: the k-th step of every rank is one round) of the most-loaded
  // link's bytes / bandwidth. On a full-bisection fabric with one message per host link and
  // step this equals the closed form's bandwidth term.
  double bandwidth_s = 0;
  double worst_step_share = 0;  // most flows on one link in one step (1: no sharing)
  std::uint32_t steps = 0;
  std::uint32_t worst_link = ~0u;  // link of the largest per-step load
};

// Point-to-point messages only (Core-INC ops are not counted: a job's tree carries each
// contribution once per link). Adaptive routing routes each message of a step on the links the
// step's earlier messages left least loaded (the simulator routes by the flows in flight).
Contention contention(const Program& prog, const std::vector<int>& hosts, const Topology& topo);

// The same for a rotation-symmetric job given by rank 0's schedule (template_program): rank r's
// messages are the template's with peers shifted by r.
Contention contention_symmetric(const Program& templ, int p, const std::vector<int>& hosts, const Topology& topo);

}  // namespace inc::sim
