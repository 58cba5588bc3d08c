#include "api/edge_path.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace inc::api {

namespace {

bool parse_token(const std::string& hex, std::uint8_t (&out)[32]) {
  if (hex.size() != 64) return false;
  for (std::size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    for (int k = 0; k < 2; ++k) {
      const char c = hex[2 * i + k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<unsigned>(d);
    }
    out[i] = static_cast<std::uint8_t>(v);
  }
  return true;
}

std::string random_token_hex() {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 8; ++i) s += fmt::format("{:08x}", rd());
  return s;
}

}  // namespace

EdgePath open_edge_path(const transport::EnvLookup& env, const EdgeRequest& req, edge::ClientConfig base,
                        transport::StoreClient& store,
                        const std::function<int(int, const char*)>& agree_min) {
  EdgePath path;
  std::string mode = req.offload;
  std::string source = "Options::offload";
  if (mode.empty()) {
    if (auto v = env("INC_OFFLOAD")) mode = *v, source = "INC_OFFLOAD";
  }
  if (mode.empty() || mode == "host") return path;
  if (mode != "edge")
    throw Error(Error::Kind::config, fmt::format("{}='{}' is not an offload mode (known: host, edge)", source, mode));
  path.requested_by = fmt::format("{}=edge", source);
  base.socket_path = req.socket;
  if (base.socket_path.empty()) {
    if (auto v = env("INC_EDGE"); v && !v->empty()) base.socket_path = *v;
    else base.socket_path = fmt::format("{}/inc-edge.sock", env("TMPDIR").value_or("/tmp"));
  }
  base.handler = req.handler;
  if (auto v = env("INC_EDGE_HANDLER"); v && base.handler.empty()) base.handler = *v;
  std::string token;
  if (auto v = env("INC_EDGE_TOKEN")) {
    token = *v;
    if (!parse_token(token, base.token))
      throw Error(Error::Kind::config, "INC_EDGE_TOKEN must be 64 hexadecimal digits (the job's secret)");
  } else {
    store.set_if_absent(base.prefix + "/token", random_token_hex());
    token = store.get(base.prefix + "/token", base.timeout);
    if (!parse_token(token, base.token)) throw Error(Error::Kind::internal, "the job's edge token in the store is garbled");
  }
  // Connect first (cheap), agree; then attach (the engines mesh the job), agree again.
  std::string why;
  try {
    path.client = std::make_unique<edge::EdgeClient>(base);
  } catch (const Error& e) {
    why = e.what();
  }
  if (agree_min(path.client ? 1 : 0, "agreement on reaching the edge engines") == 1) {
    try {
      path.client->attach();
    } catch (const Error& e) {
      why = e.what();
      path.client.reset();
    }
    if (agree_min(path.client ? 1 : 0, "agreement on attaching to the edge engines") == 1) return path;
  }
  path.client.reset();
  path.reason = why.empty() ? std::string("another rank could not use its edge engine (its stderr says why)")
                            : fmt::format("this rank could not use its edge engine: {}", why);
  if (!why.empty())
    std::fprintf(stderr, "inc: rank %d: %s: collectives run on the hosts: %s\n", base.rank,
                 path.requested_by.c_str(), why.c_str());
  return path;
}

}  // namespace inc::api
