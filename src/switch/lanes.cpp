#include "src/switch/lanes.hpp"

#include "src/switch/lanes_resize.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>

namespace inc::sw {

std::uint16_t default_lanes() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return std::uint16_t(std::clamp(n, 1, int(proto::kMaxLanes)));
}

namespace {

SwitchConfig lane_config(const LanesConfig& c, std::uint16_t lane, std::uint32_t slots) {
  SwitchConfig s = c.cfg;
  s.slots = slots;
  s.lanes = c.lanes;
  s.lane = lane;
  s.external_control = true;
  // Distinct epochs per lane: a packet sent to the wrong lane cannot carry a valid epoch.
  s.incarnation = c.cfg.incarnation + std::uint64_t(lane) * 0x9E3779B97F4A7C15ull;
  if (s.incarnation == 0) s.incarnation = 1;
  // Each lane seals its keyed jobs' packets as a sender of its own.
  s.auth_instance = proto::auth::random_instance();
  s.auth_seq_base = proto::auth::clock_seq_base();
  if (c.cfg.parent.valid())
    s.parent = Endpoint::ipv4(c.cfg.parent.ipv4_addr(), std::uint16_t(c.cfg.parent.port() + lane));
  return s;
}

FaultConfig lane_faults(const FaultConfig& f, std::uint16_t lane) {
  FaultConfig x = f;
  x.seed = f.seed + lane;
  return x;
}

}  // namespace

SwitchLanes::SwitchLanes(const LanesConfig& c) : c_(c) {
  const std::uint16_t L = std::max<std::uint16_t>(c.lanes, 1);
  c_.lanes = L;
  per_lane_slots_ = sw::slots_per_lane(c.cfg.slots, L);
  if (per_lane_slots_ == 0)
    throw std::runtime_error(std::to_string(c.cfg.slots) + " slots cannot be split over " +
                             std::to_string(L) + " lanes (each lane needs at least one)");
  if (c.bind.port() != 0 && std::uint32_t(c.bind.port()) + L - 1 > 65535)
    throw std::runtime_error("lanes " + std::to_string(L) + " from port " +
                             std::to_string(c.bind.port()) + " go beyond port 65535");
  auto make = [&](std::uint16_t l, std::uint16_t port) {
    return std::make_unique<UdpSwitchServer>(lane_config(c_, l, per_lane_slots_),
                                             Endpoint::ipv4(c.bind.ipv4_addr(), port),
                                             lane_faults(c.faults, l), c.batch, c.offload);
  };
  if (c.bind.port() != 0) {
    for (std::uint16_t l = 0; l < L; ++l) {
      try {
        servers_.push_back(make(l, std::uint16_t(c.bind.port() + l)));
      } catch (const std::exception& e) {
        throw std::runtime_error("lane " + std::to_string(l) + ": " + e.what());
      }
    }
  } else {
    // An ephemeral base port, then the next L - 1 ports; start over when one is taken.
    constexpr int kAttempts = 200;
    for (int attempt = 0; attempt < kAttempts && servers_.size() < L; ++attempt) {
      servers_.clear();
      servers_.push_back(make(0, 0));
      const std::uint32_t base = servers_[0]->local().port();
      if (base + L - 1 > 65535) continue;
      for (std::uint16_t l = 1; l < L; ++l) {
        try {
          servers_.push_back(make(l, std::uint16_t(base + l)));
        } catch (const std::exception&) {
          break;
        }
      }
    }
    if (servers_.size() < L) {
      servers_.clear();
      throw std::runtime_error("cannot find " + std::to_string(L) + " consecutive free UDP ports on " +
                               Endpoint::ipv4(c.bind.ipv4_addr(), 0).str() + " (" +
                               std::to_string(kAttempts) + " attempts)");
    }
  }
  for (std::uint16_t l = 0; l < L; ++l)
    servers_[l]->set_control_sink([this, l](ControlEvent&& e) {
      {
        std::lock_guard<std::mutex> g(mu_);
        pending_.push_back({l, std::move(e)});
      }
      cv_.notify_one();
    });
}

