// The controller's core, sans-IO (ENGINEERING.md section 1): the fabric, the switches that
// registered, the jobs and their trees, slots and leases. It takes messages and the time and
// leaves the admissions and releases to send to switches in an outbox; src/control/server.cpp
// moves them over TCP. docs/CONTROLLER.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "src/proto/control.hpp"
#include "src/switch/common.hpp"
#include "src/switch/topology.hpp"

namespace inc::control {

using sw::Nanos;

// How switch memory is shared among jobs (per switch, per lane).
enum class Policy : std::uint8_t {
  static_partition,  // the pool in `partitions` equal parts, one per job; no part free: refused
  fair_share,        // a new job gets at most pool / (jobs on the switch + 1)
  first_come,        // what it asks for (capped by max_job_slots) while free; max_jobs per switch
};
std::string_view name(Policy p);

struct ControllerConfig {
  sw::Topology fabric;
  Policy policy = Policy::fair_share;
  std::uint32_t partitions = 4;       // static_partition
  // fair_share: shares as if at least this many jobs were active (headroom left at admission;
  // 1 = none: a lone job may take everything, and gives it back by live re-balancing).
  std::uint32_t fair_jobs = 1;
  // fair_share: live re-balancing (docs/CONTROLLER.md "Re-balancing"): as jobs come and go,
  // every switch's fair share is recomputed and running jobs are resized to it (Resize to the
  // switch; the job moves without stopping once its members drained); a newcomer whose share
  // is held by running jobs waits for them to give it up. Off: shares at admission only.
  bool rebalance = true;
  std::uint32_t max_jobs = 0;         // first_come: jobs per switch (0: no limit)
  std::uint32_t max_job_slots = 0;    // first_come: slots per job (0: no limit)
  std::uint32_t min_slots = 1;        // fewer than this: no tree (the job runs on the hosts)
  std::uint32_t default_slots = 16;   // a request that does not say
  Nanos lease = 10 * sw::kSecond;     // a job that does not renew within this loses its tree
  Nanos switch_timeout = 5 * sw::kSecond;  // a switch silent this long gets no new trees
  std::uint64_t seed = 1;             // job ids and lease ids (keys come from the driver)
};

// A refusal's reason, for the answer and the counters.
enum class Refusal : std::uint8_t {
  unknown_host, no_switch, switch_down, too_many_members, separate_trees, no_slots, policy_limit,
  switch_refused, count
};
std::string_view name(Refusal r);

struct Grant {
  bool ok = false;
  Refusal refusal = Refusal::count;
  std::string why;
  std::uint32_t job = 0;
  std::uint32_t slots = 0;
  std::uint64_t lease = 0;
  std::string root;
  std::vector<proto::ctl::RankAttachment> ranks;
  std::vector<std::pair<std::string, proto::ctl::SwitchJob>> tree;
};

// What the driver sends to a switch.
struct SwitchAction {
  enum class Kind : std::uint8_t { admit, release, resize };
  std::string sw;
  Kind kind = Kind::admit;
  proto::ctl::SwitchJob spec;  // release: spec.job; resize: spec.job and spec.slots
};

struct SwitchRecord {
  proto::ctl::SwitchState state;
  Nanos last_seen = 0;
  bool registered = false;
  std::map<std::uint32_t, std::uint32_t> reserved;  // job -> slots per lane
  // Released by the controller, still in the switch's last state: not adopted again, and the
  // release is sent again while the switch keeps reporting it (a lost release).
  std::set<std::uint32_t> releasing;
  // Live resizes sent and not yet done (job -> slots asked): until the switch answers, the job
  // counts with the larger of its old and new size (a shrink frees nothing before it is done).
  std::map<std::uint32_t, std::uint32_t> resizing;
  // Of those, the ones the switch said are done: dropped at its next state, which has the size
  // the job ended with (not resized again meanwhile).
  std::set<std::uint32_t> resized;
};

struct JobRecord {
  std::uint32_t job = 0;
  std::uint64_t lease = 0;
  Nanos expires = 0;
  std::uint32_t slots = 0;
  std::uint32_t ranks = 0;
  std::string label;
  std::vector<std::pair<std::string, proto::ctl::SwitchJob>> tree;
  bool adopted = false;  // found on a switch after a restart, no job claimed it yet
  std::uint32_t wanted = 0;  // slots asked for (the most re-balancing grows it to)
  // Granted, but its slots are still held by running jobs that are being shrunk: admitted on
  // the switches once those are done (the driver gives up after its admission deadline).
  bool waiting = false;
  std::uint64_t arrival = 0;  // order of the grants (waiting jobs are admitted in this order)
  bool fixed_size = false;    // a switch refused to resize it: left as it is
};

class Controller {
 public:
  explicit Controller(ControllerConfig cfg);

