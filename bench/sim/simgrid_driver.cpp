// Runs the library's collective schedules in SimGrid (S4U, Debian libsimgrid-dev 3.32) on the
// same topology and routes as `inc sim`, to validate the simulator's flow model against a
// validated flow-level simulator (bench/sim/validate_simgrid.sh prints both).
//
// Same platform: every directed link of inc::sim::Topology becomes a SimGrid link with the same
// bandwidth and latency, and every communicating host pair gets exactly the route that
// Topology::route chooses (a Full zone), so only the network models differ.
// Same semantics: one actor per rank runs its schedule's ops as their dependencies complete; a
// message is a put/get pair on the mailbox of its (sender, receiver) connection (SimGrid matches
// them in FIFO order, like the schedules), posted in program order.
// Matching (--matching, as inc sim's SimOptions::matching): dataflow (above); rendezvous: a rank
// posts its ops one step at a time (program_steps), the next step once all ops of the current one
// completed; eager: in steps too, and messages of at most --eager-threshold bytes go through a
// second mailbox per connection whose receiver is permanent (Mailbox::set_receiver), so SimGrid
// starts them before the receive is posted, as SMPI does for MPI's eager protocol.
// Model: --model CM02 (max-min, no TCP corrections; what inc sim implements) or LV08 (SimGrid's
// default: latency x 13.01, bandwidth x 0.97, TCP window bound). Cross-traffic is off in both
// unless --crosstraffic.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "sim/config.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "sim/topology.hpp"

namespace sg = simgrid::s4u;
using inc::coll::OpKind;
using namespace inc::sim;