SwitchLanes::~SwitchLanes() = default;

JobSpec SwitchLanes::with_group(JobSpec spec, bool run_time) const {
  if (run_time && !spec.multicast.valid() && c_.group_span != 0)
    spec.multicast = Endpoint::ipv4(c_.group_base + spec.job % c_.group_span, 0);
  // A group without a port is at lane 0's port (the members know it: their switch endpoint).
  if (spec.multicast.valid() && spec.multicast.port() == 0)
    spec.multicast = Endpoint::ipv4(spec.multicast.ipv4_addr(), servers_[0]->local().port());
  return spec;
}

proto::Reason SwitchLanes::admit_static(const JobSpec& given, Nanos now, std::uint16_t& refused_lane) {
  const JobSpec spec = with_group(given, false);
  for (std::uint16_t l = 0; l < lanes(); ++l) {
    auto r = servers_[l]->dataplane().admit(spec, now);
    if (r != proto::Reason::ok) {
      refused_lane = l;
      for (std::uint16_t k = 0; k < l; ++k) servers_[k]->dataplane().release(spec.job);
      return r;
    }
  }
  return proto::Reason::ok;
}

// Runs f(dataplane) on every lane's thread; the results in lane order, or nullopt if a lane did
// not answer within the deadline (only when lanes are stopping).
template <class R, class F>
std::optional<std::vector<R>> SwitchLanes::every_lane(F f) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<R> out;
    std::size_t done = 0;
  };
  auto st = std::make_shared<State>();
  st->out.resize(lanes());
  for (std::uint16_t l = 0; l < lanes(); ++l)
    servers_[l]->post([st, f, l](SwitchDataPlane& dp) {
      R r = f(dp);
      std::lock_guard<std::mutex> g(st->mu);
      st->out[l] = r;
      ++st->done;
      st->cv.notify_all();
    });
  std::unique_lock<std::mutex> lk(st->mu);
  if (!st->cv.wait_for(lk, std::chrono::seconds(10), [&] { return st->done == lanes(); }))
    return std::nullopt;
  return st->out;
}

void SwitchLanes::handle(const Pending& p) {
  const ControlEvent& e = p.e;
  const std::uint32_t job = e.spec.job;
  using Kind = ControlEvent::Kind;
  proto::Reason answer = proto::Reason::ok;
  if (e.kind == Kind::admit) {
    struct Admitted {
      proto::Reason r = proto::Reason::ok;
      bool existed = false;
    };
    const JobSpec spec = with_group(e.spec, true);
    auto res = every_lane<Admitted>([spec](SwitchDataPlane& dp) {
      Admitted a;
      a.existed = dp.has_job(spec.job);
      a.r = dp.admit(spec, monotonic_now(), true);
      return a;
    });
    if (!res) return;  // stopping: the controller retries elsewhere or times out
    for (const auto& a : *res)
      if (a.r != proto::Reason::ok) {
        answer = a.r;
        break;
      }
    if (answer != proto::Reason::ok) {
      std::vector<bool> undo;
      for (const auto& a : *res) undo.push_back(a.r == proto::Reason::ok && !a.existed);
      every_lane<bool>([job, undo](SwitchDataPlane& dp) {
        return undo[dp.config().lane] ? dp.release(job) : false;
      });
    }
  } else if (e.kind == Kind::release) {
    every_lane<bool>([job](SwitchDataPlane& dp) { return dp.release(job); });
  } else {
    // Every member of a dynamic job joined and left one lane: release it once every lane saw
    // the same (a lane its members have not reached yet keeps it; idling releases a job whose
    // members never come).
    auto gone = every_lane<int>([job](SwitchDataPlane& dp) { return int(dp.departed(job)); });
    if (gone && std::all_of(gone->begin(), gone->end(), [](int n) { return n == 1; }))
      every_lane<bool>([job](SwitchDataPlane& dp) { return dp.release(job); });
    return;
  }
  ControlEvent reply = e;
  servers_[p.lane]->post([reply, answer](SwitchDataPlane& dp) { dp.answer_control(reply, answer); });
}

