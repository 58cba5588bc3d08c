// Settings and store of the PMPI library (see mpi_support.hpp).
#include "api/mpi_support.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "inc/types.hpp"
#include "transport/socket.hpp"
#include "transport/store.hpp"

namespace inc::api {

MpiLayerSettings mpi_layer_settings() {
  auto env = transport::process_env();
  MpiLayerSettings s;
  if (auto v = env("INC_MPI")) {
    if (*v == "0") s.enabled = false;
    else if (*v != "1" && !v->empty())
      throw Error(Error::Kind::config, fmt::format("INC_MPI='{}' must be 0 or 1", *v));
  }
  if (auto v = env("INC_MPI_SUMMARY")) {
    if (*v == "1") s.summary = 1;
    else if (*v == "all") s.summary = 2;
    else if (*v != "0" && !v->empty())
      throw Error(Error::Kind::config, fmt::format("INC_MPI_SUMMARY='{}' must be 0, 1 or all", *v));
  }
  return s;
}

namespace {
// The first IPv4 address `name` resolves to, or "" if none.
std::string resolve_ipv4(const char* name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return {};
  char buf[INET_ADDRSTRLEN] = {};
  auto* sin = reinterpret_cast<sockaddr_in*>(res->ai_addr);
  std::string out = inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) ? buf : "";
  freeaddrinfo(res);
  return out;
}
}  // namespace

std::string host_ephemeral_store() {
  // Kept until the process exits: every rank may use the store until its own finalize.
  static std::mutex mu;
  static std::unique_ptr<transport::StoreServer> server;
  std::lock_guard lk(mu);
  if (!server) server = std::make_unique<transport::StoreServer>("0.0.0.0", 0);
  auto env = transport::process_env();
  std::string host;
  if (env("INC_HOST") || env("INC_IFACE")) {
    host = transport::local_address_for_peers(env);
  } else {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0) host = resolve_ipv4(name);
    if (host.empty()) host = "127.0.0.1";
  }
  return transport::format_host_port(host, server->port());
}

}  // namespace inc::api
