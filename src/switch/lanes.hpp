// A multi-core switch daemon: L lanes, each a complete, independent data plane (its own thread,
// UDP socket, share of the slot pool, job table and epochs) bound to ADDR:(PORT + l). Nothing
// is shared between lanes on the per-packet path (docs/SWITCH.md, "Lanes"; PROTOCOL.md D1).
//
// Control: a lane checks the key of an admit/release packet and hands it to the control loop
// (SwitchLanes::run, on the caller's thread), which applies it on every lane through each
// lane's command queue and answers from the lane that received it, admit_ack only once every
// lane admitted. Release after every member left and expiry after idling are decided here too,
// so the lanes' job tables stay identical.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "src/switch/dataplane.hpp"
#include "src/switch/udp.hpp"

namespace inc::sw {

struct LanesConfig {
  SwitchConfig cfg;         // slots = the whole pool (split evenly; the remainder is unused);
                            // parent = the parent's lane 0 (lane l uses parent port + l)
  Endpoint bind;            // lane l binds port + l; port 0: any L consecutive free ports
  std::uint16_t lanes = 1;
  FaultConfig faults;       // lane l uses seed + l
  std::size_t batch = 32;
  UdpOffload offload;       // GSO/GRO on every lane's socket
  // --multicast-groups: every job admitted at run time (by the controller or an admit packet)
  // gets the group group_base + (job mod group_span) at lane 0's port (docs/PROTOCOL.md,
  // "Multicast results"). group_span 0: none, such jobs stay unicast.
  std::uint32_t group_base = 0, group_span = 0;
};

// Lanes the daemon uses by default: the CPUs this process may run on (sched_getaffinity).
std::uint16_t default_lanes();

// Per-lane share of a pool of `slots` slots over `lanes` lanes.
inline std::uint32_t slots_per_lane(std::uint32_t slots, std::uint16_t lanes) {
  return lanes ? slots / lanes : 0;
}

// One snapshot of the whole daemon from the lanes' snapshots (lane order): traffic, drops,
// failures and slots summed; admissions, releases and expiries are the same on every lane and
// taken from lane 0; jobs merged by id (counters and busy copies summed, members joined and
// spec from lane 0, failed if any lane failed); `lanes` lists each lane with its CPU time.
SwitchSnapshot merge_lanes(const std::vector<SwitchSnapshot>& lanes,
                           const std::vector<Endpoint>& endpoints);

class SwitchLanes {
 public:
  // Binds every lane; throws std::runtime_error naming the lane and port that failed.
  explicit SwitchLanes(const LanesConfig& c);
  ~SwitchLanes();
  SwitchLanes(const SwitchLanes&) = delete;
  SwitchLanes& operator=(const SwitchLanes&) = delete;

  std::uint16_t lanes() const { return std::uint16_t(servers_.size()); }
  Endpoint local(std::uint16_t lane = 0) const { return servers_[lane]->local(); }
  UdpSwitchServer& lane(std::uint16_t l) { return *servers_[l]; }
  std::uint32_t slots_per_lane() const { return per_lane_slots_; }

  // Admits a job on every lane before run() (static jobs). Returns the first refusal and the
  // lane that refused; lanes that admitted are rolled back.
  proto::Reason admit_static(const JobSpec& spec, Nanos now, std::uint16_t& refused_lane);

  // While run() runs (from another thread): admits a job on every lane, not dynamic (it stays
  // until released: the controller's lease decides), or releases it. Lanes that admitted are
  // rolled back on a refusal. Used by the controller's agent (src/control/switch_agent.cpp).
  proto::Reason admit_on_every_lane(const JobSpec& spec);
  bool release_on_every_lane(std::uint32_t job);
  // A live resize (SwitchDataPlane::resize on one lane; resize_lanes over several, one boundary
  // and one size for all of them).
  proto::Reason resize_on_every_lane(std::uint32_t job, std::uint32_t slots);
  // Whether a live resize of `job` is still under way on some lane (asked of the lanes now, not
  // of the last snapshot); nullopt if the job is gone.
  std::optional<bool> resizing(std::uint32_t job);

  // Runs the lanes (one thread each) and the control loop on the calling thread until `stop`.
  void run(const std::atomic<bool>& stop);
  // The merged snapshot of every lane (thread-safe; refreshed by the lanes every 100 ms).
  SwitchSnapshot snapshot() const;

 private:
  struct Pending {
    std::uint16_t lane;
    ControlEvent e;
  };
  template <class R, class F>
  std::optional<std::vector<R>> every_lane(F f);
  // The spec with its group's port (lane 0's), and for a job admitted at run time the group of
  // --multicast-groups if it names none.
  JobSpec with_group(JobSpec spec, bool run_time) const;
  void handle(const Pending& p);
  void expire_idle(Nanos now);

  LanesConfig c_;
  std::uint32_t per_lane_slots_ = 0;
  std::vector<std::unique_ptr<UdpSwitchServer>> servers_;
  std::atomic<bool> lanes_stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> pending_;
};

}  // namespace inc::sw
