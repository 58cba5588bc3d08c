// Live re-balancing of switch memory under the fair policy (docs/CONTROLLER.md "Re-balancing"):
// as jobs come and go, each switch's fair share is recomputed over the jobs on it and running
// jobs are resized to it. A resize goes to the switch (Resize), which moves the job without
// stopping it once its members drained up to a boundary (docs/PROTOCOL.md "Live resize");
// until the switch says it is done, the job counts with the larger of its two sizes, so slots a
// shrink gives up are promised to nobody before the job is off them. A newcomer whose share
// is still held waits for it (admit_waiting). A job on a tree of several switches gets the
// least share over them, on each of them (resize_tree).
#include <algorithm>

#include "src/control/controller.hpp"

namespace inc::control {

using proto::ctl::SwitchJob;

std::uint32_t Controller::jobs_on(const std::string& sw) const {
  const SwitchRecord& s = switches_.at(sw);
  std::uint32_t n = std::uint32_t(s.reserved.size());
  for (const auto& [id, j] : jobs_)
    if (j.waiting && std::any_of(j.tree.begin(), j.tree.end(), [&](const auto& e) { return e.first == sw; })) ++n;
  return n;
}

std::uint32_t Controller::waiting_need(const std::string& sw) const {
  std::uint32_t need = 0;
  for (const auto& [id, j] : jobs_)
    if (j.waiting && std::any_of(j.tree.begin(), j.tree.end(), [&](const auto& e) { return e.first == sw; }))
      need += j.slots;
  return need;
}

// The root of a job's tree announces the boundary in its results, the leaves pass it down to
// their members; every switch of the tree moves to the same size (docs/PROTOCOL.md "Live
// resize of a tree"). On one switch with several lanes, lane 0 picks the boundary and the
// other lanes take it ("Live resize of lanes"); on a tree of switches with several lanes the
// root's lanes do so and each leaf lane follows its parent's lane ("Live resize of a tree of
// lanes").
bool Controller::resizable(const JobRecord& j) const {
  if (j.waiting || j.adopted || j.fixed_size || j.tree.empty()) return false;
  return std::all_of(j.tree.begin(), j.tree.end(), [&](const auto& e) { return switches_.count(e.first) != 0; });
}

std::uint32_t Controller::share(const std::string& sw) const {
  const SwitchRecord& s = switches_.at(sw);
  return pool(s) / std::max(jobs_on(sw), cfg_.fair_jobs);
}

void Controller::resize_tree(JobRecord& j, std::uint32_t to) {
  // The same size on every switch of the tree: a leaf and its parent map chunk c to the same
  // slot c mod S. Each switch counts the job with the larger size until it says it moved.
  j.slots = to;
  for (auto& [name, spec] : j.tree) {
    SwitchRecord& s = switches_.at(name);
    s.resizing[j.job] = to;
    s.resized.erase(j.job);
    spec.slots = to;
    actions_.push_back({name, SwitchAction::Kind::resize, spec});
    ++c_.resizes;
  }
}

void Controller::admit_on_tree(JobRecord& rec) {
  rec.waiting = false;
  for (auto& [name, spec] : rec.tree) {
    spec.slots = rec.slots;
    switches_[name].reserved[rec.job] = rec.slots;
    actions_.push_back({name, SwitchAction::Kind::admit, spec});
  }
}

void Controller::admit_waiting() {
  std::vector<JobRecord*> waiting;
  for (auto& [id, j] : jobs_)
    if (j.waiting) waiting.push_back(&j);
  std::sort(waiting.begin(), waiting.end(), [](const JobRecord* a, const JobRecord* b) { return a->arrival < b->arrival; });
  for (JobRecord* j : waiting) {
    const bool fits = std::all_of(j->tree.begin(), j->tree.end(),
                                  [&](const auto& e) { return free_slots(switches_.at(e.first)) >= j->slots; });
    if (!fits) return;  // in arrival order: a later job does not overtake an earlier one
    admit_on_tree(*j);
  }
}

void Controller::rebalance(const std::string& sw) {
  SwitchRecord& s = switches_.at(sw);
  const std::uint32_t n = jobs_on(sw);
  if (n == 0) return;
  const std::uint32_t here = share(sw);
  auto current = [&](const JobRecord& j) {
    auto r = s.resizing.find(j.job);
    return r != s.resizing.end() ? r->second : s.reserved.at(j.job);
  };
  // Done on some switch of its tree, whose next state is not in yet: not resized again.
  auto settling = [&](const JobRecord& j) {
    return std::any_of(j.tree.begin(), j.tree.end(), [&](const auto& e) {
      auto t = switches_.find(e.first);
      return t != switches_.end() && t->second.resized.count(j.job) != 0;
    });
  };
  // A job's share is the least over its tree's switches.
  auto tree_share = [&](const JobRecord& j) {
    std::uint32_t least = here;
    for (const auto& [name, spec] : j.tree) least = std::min(least, share(name));
    return least;
  };
  // Waiting jobs hold nothing yet: they take the share as it is now, and are admitted if
  // that fits already.
  for (auto& [id, j] : jobs_)
    if (j.waiting && std::any_of(j.tree.begin(), j.tree.end(), [&](const auto& e) { return e.first == sw; }))
    {
      const std::uint32_t to = std::max(std::min(j.wanted, here), cfg_.min_slots);
      j.slots = j.tree.size() == 1 ? to : std::min(j.slots, to);  // (other switches' shares may be less)
    }
  admit_waiting();
  std::vector<JobRecord*> mine;
  for (const auto& [id, slots] : s.reserved) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && resizable(it->second)) mine.push_back(&it->second);
  }
  // Shrinks first: above the share (never below min_slots).
  for (JobRecord* j : mine) {
    const std::uint32_t to = std::max(std::min(j->wanted, tree_share(*j)), cfg_.min_slots);
    if (!settling(*j) && to < current(*j)) resize_tree(*j, to);
  }
  // Grows: towards min(wanted, share), into slots free now that no waiting job needs, on
  // every switch of the tree.
  for (JobRecord* j : mine) {
    const std::uint32_t cur = current(*j), goal = std::min(j->wanted, tree_share(*j));
    if (settling(*j) || goal <= cur) continue;
    std::uint32_t spare = goal - cur;
    for (const auto& [name, spec] : j->tree) {
      const std::uint32_t F = free_slots(switches_.at(name)), need = waiting_need(name);
      spare = std::min(spare, F > need ? F - need : 0);
    }
    if (spare == 0) continue;
    resize_tree(*j, cur + spare);
  }
}

