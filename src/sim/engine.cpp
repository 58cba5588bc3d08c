#include "sim/engine.hpp"
#include "sim/engine_impl.hpp"

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

#include "sim/contention.hpp"
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

const char* name(Matching m) {
  switch (m) {
    case Matching::dataflow: return "dataflow";
    case Matching::rendezvous: return "rendezvous";
    case Matching::eager: return "eager";
    case Matching::ready: return "ready";
  }
  return "?";
}

bool parse_matching(std::string_view s, Matching& out) {
  if (s == "dataflow") out = Matching::dataflow;
  else if (s == "rendezvous") out = Matching::rendezvous;
  else if (s == "eager") out = Matching::eager;
  else if (s == "ready") out = Matching::ready;
  else return false;
  return true;
}

void Simulator::Impl::op_ready(std::uint32_t ji, std::uint32_t op) {
  Job& J = jobs[ji];
  const SimOp o = J.op(op);
  const std::uint8_t prior = J.state(op);
  J.set_state(op, 1);
  switch (o.kind) {
    case OpKind::send: {
      // An eager message leaves without waiting for its receive; under `ready` a large one
      // waits for the receiver's notice (state 6), not only for the receive to be posted.
      const std::uint32_t m = J.match(op);
      if (eager(o.bytes) || J.state(m) == (needs_notice(o.bytes) ? 6 : 1)) start_p2p(ji, op, m);
      break;
    }
    case OpKind::recv:
    case OpKind::recv_reduce: {
      if (prior == 4) {  // eager data on its way: done when it arrives
        J.set_state(op, 2);
      } else if (prior == 5) {  // eager data already here
        J.set_state(op, 2);
        finish_recv(ji, op);
      } else if (needs_notice(o.bytes)) {
        // The sender may move once it arrives. On shared cores (cpu_cores) the receiver's wake-up
        // and notice are work on its host's CPU, in line with every other host's: the notices
        // of a step leave one after another, as far apart as the cores are busy.
        if (opt.np.cpu_cores > 0)
          cpu_submit(static_cast<std::uint32_t>(J.spec.hosts[J.rank(op)]), opt.np.ready_notice_us * 1e-6, kNoticeSent, ji, op);
        else
          push(now + opt.np.ready_notice_us * 1e-6 + notice_flight(J, op), kNotice, ji, op);
      } else {
        const std::uint32_t m = J.match(op);
        if (J.state(m) == 1) start_p2p(ji, m, op);
      }
      break;
    }
    case OpKind::copy:
    case OpKind::reduce:
    case OpKind::repro_scan:  // local passes of a reproducible sum: as a reduce
    case OpKind::repro_encode:
    case OpKind::repro_decode:
    case OpKind::widen:
    case OpKind::narrow: {
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

double Simulator::Impl::notice_flight(const Job& J, std::uint32_t recv) {
  // The notice goes from the receiver's host back to the sender's, as a header-only message.
  const int hr = J.spec.hosts[J.rank(recv)], hs = J.spec.hosts[J.op(recv).peer];
  notice_path.clear();
  if (!topo.route(hr, hs, notice_path, link_load.data()))
    throw Error(Error::Kind::config,
                fmt::format("job '{}': no path from host {} to host {} avoids the failed links",
                            J.spec.name, hr, hs));
  return opt.np.host_overhead_us * 1e-6 + topo.path_latency(notice_path);
}

void Simulator::Impl::notice_arrived(std::uint32_t ji, std::uint32_t recv) {
  Job& J = jobs[ji];
  if (J.state(recv) != 1) return;  // only a posted receive still waiting for its data
  J.set_state(recv, 6);
  const std::uint32_t m = J.match(recv);
  if (J.state(m) == 1) start_p2p(ji, m, recv);
}

void Simulator::Impl::compute(std::uint32_t ji, std::uint32_t op, double dur) {
  Job& J = jobs[ji];
  if (dur <= 0) {
    op_done(ji, op);
    return;
  }
  const int r = J.rank(op);
  if (opt.np.cpu_cores > 0) {  // on the shared cores, in line with every host's work
    J.set_state(op, 2);
    cpu_submit(static_cast<std::uint32_t>(J.spec.hosts[r]), dur, kOpDone, ji, op);
    return;
  }
  const double t0 = std::max(now, J.rank_busy[r]);
  J.rank_busy[r] = t0 + dur;
  J.set_state(op, 2);
  push(t0 + dur, kOpDone, ji, op);
}

void Simulator::Impl::op_done(std::uint32_t ji, std::uint32_t op) {
  Job& J = jobs[ji];
  J.set_state(op, 3);
  ++J.ops_done;
  ++done_ops;
  J.res.end_s = std::max(J.res.end_s, now);
  if (!J.res.rank_end_s.empty()) {
    double& e = J.res.rank_end_s[static_cast<std::size_t>(J.rank(op))];
    e = std::max(e, now);
  }
  J.for_succ(op, [&](std::uint32_t j) {
    if (J.release(j)) work.emplace_back(ji, j);
  });
  // Only ops of a rank's open step can be done: the last one opens the next step.
  if (!J.step_left.empty()) {
    const std::int32_t r = J.rank(op);
    if (--J.step_left[r] == 0) open_step(J, r, J.step_end[r], true);
  }
}

void Simulator::Impl::finish_recv(std::uint32_t ji, std::uint32_t recv) {
  Job& J = jobs[ji];
  const SimOp o = J.op(recv);
  if (o.kind == OpKind::recv_reduce)
    compute(ji, recv, o.bytes * opt.np.gamma());
  else
    op_done(ji, recv);
}

void Simulator::Impl::drain() {
  while (!work.empty()) {
    auto [ji, op] = work.back();
    work.pop_back();
    op_ready(ji, op);
  }
}

void Simulator::Impl::start_p2p(std::uint32_t ji, std::uint32_t send, std::uint32_t recv) {
  Job& J = jobs[ji];
  const SimOp so = J.op(send);
  J.set_state(send, 2);
  const std::uint8_t rs = J.state(recv);
  J.set_state(recv, rs == 1 || rs == 6 ? 2 : 4);  // 4: eager, the receive is not posted yet
  // A folded run's sender is one of the simulated ranks, whose routes are made of their links'
  // orbit representatives (engine_fold.cpp); its receive may stand for an image's.
  const int src = J.rank(send), dst = so.peer;
  const int hs = J.spec.hosts[src], hd = J.spec.hosts[dst];
  // Static routings give a connection the same route every time: computed once.
  std::uint32_t* cached = J.route_cache.empty() ? nullptr : &J.route_cache[std::size_t{J.pair_of(send)} * Job::kRouteSlot];
  if (cached && cached[0] > 0) {
    path.assign(cached + 1, cached + 1 + cached[0]);
  } else {
    path.clear();
    if (!topo.route(hs, hd, path, link_load.data()))
      throw Error(Error::Kind::config,
                  fmt::format("job '{}': no path from rank {} (host {}) to rank {} (host {}) avoids the failed links",
                              J.spec.name, src, hs, dst, hd));
    if (cached && path.size() < Job::kRouteSlot) {
      cached[0] = static_cast<std::uint32_t>(path.size());
      std::copy(path.begin(), path.end(), cached + 1);
    }
  }
  const std::uint32_t xi = new_xfer();
  Xfer& x = xfers[xi];
  x.kind = XKind::p2p;
  x.job = ji;
  x.a = send;
  x.b = recv;
  x.bytes = static_cast<double>(so.bytes);
  x.cap = FlowNet::kNoCap;
  x.nres = 0;
  for (auto l : path) x.res[x.nres++] = l;
  count_route(path);
  const bool nic_keeps = J.spec.edge_offload && so.forwards;  // the NIC forwards what it received
  if (!nic_keeps) J.mem_bytes[src] += static_cast<double>(so.bytes);
  J.mem_bytes[J.rank(recv)] += static_cast<double>(so.bytes);  // folded: the receive's representative
  if (mem_on()) {
    if (!nic_keeps) x.res[x.nres++] = mem_res(hs);
    x.res[x.nres++] = mem_res(rep_host(hd));
  }
  ++J.res.messages;
  J.res.bytes_injected += x.bytes;
  const double o = (J.spec.edge_offload ? opt.np.nic_overhead_us : opt.np.host_overhead_us) * 1e-6;
  x.latency = topo.path_latency(path);
  // A buffered send is done once the transport has it (its overhead later); the bytes still move.
  x.send_done = so.bytes > 0 && static_cast<double>(so.bytes) <= opt.np.send_buffer_bytes;
  if (x.send_done) push(now + o, kOpDone, ji, send);
  push(now + o + x.latency, kXferStart, xi);
}

// Load and collision statistics of a routed message (switch-to-switch links only: host links
// are shared by every route of their host whatever the routing).
void Simulator::Impl::count_route(const std::vector<std::uint32_t>& p) {
  bool crosses = false, collides = false;
  for (auto l : p) {
    const Tier t = topo.link(l).tier;
    const bool sw = t == Tier::edge_up || t == Tier::core;
    if (sw) {
      crosses = true;
      collides = collides || link_load[l] > 0;
    }
    ++link_load[l];
    if (sw) max_link_flows = std::max(max_link_flows, link_load[l]);
  }
  if (crosses) {
    ++routed_flows;
    if (collides) ++collided_flows;
  }
}

// The message's overhead and latency have elapsed; it takes the connection when it is free.
void Simulator::Impl::xfer_start(std::uint32_t xi) {
  Xfer& x = xfers[xi];
  if (x.kind == XKind::p2p) {
    Job& J = jobs[x.job];
    const std::uint32_t pr = J.pair_of(x.a), sq = J.pair_seq(x.a);
    if (J.pair_busy[pr] || sq != J.pair_next[pr]) {
      J.pair_q[pr].v.emplace_back(xi, sq);  // waits for its turn
      return;
    }
    J.pair_busy[pr] = 1;
  }
  begin_flow(xi);
}

void Simulator::Impl::begin_flow(std::uint32_t xi) {
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
void Simulator::Impl::commit() {
  if (!net.dirty()) return;
  net.commit(now);
  reschedule();
}

void Simulator::Impl::reschedule() {
  for (std::uint32_t f : net.changed()) {
    const double t = net.finish_time(f);
    if (t < std::numeric_limits<double>::infinity()) push(t, kFlowDone, f, net.version(f));
  }
  for (std::uint32_t r : net.changed_buckets()) push(net.bucket_empty_time(r), kBucketEmpty, r, net.bucket_version(r));
}

// A flow finished: remove it (rates are recomputed once per batch); false if the event is stale.
bool Simulator::Impl::flow_done(std::uint32_t f, std::uint32_t version, std::vector<std::uint32_t>& finished) {
  if (!net.active(f) || net.version(f) != version) return false;
  finished.push_back(flow_xfer[f]);
  net.remove(f);
  return true;
}

void Simulator::Impl::xfer_done(std::uint32_t xi) {
  const Xfer x = xfers[xi];
  free_xfers.push_back(xi);
  for (std::uint8_t i = 0; i < x.nres; ++i)
    if (x.res[i] < n_links) --link_load[x.res[i]];
  switch (x.kind) {
    case XKind::p2p: {
      Job& J = jobs[x.job];
      // The connection delivers messages in program order: start the next one if it waits.
      const std::uint32_t pr = J.pair_of(x.a);
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
      if (!x.send_done) op_done(x.job, x.a);
      if (J.state(x.b) == 4)
        J.set_state(x.b, 5);  // eager: arrived before its receive was posted
      else
        finish_recv(x.job, x.b);
      break;
    }
    case XKind::inc_up:
      inc_up_delivered(x.a, x.b);
      break;
    case XKind::inc_down:
      inc_down_delivered(x.a, x.b, x.chunk);
      break;
  }
}

SimResult Simulator::Impl::run() {
  const auto wall0 = std::chrono::steady_clock::now();
  if (opt.per_job_links) job_link_bytes.assign(jobs.size(), std::vector<double>(n_links, 0));
  setup_inc();
  // Symmetric jobs' per-rank state, for S ranks: a lone one folds when its routes allow.
  for (auto& J : jobs)
    if (J.sym) {
      // Ranks that start apart are not images of each other: no fold.
      // Nor do ranks whose hosts share cores (cpu_cores): their work waits in one line.
      const bool fold_ok = opt.fold_symmetric && jobs.size() == 1 && J.spec.rank_start_s.empty() && opt.np.cpu_cores == 0;
      const std::uint32_t S = fold_ok ? fold_period(J) : J.T.P;
      fold = J.T.P / S;
      layout_symmetric(J, S);
    }
  for (std::uint32_t ji = 0; ji < jobs.size(); ++ji) {
    jobs[ji].res.start_s = jobs[ji].res.end_s = jobs[ji].spec.start_s;
    if (jobs[ji].spec.rank_start_s.empty())
      push(jobs[ji].spec.start_s, kJobStart, ji);
    else
      schedule_rank_starts(ji);
  }
  const bool bar = opt.progress;
  auto last_print = wall0;
  std::uint64_t next_bar = 0x4000;
  while (!heap.empty()) {
    const Event e = heap.top();
    heap.pop();
    now = e.t;
    ++events;
    switch (e.type) {
      case kJobStart: {
        // Every op without dependencies, handled last op first (the work list is a stack), a
        // block at a time so that the list never holds most of a large job's ops (the receives
        // of a ring are all ready: 4 GB of list at 16,384 ranks). An op another released in the
        // meantime has been posted (state 1-3, 6) and is skipped; one not yet posted (0, or 4-5:
        // an eager message for it is on its way) is taken: the order is the same as scanning the
        // whole job first.
        Job& J = jobs[e.a];
        constexpr std::uint32_t kBlock = 1u << 16;
        for (auto hi = static_cast<std::uint32_t>(J.num_ops()); hi > 0;) {
          const std::uint32_t lo = hi > kBlock ? hi - kBlock : 0;
          for (std::uint32_t i = lo; i < hi; ++i)
            if (J.startable(i)) work.emplace_back(e.a, i);
          drain();
          hi = lo;
        }
        break;
      }
      case kXferStart: {
        // Every message and chunk that enters the network at this instant, then one refill.
        const auto start = [&](std::uint32_t xi, std::uint32_t) { xfer_start(xi); };
        run_bucket(e.a, start);
        while (!heap.empty() && heap.top().t == now && heap.top().type == kXferStart) {
          const std::uint32_t id = heap.top().a;
          heap.pop();
          ++events;
          run_bucket(id, start);
        }
        commit();
        break;
      }
      case kFlowDone: {
        // Every flow that completes at this instant, one refill, then their consequences.
        finished.clear();
        const auto done = [&](std::uint32_t f, std::uint32_t version) { flow_done(f, version, finished); };
        run_bucket(e.a, done);
        while (!heap.empty() && heap.top().t == now && heap.top().type == kFlowDone) {
          const std::uint32_t id = heap.top().a;
          heap.pop();
          ++events;
          run_bucket(id, done);
        }
        commit();
        for (std::uint32_t xi : finished) xfer_done(xi);
        commit();  // connections that started their next message
        break;
      }
      case kRankStart:
        start_rank(e.a, e.b);
        break;
      case kOpDone:
        op_done(e.a, e.b);
        break;
      case kAluDone:
        aggregated(e.a, static_cast<int>(e.b));
        break;
      case kIncHostReady:
        inc_host_ready(e.a, e.b);
        break;
      case kNotice:
        notice_arrived(e.a, e.b);
        break;
      case kNoticeSent:
        push(now + notice_flight(jobs[e.a], e.b), kNotice, e.a, e.b);
        break;
      case kHostSent:
        host_sent(e.a, e.b);
        break;
      case kHostRecvd:
        host_recvd(e.a, e.b);
        break;
      case kCpuDone:
        cpu_done(e.a);
        break;
      case kBucketEmpty: {
        // Every link whose bucket runs dry at this instant drops to its rate, then one refill.
        const auto empty = [&](std::uint32_t r, std::uint32_t version) {
          if (net.bucket_empty(r, version, now) == FlowNet::BucketEvent::again)
            push(net.bucket_empty_time(r), kBucketEmpty, r, net.bucket_version(r));
        };
        empty(e.a, e.b);
        while (!heap.empty() && heap.top().t == now && heap.top().type == kBucketEmpty) {
          const Event b = heap.top();
          heap.pop();
          ++events;
          empty(b.a, b.b);
        }
        commit();
        break;
      }
    }
    drain();
    if (bar && events >= next_bar) {
      next_bar = events + 0x4000;
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
    if (J.ops_done != J.num_ops())
      throw Error(Error::Kind::mismatch,
                  fmt::format("job '{}' deadlocked: {} of {} ops never ran", J.spec.name, J.num_ops() - J.ops_done,
                              J.num_ops()));
    J.res.ops = J.ops_done * fold;
    for (double b : J.mem_bytes) J.res.host_mem_bytes = std::max(J.res.host_mem_bytes, b);
    out.makespan_s = std::max(out.makespan_s, J.res.end_s);
  }
  unfold();
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
  out.routed_flows = routed_flows;
  out.collided_flows = collided_flows;
  out.max_link_flows = max_link_flows;
  out.refills = net.refills();
  out.refill_flows = net.refill_flows();
  out.buckets = net.num_buckets();
  out.buckets_emptied = net.buckets_emptied();
  out.link_bytes = std::move(link_bytes);
  out.job_link_bytes = std::move(job_link_bytes);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

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
  // Rotation-symmetric rings: one schedule for all ranks (under every matching semantics).
  coll::RankSchedule s0;
  if (impl_->opt.symmetric_schedules && symmetric_template(p, s0)) {
    Program T = template_program(s0);
    // An op's state and pending count (dependencies, and under rendezvous or eager its step
    // gate) share one byte in the symmetric layout.
    if (std::all_of(T.ndeps.begin(), T.ndeps.end(), [](std::uint32_t d) { return d < Impl::Job::kMaxPending; })) {
      impl_->add_symmetric(std::move(job), p.nranks, std::move(T));
      return;
    }
  }
  Program prog = build_program(p);
  impl_->add(std::move(job), std::move(prog));
}

void Simulator::add_job(JobSpec job, Program prog) { impl_->add(std::move(job), std::move(prog)); }

SimResult Simulator::run() { return impl_->run(); }

}  // namespace inc::sim
