// Test helper run as a rank by the launcher tests: bootstraps from the environment like a real
// rank (detect_bootstrap + connect_store) and runs a small script of store operations:
//   set K V | add K D | get K | barrier NAME | abort MESSAGE | exit CODE | info
// Each step prints what it saw, so tests can check results from the forwarded output.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/bootstrap.hpp"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  try {
    auto info = inc::api::detect_bootstrap();
    auto conn = inc::api::connect_store(info, 30s);
    auto& store = *conn.client;
    for (int i = 1; i < argc; ++i) {
      std::string op = argv[i];
      auto arg = [&]() -> std::string {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "store_probe: %s needs an argument\n", op.c_str());
          std::exit(64);
        }
        return argv[++i];
      };
      if (op == "set") {
        auto k = arg();
        store.set(k, arg());
      } else if (op == "add") {
        auto k = arg();
        auto v = store.add(k, std::stoll(arg()));
        std::printf("add %s -> %lld\n", k.c_str(), static_cast<long long>(v));
      } else if (op == "get") {
        auto k = arg();
        std::printf("get %s = %s\n", k.c_str(), store.get(k, 30s).c_str());
      } else if (op == "barrier") {
        inc::transport::barrier(store, arg(), info.world_size, info.rank, 30s);
        std::printf("passed barrier\n");
      } else if (op == "abort") {
        inc::transport::publish_abort(store, info.rank, arg());
      } else if (op == "exit") {
        std::fflush(stdout);
        return std::atoi(arg().c_str());
      } else if (op == "info") {
        std::printf("rank %d of %d local %d/%d source %s store %s:%d\n", info.rank, info.world_size,
                    info.local_rank, info.local_size, info.source.c_str(), info.store_host.c_str(),
                    info.store_port);
      } else {
        std::fprintf(stderr, "store_probe: unknown op %s\n", op.c_str());
        return 64;
      }
      std::fflush(stdout);
    }
  } catch (const inc::Error& e) {
    std::fprintf(stderr, "store_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
