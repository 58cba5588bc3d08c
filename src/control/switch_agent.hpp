// The switch's side of the controller (`inc switch --controller ADDR --control-key-file F`):
// a thread that registers the switch, heart-beats its state every second (jobs included, so a
// restarted controller rebuilds its state from them) and applies the controller's admissions
// (with each job's data key) and releases on every lane. It reconnects when the connection
// breaks; the data plane never waits for it. docs/CONTROLLER.md.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "src/proto/control.hpp"
#include "src/switch/lanes.hpp"

namespace inc::control {

class SwitchAgent {
 public:
  SwitchAgent(std::string controller, const proto::auth::Key& secret, std::string name, sw::SwitchLanes& lanes,
              const sw::SwitchConfig& cfg, std::FILE* log);
  ~SwitchAgent();
  SwitchAgent(const SwitchAgent&) = delete;
  SwitchAgent& operator=(const SwitchAgent&) = delete;

 private:
  void run();
  void session();
  proto::ctl::SwitchState state();

  std::string controller_;
  proto::auth::Key secret_;
  std::string name_;
  sw::SwitchLanes& lanes_;
  sw::SwitchConfig cfg_;
  std::FILE* log_;
  std::set<std::uint32_t> managed_;  // jobs the controller admitted here
  // Released by the controller but maybe still in the lanes' snapshot (refreshed every
  // 100 ms): not reported, least of all as a static job.
  std::set<std::uint32_t> released_;
  // Live resizes under way (job -> the controller's request): answered once the job moved.
  std::map<std::uint32_t, std::uint64_t> resizing_;
  // Several lanes: a Resize that came while the job's last one was under way (applied after it).
  std::map<std::uint32_t, proto::ctl::Resize> deferred_;
  // A state to send early (after a resize, once the lanes' snapshot, refreshed every 100 ms,
  // has the new size).
  std::optional<std::chrono::steady_clock::time_point> state_due_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace inc::control
