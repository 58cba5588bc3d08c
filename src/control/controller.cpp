#include "src/control/controller.hpp"

#include <algorithm>
#include <cstdio>

#include "src/control/placement.hpp"
#include "src/switch/udp.hpp"

namespace inc::control {

using proto::ctl::SwitchJob;

std::string_view name(Policy p) {
  switch (p) {
    case Policy::static_partition: return "static";
    case Policy::fair_share: return "fair";
    case Policy::first_come: return "first-come";
  }
  return "?";
}

std::string_view name(Refusal r) {
  switch (r) {
    case Refusal::unknown_host: return "unknown_host";
    case Refusal::no_switch: return "no_switch";
    case Refusal::switch_down: return "switch_down";
    case Refusal::too_many_members: return "too_many_members";
    case Refusal::separate_trees: return "separate_trees";
    case Refusal::no_slots: return "no_slots";
    case Refusal::policy_limit: return "policy_limit";
    case Refusal::switch_refused: return "switch_refused";
    case Refusal::count: break;
  }
  return "?";
}

Controller::Controller(ControllerConfig cfg) : cfg_(std::move(cfg)), rng_(cfg_.seed) {
  for (const auto& s : cfg_.fabric.switches) switches_[s.name];
  // Job ids start at a random point so that a restarted controller rarely meets its old ids
  // (and skips those the switches report).
  next_job_ = std::uint32_t(1u << 20) + std::uint32_t(rng_() % (1u << 30));
}

bool Controller::switch_alive(const SwitchRecord& s, Nanos now) const {
  return s.registered && now - s.last_seen <= cfg_.switch_timeout;
}

std::uint32_t Controller::pool(const SwitchRecord& s) const { return s.state.slots_per_lane; }

std::uint32_t Controller::free_slots(const SwitchRecord& s) const {
  std::uint64_t used = 0;
  for (const auto& [job, n] : s.reserved) {
    auto r = s.resizing.find(job);
    used += r == s.resizing.end() ? n : std::max(n, r->second);
  }
  for (const auto& j : s.state.static_jobs) used += j.slots;
  return used >= pool(s) ? 0 : std::uint32_t(pool(s) - used);
}

std::string Controller::switch_state(const proto::ctl::SwitchState& st, Nanos now) {
  const sw::TopoSwitch* f = cfg_.fabric.find(st.name);
  auto refuse = [&](std::string why) {
    ++c_.bad_switch_states;
    return why;
  };
  if (!f) return refuse("switch '" + st.name + "' is not in the controller's fabric");
  const sw::Endpoint at = sw::Endpoint::ipv4(st.ip, st.port);
  if (at != f->addr)
    return refuse("switch '" + st.name + "' serves " + at.str() + " but the fabric puts it at " + f->addr.str());
  const sw::Endpoint parent = st.parent_port ? sw::Endpoint::ipv4(st.parent_ip, st.parent_port) : sw::Endpoint{};
  const sw::Endpoint want = f->parent.empty() ? sw::Endpoint{} : cfg_.fabric.find(f->parent)->addr;
  if (parent != want)
    return refuse("switch '" + st.name + "' has parent " + parent.str() + " but the fabric says " + want.str());
  SwitchRecord& r = switches_[st.name];
  if (r.registered && r.state.incarnation != st.incarnation) {
    // The switch restarted: what it held is gone. Jobs whose tree ran through it keep their
    // lease (their ranks find out from the data plane) but hold nothing there any more.
    r.reserved.clear();
    r.resizing.clear();
    r.resized.clear();
  }
  r.state = st;
  r.last_seen = now;
  r.registered = true;
  std::set<std::uint32_t> still;
  for (const auto& j : st.jobs) {
    if (r.releasing.count(j.job)) {
      still.insert(j.job);
      actions_.push_back({st.name, SwitchAction::Kind::release, SwitchJob{j.job, 1, 1, proto::kNoMember}});
      continue;
    }
    auto it = jobs_.find(j.job);
    if (it == jobs_.end()) {
      // After a restart of the controller: adopt it until its job re-claims it or the lease ends.
      JobRecord rec;
      rec.job = j.job;
      rec.slots = j.slots;
      rec.expires = now + cfg_.lease;
      rec.adopted = true;
      rec.wanted = j.slots;
      rec.label = "adopted from switch " + st.name;
      it = jobs_.emplace(j.job, rec).first;
      ++c_.adopted;
    }
    auto& tree = it->second.tree;
    if (std::none_of(tree.begin(), tree.end(), [&](const auto& e) { return e.first == st.name; }))
      tree.emplace_back(st.name, j);
    r.reserved[j.job] = j.slots;
    if (auto rz = r.resizing.find(j.job); rz != r.resizing.end() && (rz->second == j.slots || r.resized.count(j.job))) {
      r.resizing.erase(rz);  // the size it ended with (a grow that did not fit keeps the old one)
      r.resized.erase(j.job);
    }
    if (!r.resizing.count(j.job)) {  // a resize done (or a grow that did not fit)
      auto& rec = it->second;
      for (auto& [name, spec] : rec.tree)
        if (name == st.name) spec.slots = j.slots;
      // Every switch of the tree done: the job's size is theirs (the same on each).
      if (std::none_of(rec.tree.begin(), rec.tree.end(), [&](const auto& e) {
            auto o = switches_.find(e.first);
            return o != switches_.end() && o->second.resizing.count(j.job) != 0;
          }))
        rec.slots = std::min_element(rec.tree.begin(), rec.tree.end(), [](const auto& a, const auto& b) {
                      return a.second.slots < b.second.slots;
                    })->second.slots;
    }
  }
  r.releasing = std::move(still);
  if (rebalancing()) rebalance(st.name);  // slots that shrunk jobs gave up; grows that waited
  return "";
}

std::optional<std::uint32_t> Controller::slots_for(const std::vector<std::string>& tree, std::uint32_t wanted,
                                                   Refusal& why_not, std::string& why) const {
  std::uint32_t slots = wanted;
  for (const auto& name : tree) {
    const SwitchRecord& s = switches_.at(name);
    const std::uint32_t P = pool(s), F = free_slots(s);
    const std::uint32_t n = std::uint32_t(s.reserved.size());
    std::uint32_t allow = 0;
    std::string rule;
    switch (cfg_.policy) {
      case Policy::static_partition:
        if (n >= cfg_.partitions) {
          why_not = Refusal::policy_limit;
          why = "all " + std::to_string(cfg_.partitions) + " partitions of switch '" + name + "' are taken";
          return std::nullopt;
        }
        allow = std::min(P / cfg_.partitions, F);
        rule = "a partition of " + std::to_string(P / cfg_.partitions);
        break;
      case Policy::fair_share: {
        const std::uint32_t among = std::max(jobs_on(name) + 1, cfg_.fair_jobs);
        // Re-balancing: the share, even if running jobs hold it now (they give it back).
        allow = rebalancing() ? P / among : std::min(P / among, F);
        rule = "a fair share of " + std::to_string(P / among) + " (" + std::to_string(among) + " jobs)";
        break;
      }
      case Policy::first_come:
        if (cfg_.max_jobs && n >= cfg_.max_jobs) {
          why_not = Refusal::policy_limit;
          why = "switch '" + name + "' has its limit of " + std::to_string(cfg_.max_jobs) + " jobs";
          return std::nullopt;
        }
        allow = cfg_.max_job_slots ? std::min(F, cfg_.max_job_slots) : F;
        rule = "first come";
        break;
    }
    if (allow < cfg_.min_slots) {
      why_not = Refusal::no_slots;
      why = "switch '" + name + "' has " + std::to_string(F) + " of " + std::to_string(P) +
            " slots free (" + std::to_string(n) + " jobs; " + rule + "), fewer than " +
            std::to_string(cfg_.min_slots);
      return std::nullopt;
    }
    slots = std::min(slots, allow);
  }
  return slots;
}

std::uint32_t Controller::new_job_id() {
  auto taken = [&](std::uint32_t id) {
    if (id == 0 || jobs_.count(id)) return true;
    for (const auto& [n, s] : switches_)
      for (const auto& j : s.state.static_jobs)
        if (j.job == id) return true;
    return false;
  };
  while (taken(next_job_)) ++next_job_;
  return next_job_++;
}

Grant Controller::request_tree(const proto::ctl::TreeRequest& req, Nanos now) {
  Grant g;
  auto refuse = [&](Refusal r, std::string why) {
    g.ok = false;
    g.refusal = r;
    g.why = std::move(why);
    ++c_.refused[std::size_t(r)];
    return g;
  };
  const auto& fab = cfg_.fabric;
  if (fab.switches.empty()) return refuse(Refusal::no_switch, "the fabric has no switch");
  // The leaves each rank may attach through: from the fabric's host lines; a fabric of one
  // switch needs none.
  std::vector<LeafChoice> choices;
  for (std::uint32_t r = 0; r < req.hosts.size(); ++r) {
    const sw::TopoHost* h = fab.find_host(req.hosts[r]);
    if (!h && fab.switches.size() != 1)
      return refuse(Refusal::unknown_host, "rank " + std::to_string(r) + "'s host '" + req.hosts[r] +
                                               "' is not in the controller's fabric (no 'host' line)");
    choices.push_back(!h ? LeafChoice{fab.switches[0].name} : h->leaves.empty() ? LeafChoice{h->leaf} : h->leaves);
  }
  // Root placement weighing the uplinks' rates and the jobs on them (placement.hpp); the
  // cheapest placement the data plane can build.
  std::map<std::string, unsigned> uplink_use;
  for (const auto& [id, j] : jobs_)
    for (const auto& [name, spec] : j.tree)
      if (spec.parent_member != proto::kNoMember) ++uplink_use[name];
  sw::TopoJob tj;
  tj.slots = 1;
  tj.nranks = std::uint32_t(req.hosts.size());
  std::string err;
  std::optional<sw::JobPlan> plan;
  for (auto& p : place_ranks(fab, choices, [&](const std::string& n) { return uplink_use[n]; })) {
    tj.attach = std::move(p.attach);
    std::string e;
    plan = sw::plan_job(fab, tj, e);
    if (plan) break;
    if (err.empty()) err = e;
  }
  if (!plan && err.empty())
    err = "job spans separate trees; all its switches need one common root";
  if (!plan) {
    const bool members = err.find("members") != std::string::npos;
    return refuse(members ? Refusal::too_many_members : Refusal::separate_trees, err);
  }
  std::vector<std::string> tree;
  for (const auto& [name, spec] : plan->specs) {
    const SwitchRecord& s = switches_.at(name);
    if (!switch_alive(s, now))
      return refuse(Refusal::switch_down, "switch '" + name + "' of the tree " +
                                              (s.registered ? "stopped heart-beating" : "has not registered"));
    tree.push_back(name);
  }
  const std::uint32_t wanted = req.slots_wanted ? req.slots_wanted : cfg_.default_slots;
  Refusal why_not = Refusal::no_slots;
  std::string why;
  auto slots = slots_for(tree, wanted, why_not, why);
  if (!slots) return refuse(why_not, why);
  g.ok = true;
  g.job = new_job_id();
  g.slots = *slots;
  g.lease = rng_() | 1;
  g.root = plan->root;
  for (const auto& a : plan->ranks) {
    const SwitchRecord& s = switches_.at(a.sw);
    g.ranks.push_back({a.sw, s.state.ip, s.state.port, a.member});
  }
  JobRecord rec;
  rec.job = g.job;
  rec.lease = g.lease;
  rec.expires = now + cfg_.lease;
  rec.slots = g.slots;
  rec.ranks = std::uint32_t(req.hosts.size());
  rec.label = req.label;
  rec.wanted = wanted;
  rec.arrival = ++arrivals_;
  for (const auto& [name, spec] : plan->specs)
    rec.tree.emplace_back(name, SwitchJob{g.job, spec.members, g.slots, spec.parent_member});
  // Admitted now if every switch has the slots free; else (re-balancing) once the running
  // jobs that hold them have been shrunk to their new shares.
  rec.waiting = std::any_of(rec.tree.begin(), rec.tree.end(),
                            [&](const auto& e) { return free_slots(switches_.at(e.first)) < g.slots; });
  if (!rec.waiting) admit_on_tree(rec);
  else ++c_.waited;
  g.tree = rec.tree;
  g.why = "tree rooted at switch '" + g.root + "', " + std::to_string(rec.tree.size()) + " switch" +
          (rec.tree.size() == 1 ? "" : "es") + ", " + std::to_string(g.slots) + " slots" +
          (g.slots < wanted ? " of " + std::to_string(wanted) + " wanted (" + std::string(name(cfg_.policy)) +
                                  " policy)"
                            : "");
  jobs_.emplace(g.job, std::move(rec));
  ++c_.granted;
  if (rebalancing())
    for (const auto& name : tree) rebalance(name);
  return g;
}

void Controller::drop_job(std::uint32_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const bool admitted = !it->second.waiting;
  std::vector<std::string> tree;
  for (const auto& [name, spec] : it->second.tree) {
    auto s = switches_.find(name);
    if (s == switches_.end()) continue;
    tree.push_back(name);
    s->second.resizing.erase(job);
    s->second.resized.erase(job);
    if (!admitted) continue;  // never sent to the switches
    s->second.reserved.erase(job);
    s->second.releasing.insert(job);
    actions_.push_back({name, SwitchAction::Kind::release, SwitchJob{job, 1, 1, proto::kNoMember}});
  }
  jobs_.erase(it);
  if (!rebalancing()) return;
  for (const auto& name : tree) rebalance(name);  // its slots: waiting jobs, then the others grow
}

void Controller::admission_failed(std::uint32_t job, const std::string& sw, proto::Reason r) {
  ++c_.switch_refusals;
  ++c_.refused[std::size_t(Refusal::switch_refused)];
  (void)sw;
  (void)r;
  drop_job(job);
}

bool Controller::renew(const proto::ctl::LeaseRenew& m, Nanos now) {
  auto it = jobs_.find(m.job);
  if (it != jobs_.end() && !it->second.adopted) {
    if (it->second.lease != m.lease) return false;
    it->second.expires = now + cfg_.lease;
    return true;
  }
  if (m.claim.empty() || m.lease == 0) return false;
  // Re-claim after a restart of the controller: the job names what it holds; the switches
  // that re-registered already reported it (adopted) or will.
  for (const auto& [name, spec] : m.claim)
    if (!switches_.count(name) || spec.job != m.job) return false;
  JobRecord rec;
  rec.job = m.job;
  rec.lease = m.lease;
  rec.expires = now + cfg_.lease;
  rec.slots = m.claim.front().second.slots;
  rec.wanted = rec.slots;
  rec.tree = m.claim;
  rec.label = it != jobs_.end() ? "re-claimed (adopted)" : "re-claimed";
  for (const auto& [name, spec] : m.claim) switches_[name].reserved[m.job] = spec.slots;
  jobs_[m.job] = std::move(rec);
  ++c_.reclaimed;
  return true;
}

bool Controller::release(std::uint32_t job, std::uint64_t lease) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.lease != lease) return false;
  drop_job(job);
  ++c_.released;
  return true;
}

