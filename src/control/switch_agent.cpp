#include "src/control/switch_agent.hpp"

#include <algorithm>
#include <chrono>

#include "src/control/conn.hpp"

namespace inc::control {

namespace ctl = proto::ctl;
using namespace std::chrono_literals;

SwitchAgent::SwitchAgent(std::string controller, const proto::auth::Key& secret, std::string name,
                         sw::SwitchLanes& lanes, const sw::SwitchConfig& cfg, std::FILE* log)
    : controller_(std::move(controller)), secret_(secret), name_(std::move(name)), lanes_(lanes), cfg_(cfg), log_(log) {
  thread_ = std::thread([this] { run(); });
}

SwitchAgent::~SwitchAgent() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

ctl::SwitchState SwitchAgent::state() {
  const sw::SwitchSnapshot snap = lanes_.snapshot();
  ctl::SwitchState s;
  s.name = name_;
  s.ip = lanes_.local(0).ipv4_addr();
  s.port = lanes_.local(0).port();
  s.lanes = lanes_.lanes();
  s.slots_per_lane = lanes_.slots_per_lane();
  s.slot_elems = snap.slot_elems;
  s.caps = cfg_.caps;
  s.incarnation = snap.incarnation;
  if (cfg_.parent.valid()) {
    s.parent_ip = cfg_.parent.ipv4_addr();
    s.parent_port = cfg_.parent.port();
  }
  std::set<std::uint32_t> still_released;
  for (const auto& j : snap.jobs) {
    if (released_.count(j.spec.job)) {
      still_released.insert(j.spec.job);
      continue;
    }
    ctl::SwitchJob sj{j.spec.job, j.spec.members, j.spec.slots, j.spec.parent_member};
    (managed_.count(j.spec.job) ? s.jobs : s.static_jobs).push_back(sj);
  }
  released_ = std::move(still_released);
  return s;
}

void SwitchAgent::session() {
  Client c(controller_, secret_, ctl::Role::switch_agent, 2s);
  c.send(state(), 2s);
  std::fprintf(log_, "inc switch %s: registered with the controller %s\n", name_.c_str(), controller_.c_str());
  std::fflush(log_);
  auto next = std::chrono::steady_clock::now() + 1s;
  while (!stop_.load()) {
    auto m = c.recv(100ms);
    if (m) {
      if (auto* a = std::get_if<ctl::Admit>(&*m)) {
        sw::JobSpec spec{a->spec.job, a->spec.members, a->spec.slots, a->spec.parent_member, a->key};
        const proto::Reason r = lanes_.admit_on_every_lane(spec);
        if (r == proto::Reason::ok) {
          managed_.insert(a->spec.job);
          released_.erase(a->spec.job);
        }
        c.send(ctl::Outcome{a->req, a->spec.job, std::uint8_t(r)}, 2s);
      } else if (auto* rel = std::get_if<ctl::Release>(&*m)) {
        // Only what the controller admitted: a release cannot touch a static job.
        const bool known = managed_.erase(rel->job) && lanes_.release_on_every_lane(rel->job);
        if (known) released_.insert(rel->job);
        c.send(ctl::Outcome{rel->req, rel->job, std::uint8_t(known ? proto::Reason::ok : proto::Reason::unknown_job)}, 2s);
      } else if (auto* rz = std::get_if<ctl::Resize>(&*m)) {
        // On several lanes one resize at a time: a Resize that comes while the job's last one
        // is under way waits for it (a lane that moved and one that has not cannot take a new
        // target together; docs/PROTOCOL.md "Live resize of lanes").
        if (lanes_.lanes() > 1 && resizing_.count(rz->job)) {
          if (auto old = deferred_.find(rz->job); old != deferred_.end())  // superseded
            c.send(ctl::Outcome{old->second.req, rz->job, std::uint8_t(proto::Reason::ok)}, 2s);
          deferred_[rz->job] = *rz;
        } else {
          // Only what the controller admitted; the job moves once its members drained (the
          // answer waits for that, below).
          const proto::Reason r = managed_.count(rz->job) ? lanes_.resize_on_every_lane(rz->job, rz->slots)
                                                          : proto::Reason::unknown_job;
          if (r == proto::Reason::ok) {
            if (auto old = resizing_.find(rz->job); old != resizing_.end())  // superseded
              c.send(ctl::Outcome{old->second, rz->job, std::uint8_t(proto::Reason::ok)}, 2s);
            resizing_[rz->job] = rz->req;
          } else {
            c.send(ctl::Outcome{rz->req, rz->job, std::uint8_t(r)}, 2s);
          }
        }
      } else {
        throw std::runtime_error("unexpected message from the controller");
      }
    }
    if (!resizing_.empty()) {
      // A resize is done when no lane has it under way any more: tell the controller, then
      // the state with the size the job ended with (once the lanes' snapshot shows it).
      for (auto it = resizing_.begin(); it != resizing_.end();) {
        const std::optional<bool> under_way = lanes_.resizing(it->first);
        if (under_way && *under_way) {
          ++it;
          continue;
        }
        c.send(ctl::Outcome{it->second, it->first,
                            std::uint8_t(under_way ? proto::Reason::ok : proto::Reason::unknown_job)}, 2s);
        const std::uint32_t job = it->first;
        it = resizing_.erase(it);
        if (!state_due_) state_due_ = std::chrono::steady_clock::now() + 150ms;
        if (auto d = deferred_.find(job); d != deferred_.end()) {  // the Resize that waited for it
          const ctl::Resize next = d->second;
          deferred_.erase(d);
          const proto::Reason r = managed_.count(job) ? lanes_.resize_on_every_lane(job, next.slots)
                                                      : proto::Reason::unknown_job;
          if (r == proto::Reason::ok)
            resizing_[job] = next.req;  // (it = the next entry still: map insertions keep iterators)
          else
            c.send(ctl::Outcome{next.req, job, std::uint8_t(r)}, 2s);
        }
      }
    }
    if (state_due_ && std::chrono::steady_clock::now() >= *state_due_) {
      next = *state_due_;
      state_due_.reset();
    }
    if (std::chrono::steady_clock::now() >= next) {
      c.send(state(), 2s);
      next = std::chrono::steady_clock::now() + 1s;
    }
  }
}

void SwitchAgent::run() {
  std::string last;
  while (!stop_.load()) {
    try {
      session();
    } catch (const std::exception& e) {
      if (e.what() != last) {  // said once per distinct failure, not every second
        std::fprintf(log_, "inc switch %s: controller: %s (retrying every second; the data plane carries on)\n",
                     name_.c_str(), e.what());
        std::fflush(log_);
        last = e.what();
      }
    }
    for (int i = 0; i < 10 && !stop_.load(); ++i) std::this_thread::sleep_for(100ms);
  }
}

}  // namespace inc::control
