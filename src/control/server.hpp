// `inc controller`: the TCP event loop around the sans-IO Controller (controller.hpp). One
// thread polls the listening socket and every connection (switches, jobs, admins); admissions
// go out to the switches' connections and a job's answer waits for their outcomes, with a
// deadline. /metrics (Prometheus) from an HTTP thread. docs/CONTROLLER.md.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>

#include "src/control/controller.hpp"

namespace inc::control {

struct ServerOptions {
  ControllerConfig core;
  std::string listen = "127.0.0.1:7700";  // port 0: any free port
  proto::auth::Key secret{};
  int metrics_port = -1;                  // -1: none; 0: any free port
  std::string metrics_bind = "127.0.0.1";
  Nanos admit_timeout = 5 * sw::kSecond;  // switches must answer an admission within this
};

// Prometheus text of the controller's state.
std::string render_metrics(const Controller& c, Nanos now);

// Runs until `stop`; `on_ready(port, metrics_port)` once listening. Returns the exit code.
int run_controller(const ServerOptions& o, const std::atomic<bool>& stop, std::FILE* log,
                   const std::function<void(int, int)>& on_ready = {});

}  // namespace inc::control
