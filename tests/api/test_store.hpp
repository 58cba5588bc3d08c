// The job's rendezvous store (INC_STORE, as `inc launch` sets it) as seen by a multi-process
// test: lets ranks order their steps by events (a key another rank sets) instead of sleeps.
// Keys live under "test/" so that they never meet the library's own.
#pragma once

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "transport/socket.hpp"
#include "transport/store.hpp"

namespace inc::testing {

inline transport::StoreClient job_store() {
  const char* s = std::getenv("INC_STORE");
  if (!s || !*s) throw std::runtime_error("INC_STORE is not set (run the test under inc launch)");
  auto hp = transport::parse_host_port(s, "INC_STORE");
  return transport::StoreClient(hp.host, hp.port);
}

// Barrier semantics on real processes: no rank leaves a barrier before every rank entered it.
// Round k (k < rounds), rank k % p enters last: it waits until every other rank has counted
// itself in and is about to enter, then gives an early leaver a chance to show itself (a key
// it would set after leaving; a correct barrier never lets one, and the grace just expires),
// and only then counts itself in and enters. After the barrier every rank reads the count:
// anything but p means it left before everybody entered. The verdict does not depend on
// timing for a correct barrier; the grace only makes a broken one fail reliably.
// Returns what went wrong ("" if nothing); `check` runs after each barrier (e.g. the report).
template <class Check>
std::string barrier_violations(Communicator& comm, const std::string& name, int rounds, Check&& check) {
  using namespace std::chrono_literals;
  auto store = job_store();
  const int p = comm.size(), me = comm.rank();
  std::string bad;
  for (int k = 0; k < rounds; ++k) {
    const std::string base = "test/" + name + "/" + std::to_string(k);
    const int late = k % p;
    std::vector<std::string> ready, left;
    for (int r = 0; r < p; ++r)
      if (r != late) {
        ready.push_back(base + "/ready/" + std::to_string(r));
        left.push_back(base + "/left/" + std::to_string(r));
      }
    if (me == late) {
      if (!ready.empty()) store.wait(ready, 120s);  // bounds a hang only
      if (!left.empty()) {
        auto grace = job_store();  // a timed-out client is spent: use a throwaway one
        try {
          grace.wait_any(left, 200ms);
        } catch (const Error&) {
        }
      }
    }
    store.add(base + "/in", 1);
    if (me != late) store.set(base + "/ready/" + std::to_string(me), "1");
    comm.barrier();
    const std::int64_t in = store.add(base + "/in", 0);
    if (in != p)
      bad += "round " + std::to_string(k) + " (rank " + std::to_string(late) + " last): rank " +
             std::to_string(me) + " left the barrier when " + std::to_string(in) + " of " +
             std::to_string(p) + " ranks had entered; ";
    check();
    if (me != late) store.set(base + "/left/" + std::to_string(me), "1");
  }
  return bad;
}

}  // namespace inc::testing
