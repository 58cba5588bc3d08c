// INC_OFFLOAD=edge: the library's side of the Edge-INC engine (src/edge). Reads the request
// (Options, else the environment), connects to this host's engine and attaches the rank; all
// ranks agree, so that either every rank of the job posts to its engine or none does.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "edge/client.hpp"
#include "transport/socket.hpp"
#include "transport/store.hpp"

namespace inc::api {

struct EdgePath {
  std::unique_ptr<edge::EdgeClient> client;  // null: the host path runs
  std::string requested_by;  // "INC_OFFLOAD=edge" or "Options::offload=edge"; empty: not asked
  std::string reason;        // why the host path runs although asked
};

struct EdgeRequest {
  std::string offload;  // Options::offload
  std::string socket;   // Options::edge_socket
  std::string handler;  // Options::edge_handler
};

// `base` carries rank, world, job, timeout, store address, listen host and mesh prefix; the
// token comes from INC_EDGE_TOKEN (64 hex digits, set by `inc launch --edge`) or, when unset,
// one drawn by the first rank into the job's store. `agree_min` is a host allreduce (min).
// Throws inc::Error(config) for a bad INC_OFFLOAD / INC_EDGE_TOKEN value.
EdgePath open_edge_path(const transport::EnvLookup& env, const EdgeRequest& req, edge::ClientConfig base,
                        transport::StoreClient& store,
                        const std::function<int(int, const char*)>& agree_min);

}  // namespace inc::api