namespace {

const Program* g_prog = nullptr;
std::vector<std::string> g_mbox_name;  // per pair id
int g_payload = 0;
bool g_one_at_a_time = false;
std::size_t g_window = 64;
std::uint32_t g_recv_window = 8;
Matching g_matching = Matching::dataflow;
std::uint64_t g_eager_threshold = 64 << 10;
std::vector<std::uint32_t> g_step;  // per op (rendezvous and eager)
std::vector<std::vector<int>> g_eager_in;  // per rank: pair ids of its incoming connections
sg::BarrierPtr g_start;

bool eager_msg(std::uint32_t op) {
  return g_matching == Matching::eager && g_prog->ops[op].bytes <= g_eager_threshold;
}
std::string mbox(std::uint32_t pr, std::uint32_t op) { return g_mbox_name[pr] + (eager_msg(op) ? "e" : ""); }

void rank_actor(int r) {
  const Program& P = *g_prog;
  const std::uint32_t b = P.rank_begin[r], e = P.rank_begin[r + 1];
  // Eager mailboxes deliver into this actor even before it posts a receive; every actor
  // declares its own before anybody sends.
  if (g_matching == Matching::eager) {
    for (int pr : g_eager_in[r]) sg::Mailbox::by_name(g_mbox_name[pr] + "e")->set_receiver(sg::Actor::self());
  }
  g_start->wait();
  // Steps (rendezvous, eager): ops of a later step wait in `deferred` until the step opens.
  const bool stepped = g_matching != Matching::dataflow;
  std::uint32_t cur_step = 0, step_left = 0, step_end = b;  // steps are contiguous in program order
  std::vector<std::uint32_t> deferred;
  for (; stepped && step_end < e && g_step[step_end] == 0; ++step_end) ++step_left;
  std::vector<std::uint32_t> pending(P.ndeps.begin() + b, P.ndeps.begin() + e);
  std::vector<std::uint32_t> ready;
  for (std::uint32_t i = b; i < e; ++i)
    if (P.ndeps[i] == 0) ready.push_back(i);
  std::vector<sg::CommPtr> comms;
  std::vector<std::uint32_t> comm_op;
  // Per connection, in program order: sends one at a time, receives posted in order (SimGrid
  // matches a mailbox's puts and gets in posting order, the schedules in program order).
  struct Conn {
    std::map<std::uint32_t, std::uint32_t> waiting;  // seq -> op
    std::uint32_t next = 0;
    std::uint32_t posted = 0;  // receives posted, not yet complete
    bool busy = false;
  };
  std::map<std::uint32_t, Conn> out, in;
  std::vector<int*> sink(e - b, nullptr);
  std::size_t done = 0;
  // Sends are posted in program order per connection. inc sim starts a message's bandwidth
  // phase when the previous one on its connection has left (its latency overlaps); SimGrid
  // cannot express that, so by default messages on one connection may overlap here, and with
  // --one-at-a-time the next is posted only when the previous completed (latency not hidden).
  auto pump_send = [&](std::uint32_t pr) {
    Conn& c = out[pr];
    for (auto it = c.waiting.find(c.next); it != c.waiting.end() && !c.busy; it = c.waiting.find(c.next)) {
      const std::uint32_t op = it->second;
      c.waiting.erase(it);
      comms.push_back(sg::Mailbox::by_name(mbox(pr, op))->put_async(&g_payload, P.ops[op].bytes));
      comm_op.push_back(op);
      if (g_one_at_a_time)
        c.busy = true;
      else
        ++c.next;
    }
  };
  // At most g_recv_window receives posted per connection: SimGrid scans a mailbox's posted
  // receives linearly when a message arrives, and a long schedule posts thousands early.
  auto pump_recv = [&](std::uint32_t pr) {
    Conn& c = in[pr];
    for (auto it = c.waiting.find(c.next); it != c.waiting.end() && c.posted < g_recv_window;
         it = c.waiting.find(c.next)) {
      const std::uint32_t op = it->second;
      c.waiting.erase(it);
      ++c.next;
      ++c.posted;
      comms.push_back(sg::Mailbox::by_name(mbox(pr, op))->get_async<int>(&sink[op - b]));
      comm_op.push_back(op);
    }
  };
  auto complete = [&](std::uint32_t op) {
    ++done;
    for (std::uint32_t s = P.succ_begin[op]; s < P.succ_begin[op + 1]; ++s)
      if (--pending[P.succ[s] - b] == 0) ready.push_back(P.succ[s]);
    if (stepped && --step_left == 0 && done < e - b) {  // open the next step
      ++cur_step;
      for (; step_end < e && g_step[step_end] == cur_step; ++step_end) ++step_left;
      std::vector<std::uint32_t> keep;
      for (std::uint32_t d : deferred) (g_step[d] == cur_step ? ready : keep).push_back(d);
      deferred.swap(keep);
    }
  };
  while (done < e - b) {
    while (!ready.empty()) {
      const std::uint32_t op = ready.back();
      ready.pop_back();
      if (stepped && g_step[op] != cur_step) {
        deferred.push_back(op);
        continue;
      }
      const auto k = P.ops[op].kind;
      if (k == OpKind::send) {
        const std::uint32_t pr = P.pair_of[op];
        out[pr].waiting[P.pair_seq[op]] = op;
        pump_send(pr);
      } else if (inc::coll::is_recv(k)) {
        const std::uint32_t pr = P.pair_of[P.match[op]];
        in[pr].waiting[P.pair_seq[op]] = op;
        pump_recv(pr);
      } else if (k == OpKind::copy || k == OpKind::reduce) {
        complete(op);  // free, as in inc sim with gamma = 0 and no host memory model
      } else {
        std::fprintf(stderr, "simgrid driver: Core-INC ops are not modelled here\n");
        std::exit(2);
      }
    }
    if (done == e - b) break;
    if (comms.empty()) {
      std::fprintf(stderr, "simgrid driver: rank %d deadlocked\n", r);
      std::exit(3);
    }
    // wait_any costs O(pending) per call in SimGrid; with all receives of a long schedule
    // posted early that is quadratic. Wait on the oldest `g_window` activities only: the others
    // stay posted (they match and progress in the network model as usual); only this actor's
    // reaction to an out-of-order completion beyond the window would be delayed.
    const std::size_t w = std::min(comms.size(), g_window);
    std::vector<sg::CommPtr> head(comms.begin(), comms.begin() + static_cast<std::ptrdiff_t>(w));
    const ssize_t i = sg::Comm::wait_any(head);
    const std::uint32_t op = comm_op[static_cast<std::size_t>(i)];
    comms.erase(comms.begin() + i);
    comm_op.erase(comm_op.begin() + i);
    if (P.ops[op].kind != OpKind::send) {
      const std::uint32_t pr = P.pair_of[P.match[op]];
      --in[pr].posted;
      pump_recv(pr);
    }
    if (P.ops[op].kind == OpKind::send) {
      const std::uint32_t pr = P.pair_of[op];
      if (g_one_at_a_time) {
        out[pr].busy = false;
        ++out[pr].next;
        pump_send(pr);
      }
    }
    complete(op);
  }
}

void usage() {
  std::fprintf(stderr,
               "usage: inc_simgrid_driver --topology fat_tree2|fat_tree3|single_switch --hosts N --radix R\n"
               "       --collective C --algo A --bytes SIZE [--segment SIZE] [--model CM02|LV08]\n"
               "       [--link-gbps 400] [--hop-latency-us 0.6] [--crosstraffic] [--routing ecmp|dmodk]\n"
               "       [--matching dataflow|rendezvous|eager] [--eager-threshold SIZE]\n");
}

}  // namespace