proto::Reason SwitchLanes::admit_on_every_lane(const JobSpec& given) {
  const JobSpec spec = with_group(given, true);
  struct Admitted {
    proto::Reason r = proto::Reason::ok;
    bool existed = false;
  };
  auto res = every_lane<Admitted>([spec](SwitchDataPlane& dp) {
    Admitted a;
    a.existed = dp.has_job(spec.job);
    a.r = dp.admit(spec, monotonic_now(), false);
    return a;
  });
  if (!res) return proto::Reason::unexpected;  // stopping
  proto::Reason answer = proto::Reason::ok;
  for (const auto& a : *res)
    if (a.r != proto::Reason::ok) answer = a.r;
  if (answer != proto::Reason::ok) {
    std::vector<bool> undo;
    for (const auto& a : *res) undo.push_back(a.r == proto::Reason::ok && !a.existed);
    const std::uint32_t job = spec.job;
    every_lane<bool>([job, undo](SwitchDataPlane& dp) { return undo[dp.config().lane] ? dp.release(job) : false; });
  }
  return answer;
}

bool SwitchLanes::release_on_every_lane(std::uint32_t job) {
  auto res = every_lane<bool>([job](SwitchDataPlane& dp) { return dp.release(job); });
  return res && !res->empty() && res->front();
}

proto::Reason SwitchLanes::resize_on_every_lane(std::uint32_t job, std::uint32_t slots) {
  if (lanes() > 1)
    return resize_lanes([this](auto f) { return every_lane<decltype(f(std::declval<SwitchDataPlane&>()))>(f); },
                        job, slots);
  auto res = every_lane<proto::Reason>([job, slots](SwitchDataPlane& dp) { return dp.resize(job, slots); });
  if (!res || res->empty()) return proto::Reason::unexpected;  // stopping
  for (auto r : *res)
    if (r != proto::Reason::ok) return r;
  return proto::Reason::ok;
}

std::optional<bool> SwitchLanes::resizing(std::uint32_t job) {
  auto res = every_lane<int>([job](SwitchDataPlane& dp) { return !dp.has_job(job) ? -1 : dp.resize_pending(job) ? 1 : 0; });
  if (!res || res->empty()) return std::nullopt;
  bool any = false;
  for (int r : *res) {
    if (r < 0) return std::nullopt;
    any = any || r > 0;
  }
  return any;
}

void SwitchLanes::expire_idle(Nanos now) {
  const Nanos idle = c_.cfg.idle_timeout;
  if (idle <= 0) return;
  // A dynamic job expires when it idled on every lane (lanes it does not use count as idle).
  std::map<std::uint32_t, bool> idle_everywhere;
  for (const auto& s : servers_)
    for (const auto& j : s->snapshot().jobs) {
      if (!j.dynamic) continue;
      auto [it, fresh] = idle_everywhere.try_emplace(j.spec.job, true);
      if (now - j.last_active <= idle) it->second = false;
    }
  for (const auto& [job, expired] : idle_everywhere)
    if (expired) {
      const std::uint32_t id = job;
      every_lane<bool>([id](SwitchDataPlane& dp) { return dp.expire(id); });
    }
}

void SwitchLanes::run(const std::atomic<bool>& stop) {
  lanes_stop_.store(false);
  std::vector<std::thread> threads;
  for (std::uint16_t l = 0; l < lanes(); ++l)
    threads.emplace_back([this, l] {
      const std::string name = "inc-lane-" + std::to_string(l);
      pthread_setname_np(pthread_self(), name.c_str());
      servers_[l]->run(&lanes_stop_);
    });
  Nanos next_expiry = monotonic_now() + kSecond;
  while (!stop.load()) {
    std::vector<Pending> work;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // The stop flag is set from a signal handler, which cannot notify: poll it every 100 ms.
      cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return !pending_.empty(); });
      work.swap(pending_);
    }
    for (const auto& p : work) handle(p);
    const Nanos now = monotonic_now();
    if (now >= next_expiry) {
      expire_idle(now);
      next_expiry = now + kSecond;
    }
  }
  lanes_stop_.store(true);
  for (auto& s : servers_) s->stop();
  for (auto& t : threads) t.join();
}