void Controller::tick(Nanos now) {
  std::vector<std::uint32_t> expired;
  for (const auto& [id, j] : jobs_)
    if (now > j.expires) expired.push_back(id);
  for (auto id : expired) {
    drop_job(id);
    ++c_.expired;
  }
}

namespace {
std::string esc(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += char(c);
    else if (c < 0x20 || c >= 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += char(c);
  }
  return o;
}
}  // namespace

std::string Controller::status_json(Nanos now) const {
  std::string o = "{\"policy\":\"" + std::string(name(cfg_.policy)) + "\",\"switches\":[";
  bool first = true;
  for (const auto& [n, s] : switches_) {
    o += first ? "" : ",";
    first = false;
    o += "{\"name\":\"" + esc(n) + "\",\"registered\":" + (s.registered ? "true" : "false") +
         ",\"alive\":" + (switch_alive(s, now) ? "true" : "false") + ",\"slots\":" + std::to_string(pool(s)) +
         ",\"free\":" + std::to_string(free_slots(s)) + ",\"static_jobs\":" +
         std::to_string(s.state.static_jobs.size()) + ",\"jobs\":{";
    bool f2 = true;
    for (const auto& [job, slots] : s.reserved) {
      o += (f2 ? "\"" : ",\"") + std::to_string(job) + "\":" + std::to_string(slots);
      f2 = false;
    }
    o += "}}";
  }
  o += "],\"jobs\":[";
  first = true;
  for (const auto& [id, j] : jobs_) {
    o += first ? "" : ",";
    first = false;
    o += "{\"job\":" + std::to_string(id) + ",\"label\":\"" + esc(j.label) + "\",\"ranks\":" +
         std::to_string(j.ranks) + ",\"slots\":" + std::to_string(j.slots) + ",\"switches\":" +
         std::to_string(j.tree.size()) + ",\"adopted\":" + (j.adopted ? "true" : "false") +
         ",\"waiting\":" + (j.waiting ? "true" : "false") +
         ",\"resizable\":" + (resizable(j) ? "true" : "false") +
         ",\"lease_left_ms\":" + std::to_string((j.expires - now) / sw::kMillisecond) + "}";
  }
  o += "],\"counters\":{\"granted\":" + std::to_string(c_.granted) + ",\"released\":" +
       std::to_string(c_.released) + ",\"expired\":" + std::to_string(c_.expired) + ",\"adopted\":" +
       std::to_string(c_.adopted) + ",\"reclaimed\":" + std::to_string(c_.reclaimed) + ",\"resizes\":" + std::to_string(c_.resizes) + ",\"waited\":" +
       std::to_string(c_.waited) + ",\"refused\":{";
  for (std::size_t r = 0; r < std::size_t(Refusal::count); ++r)
    o += (r ? ",\"" : "\"") + std::string(name(Refusal(r))) + "\":" + std::to_string(c_.refused[r]);
  o += "}}}";
  return o;
}

}  // namespace inc::control
