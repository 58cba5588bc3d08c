// What the edge engine's tests share (edge_test.cpp, edge_isolation_test.cpp): an engine in a
// thread on a fresh socket path, the store of the engines' meshes, the ranks of a job attached
// at once, and a job's collective run on every rank.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coll/schedule.hpp"
#include "edge/client.hpp"
#include "edge/engine.hpp"
#include "transport/store.hpp"

namespace inc::edge::test {

using namespace std::chrono_literals;

inline transport::StoreServer& store();

inline std::string fresh_path() {
  store();  // started in the parent, before any fork
  static int n = 0;
  return "/tmp/inc-edge-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
}

struct EngineThread {
  std::unique_ptr<EdgeEngine> engine;
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit EngineThread(const std::string& path) {
    EngineConfig c;
    c.socket_path = path;
    engine = std::make_unique<EdgeEngine>(c);
    thread = std::thread([this] { engine->run(stop); });
  }
  ~EngineThread() {
    stop = true;
    thread.join();
  }
};

// A store for the engines' meshes, shared by the tests of this process: every test's job needs
// its own store prefix, or its ranks read an earlier test's mesh addresses. The prefix holds the
// engine's socket path (fresh_path(): one per engine, so one per test) and the job id.
inline transport::StoreServer& store() {
  static transport::StoreServer s("127.0.0.1", 0);
  return s;
}

inline ClientConfig config(const std::string& path, std::uint64_t job, int rank, int world, std::uint8_t token_byte = 7) {
  ClientConfig c;
  c.socket_path = path;
  c.job = job;
  std::memset(c.token, token_byte, sizeof c.token);
  c.rank = rank;
  c.world = world;
  c.timeout = 20s;
  c.mesh_tag = job ^ 0x55;
  c.store = "127.0.0.1:" + std::to_string(store().port());
  c.prefix = "edge-test" + path + "/" + std::to_string(job);
  c.listen_host = "127.0.0.1";
  return c;
}

// All ranks of a job attach at once (the engine meshes their proxies).
inline std::vector<std::unique_ptr<EdgeClient>> attach_job(const std::string& path, std::uint64_t job, int world) {
  std::vector<std::unique_ptr<EdgeClient>> cs;
  for (int r = 0; r < world; ++r) cs.push_back(std::make_unique<EdgeClient>(config(path, job, r, world)));
  std::vector<std::future<void>> f;
  for (auto& c : cs) f.push_back(std::async(std::launch::async, [&c] { c->attach(); }));
  for (auto& x : f) x.get();
  for (int r = 0; r < world; ++r) {
    std::vector<int> members;
    for (int m = 0; m < world; ++m) members.push_back(m);
    cs[r]->add_comm(0, members);
  }
  return cs;
}

inline coll::CollectiveParams allreduce_params(int rank, int world, std::uint64_t count) {
  coll::CollectiveParams p;
  p.coll = Collective::allreduce;
  p.algo = coll::Algorithm::ring;
  p.nranks = world;
  p.rank = rank;
  p.count = count;
  p.dtype = DataType::i32;
  p.op = ReduceOp::sum;
  return p;
}

template <class F>
void wait_until(F&& f) {
  for (int i = 0; i < 1000 && !f(); ++i) std::this_thread::sleep_for(10ms);
}

// Every rank of a job posts `p` (its own rank filled in) with its input and waits: the outputs.
inline std::vector<std::vector<std::byte>> run_job(std::vector<std::unique_ptr<EdgeClient>>& job, coll::CollectiveParams p,
                                                   const std::vector<std::vector<std::byte>>& in,
                                                   std::vector<Completion>* results = nullptr) {
  std::vector<std::vector<std::byte>> out(job.size(), std::vector<std::byte>(coll::output_bytes(p), std::byte{0xA5}));
  std::vector<std::shared_ptr<EdgeOp>> ops;
  for (std::size_t r = 0; r < job.size(); ++r) {
    p.rank = static_cast<int>(r);
    ops.push_back(job[r]->start(0, p, in[r].data(), out[r].data()));
  }
  for (std::size_t r = 0; r < job.size(); ++r) {
    job[r]->wait(*ops[r]);
    if (results) results->push_back(ops[r]->result);
  }
  return out;
}

}  // namespace inc::edge::test