void Controller::resize_done(std::uint32_t job, const std::string& sw, proto::Reason r, Nanos) {
  auto s = switches_.find(sw);
  if (s == switches_.end()) return;
  // Done: until its next state says what the job holds now, it counts with the larger of the
  // two sizes and is not resized again. Refused: it keeps what it holds.
  if (r == proto::Reason::ok) {
    if (s->second.resizing.count(job)) s->second.resized.insert(job);
  } else {
    s->second.resizing.erase(job);
    s->second.resized.erase(job);
  }
  auto j = jobs_.find(job);
  if (j != jobs_.end() && r != proto::Reason::ok) {
    j->second.fixed_size = true;  // refused: keeps what it holds
    if (auto h = s->second.reserved.find(job); h != s->second.reserved.end()) {
      j->second.slots = h->second;
      for (auto& [name, spec] : j->second.tree) {
        if (name == sw) {
          spec.slots = h->second;
          continue;
        }
        // The other switches of the tree are asked back to the size they hold (a leaf that
        // waits for a boundary its refusing parent will never announce stops waiting).
        auto o = switches_.find(name);
        if (o == switches_.end() || !o->second.resizing.count(job) || !o->second.reserved.count(job)) continue;
        spec.slots = o->second.reserved.at(job);
        o->second.resizing[job] = spec.slots;
        o->second.resized.erase(job);
        actions_.push_back({name, SwitchAction::Kind::resize, spec});
        ++c_.resizes;
      }
    }
  }
  if (rebalancing()) rebalance(sw);  // the waiting jobs, and grows that waited for these slots
}

}  // namespace inc::control