  // A switch's registration or heartbeat. "" if taken, else why not (not in the fabric, or
  // at another address than the fabric says). Jobs it holds that the controller does not know
  // (a restart of the controller) are adopted with a fresh lease: the job that owns them
  // re-claims them, or they are released when the lease ends.
  std::string switch_state(const proto::ctl::SwitchState& s, Nanos now);

  // A tree for ranks on `hosts`: reserves slots on every switch of it and queues the
  // admissions (actions()). Refused: the reason, nothing reserved.
  Grant request_tree(const proto::ctl::TreeRequest& req, Nanos now);
  // A switch refused an admission of the driver's: the job loses its tree (releases queued).
  void admission_failed(std::uint32_t job, const std::string& sw, proto::Reason r);
  // A switch answered a resize: done (`r` ok: its next state has the size the job ended with)
  // or refused (the job keeps its size and is not resized again).
  void resize_done(std::uint32_t job, const std::string& sw, proto::Reason r, Nanos now);

  // Lease renewal, or re-claim after a controller restart (`claim` not empty). False if the
  // lease is unknown (and cannot be re-claimed): the job must stop using the tree.
  bool renew(const proto::ctl::LeaseRenew& m, Nanos now);
  // The job is done with its tree: releases queued. False if unknown.
  bool release(std::uint32_t job, std::uint64_t lease);
  // Expires leases (releases queued) and marks silent switches.
  void tick(Nanos now);

  std::vector<SwitchAction>& actions() { return actions_; }
  const std::map<std::string, SwitchRecord>& switches() const { return switches_; }
  const std::map<std::uint32_t, JobRecord>& jobs() const { return jobs_; }
  const ControllerConfig& config() const { return cfg_; }
  bool switch_alive(const SwitchRecord& s, Nanos now) const;
  std::uint32_t pool(const SwitchRecord& s) const;  // slots per lane
  std::uint32_t free_slots(const SwitchRecord& s) const;

  struct Counters {
    std::uint64_t granted = 0, released = 0, expired = 0, adopted = 0, reclaimed = 0;
    std::uint64_t refused[std::size_t(Refusal::count)] = {};
    std::uint64_t switch_refusals = 0, bad_switch_states = 0;
    std::uint64_t resizes = 0, waited = 0;  // resizes sent; grants that waited for slots
  };
  const Counters& counters() const { return c_; }

  // JSON of switches, jobs and counters (`inc controller status`).
  std::string status_json(Nanos now) const;

 private:
  std::optional<std::uint32_t> slots_for(const std::vector<std::string>& tree, std::uint32_t wanted,
                                         Refusal& why_not, std::string& why) const;
  void drop_job(std::uint32_t job);
  std::uint32_t new_job_id();
  // Live re-balancing (rebalance.cpp).
  bool rebalancing() const { return cfg_.rebalance && cfg_.policy == Policy::fair_share; }
  std::uint32_t jobs_on(const std::string& sw) const;  // admitted or waiting
  std::uint32_t waiting_need(const std::string& sw) const;
  bool resizable(const JobRecord& j) const;
  std::uint32_t share(const std::string& sw) const;  // pool / max(jobs on it, fair_jobs)
  void resize_tree(JobRecord& j, std::uint32_t to);  // Resize to every switch of its tree
  // Resizes every running job of switch `sw` towards its fair share (shrinks first; grows
  // only into slots nobody waits for).
  void rebalance(const std::string& sw);
  // Admits the waiting jobs whose slots are free now, in arrival order.
  void admit_waiting();
  void admit_on_tree(JobRecord& rec);
  std::uint64_t arrivals_ = 0;

  ControllerConfig cfg_;
  std::map<std::string, SwitchRecord> switches_;
  std::map<std::uint32_t, JobRecord> jobs_;
  std::vector<SwitchAction> actions_;
  std::mt19937_64 rng_;
  std::uint32_t next_job_;
  Counters c_;
};

}  // namespace inc::control