int main(int argc, char** argv) {
  TopoSpec ts;
  std::string coll_name = "allreduce", algo = "ring", size = "64MiB", segment = "", model = "CM02";
  bool cross = false;
  std::string weight_s;  // SimGrid's RTT-weighted sharing; 0 = plain max-min
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--topology") {
      const std::string k = val();
      ts.kind = k == "single_switch" ? TopoKind::single_switch : k == "fat_tree3" ? TopoKind::fat_tree3 : TopoKind::fat_tree2;
    } else if (a == "--hosts") ts.hosts = std::atoi(val().c_str());
    else if (a == "--radix") ts.radix = std::atoi(val().c_str());
    else if (a == "--link-gbps") ts.link_gbps = std::atof(val().c_str());
    else if (a == "--hop-latency-us") ts.hop_latency_us = std::atof(val().c_str());
    else if (a == "--collective") coll_name = val();
    else if (a == "--algo") algo = val();
    else if (a == "--bytes") size = val();
    else if (a == "--segment") segment = val();
    else if (a == "--model") model = val();
    else if (a == "--crosstraffic") cross = true;
    else if (a == "--one-at-a-time") g_one_at_a_time = true;
    else if (a == "--recv-window") g_recv_window = static_cast<std::uint32_t>(std::max(1, std::atoi(val().c_str())));
    else if (a == "--window") g_window = static_cast<std::size_t>(std::max(1, std::atoi(val().c_str())));
    else if (a == "--weight-S") weight_s = val();
    else if (a == "--matching") {
      if (!parse_matching(val(), g_matching)) {
        usage();
        return 2;
      }
      if (g_matching == Matching::ready) {  // no notice in this driver: refused, not run as another
        std::fprintf(stderr, "simgrid driver: --matching ready is not implemented here (dataflow, rendezvous, eager)\n");
        return 2;
      }
    } else if (a == "--eager-threshold") g_eager_threshold = parse_size(val());
    else if (a == "--routing") {
      // Static routes only: adaptive routing depends on the load while inc sim runs.
      if (!parse_routing(val(), ts.routing) || ts.routing == Routing::adaptive) {
        usage();
        return 2;
      }
    }
    else {
      usage();
      return 2;
    }
  }
  try {
    Topology topo(ts);
    inc::coll::CollectiveParams cp;
    cp.coll = *inc::parse_collective(coll_name);
    if (!inc::coll::parse_algorithm(algo, cp.algo)) throw std::runtime_error("unknown algorithm " + algo);
    cp.nranks = ts.hosts;
    const std::uint64_t bytes = parse_size(size);
    cp.count = count_for_bytes(cp.coll, cp.nranks, bytes, cp.dtype);
    cp.segment_bytes = segment.empty() ? 0 : parse_size(segment);
    const auto t0 = std::chrono::steady_clock::now();
    Program prog = build_program(cp);
    g_prog = &prog;
    if (g_matching != Matching::dataflow) g_step = program_steps(prog);
    g_eager_in.assign(ts.hosts, {});
    const auto t1 = std::chrono::steady_clock::now();

    int sg_argc = 1;
    char* sg_argv[] = {argv[0], nullptr};
    sg::Engine e(&sg_argc, sg_argv);
    sg::Engine::set_config("network/model:" + model);
    sg::Engine::set_config("network/crosstraffic:" + std::string(cross ? "1" : "0"));
    if (!weight_s.empty()) sg::Engine::set_config("network/weight-S:" + weight_s);
    auto* zone = sg::create_full_zone("world");
    std::vector<sg::Host*> hosts;
    for (int h = 0; h < ts.hosts; ++h) hosts.push_back(zone->create_host("h" + std::to_string(h), 1e9));
    std::vector<sg::Link*> links(topo.links().size(), nullptr);
    auto link = [&](std::uint32_t id) {
      if (!links[id]) {
        const Link& L = topo.link(id);
        links[id] = zone->create_link("l" + std::to_string(id), L.bw)->set_latency(L.latency)->seal();
      }
      return links[id];
    };
    // Routes for every connection of the program, exactly as inc sim routes them.
    g_mbox_name.assign(prog.num_pairs, "");
    std::set<std::pair<int, int>> routed;
    std::vector<std::uint32_t> path;
    for (std::uint32_t op = 0; op < prog.num_ops(); ++op) {
      if (prog.ops[op].kind != OpKind::send) continue;
      const int a = prog.rank_of(op), bdst = prog.ops[op].peer;
      if (g_mbox_name[prog.pair_of[op]].empty()) g_eager_in[bdst].push_back(static_cast<int>(prog.pair_of[op]));
      g_mbox_name[prog.pair_of[op]] = std::to_string(a) + ">" + std::to_string(bdst);
      if (!routed.insert({a, bdst}).second) continue;
      path.clear();
      if (!topo.route(a, bdst, path)) throw std::runtime_error("no route");
      std::vector<sg::LinkInRoute> lr;
      for (auto l : path) lr.emplace_back(link(l));
      zone->add_route(hosts[a]->get_netpoint(), hosts[bdst]->get_netpoint(), nullptr, nullptr, lr, false);
    }
    zone->seal();
    g_start = sg::Barrier::create(static_cast<unsigned>(ts.hosts));
    for (int r = 0; r < ts.hosts; ++r) sg::Actor::create("rank" + std::to_string(r), hosts[r], rank_actor, r);
    const auto t2 = std::chrono::steady_clock::now();
    e.run();
    const auto t3 = std::chrono::steady_clock::now();
    const double sim_s = sg::Engine::get_clock();
    std::printf("simgrid,%s,%s,%s,%d,%llu,%.9g,%.3f,%.3f\n", model.c_str(), coll_name.c_str(), algo.c_str(), ts.hosts,
                static_cast<unsigned long long>(bytes), sim_s, std::chrono::duration<double>(t3 - t2).count(),
                std::chrono::duration<double>(t1 - t0).count());
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "simgrid driver: %s\n", ex.what());
    return 1;
  }
  return 0;
}