SwitchSnapshot SwitchLanes::snapshot() const {
  std::vector<SwitchSnapshot> v;
  std::vector<Endpoint> eps;
  for (const auto& s : servers_) {
    v.push_back(s->snapshot());
    eps.push_back(s->local());
  }
  return merge_lanes(v, eps);
}

SwitchSnapshot merge_lanes(const std::vector<SwitchSnapshot>& lanes,
                           const std::vector<Endpoint>& endpoints) {
  SwitchSnapshot m;
  if (lanes.empty()) return m;
  m.slot_elems = lanes[0].slot_elems;
  m.incarnation = lanes[0].incarnation;
  std::map<std::uint32_t, JobSnapshot> jobs;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const SwitchSnapshot& s = lanes[l];
    const SwitchCounters& c = s.counters;
    SwitchCounters& t = m.counters;
    for (auto f : {&TrafficCounters::packets_in, &TrafficCounters::packets_out, &TrafficCounters::bytes_in,
                   &TrafficCounters::bytes_out, &TrafficCounters::aggregations, &TrafficCounters::results,
                   &TrafficCounters::retransmissions, &TrafficCounters::duplicates,
                   &TrafficCounters::results_resent, &TrafficCounters::results_multicast, &TrafficCounters::upstream_resent, &TrafficCounters::gaps_signalled, &TrafficCounters::probes,
                   &TrafficCounters::drops})
      t.*f += c.*f;
    for (std::size_t r = 0; r < t.drops_by_reason.size(); ++r) t.drops_by_reason[r] += c.drops_by_reason[r];
    t.jobs_failed += c.jobs_failed;
    t.job_resets += c.job_resets;
    t.job_resizes += c.job_resizes;
    if (l == 0) {
      t.jobs_admitted = c.jobs_admitted;
      t.jobs_released = c.jobs_released;
      t.jobs_expired = c.jobs_expired;
    }
    m.slots_total += s.slots_total;
    m.slots_allocated += s.slots_allocated;
    m.cpu_seconds += s.cpu_seconds;
    m.faults_enabled |= s.faults_enabled;
    m.faults_injected.lost += s.faults_injected.lost;
    m.faults_injected.duplicated += s.faults_injected.duplicated;
    m.faults_injected.reordered += s.faults_injected.reordered;
    LaneSnapshot ls;
    ls.lane = std::uint16_t(l);
    ls.endpoint = l < endpoints.size() ? endpoints[l] : Endpoint{};
    ls.counters = c;
    ls.slots_total = s.slots_total;
    ls.slots_allocated = s.slots_allocated;
    ls.cpu_seconds = s.cpu_seconds;
    m.lanes.push_back(ls);
    for (const auto& j : s.jobs) {
      auto [it, fresh] = jobs.try_emplace(j.spec.job, j);
      if (fresh) continue;
      JobSnapshot& x = it->second;
      x.busy_copies += j.busy_copies;
      x.failed = x.failed || j.failed;
      if (x.fail_reason == proto::Reason::ok) x.fail_reason = j.fail_reason;
      x.last_active = std::max(x.last_active, j.last_active);
      for (auto f : {&TrafficCounters::packets_in, &TrafficCounters::packets_out, &TrafficCounters::bytes_in,
                     &TrafficCounters::bytes_out, &TrafficCounters::aggregations, &TrafficCounters::results,
                     &TrafficCounters::retransmissions, &TrafficCounters::duplicates,
                     &TrafficCounters::results_resent, &TrafficCounters::results_multicast, &TrafficCounters::upstream_resent, &TrafficCounters::gaps_signalled, &TrafficCounters::probes,
                     &TrafficCounters::drops})
        x.counters.*f += j.counters.*f;
    }
  }
  for (auto& [id, j] : jobs) m.jobs.push_back(j);
  return m;
}

}  // namespace inc::sw
