#include "api/bootstrap.hpp"

#include <fmt/format.h>

#include <cctype>
#include <optional>
#include <vector>

#include "api/env_number.hpp"

namespace inc::api {

namespace {

constexpr long long kMaxWorldSize = 1 << 20;

[[noreturn]] void config_error(std::string msg) {
  throw Error(Error::Kind::config, std::move(msg));
}

// An empty value counts as unset (`export INC_STORE=` is a common way to clear a variable).
std::optional<std::string> get(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

// A whole number in [min, max] (0 <= min): digits only, as every integer variable (env_number.hpp).
long long parse_int(const std::string& name, const std::string& value, long long min, long long max,
                    std::string_view expected) {
  auto v = parse_uint(value, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max));
  if (!v) config_error(fmt::format("{}='{}' is not {}", name, value, expected));
  return static_cast<long long>(*v);
}

int parse_rank(const std::string& name, const std::string& value) {
  return static_cast<int>(parse_int(name, value, 0, kMaxWorldSize - 1, "a rank (an integer >= 0)"));
}
int parse_size(const std::string& name, const std::string& value) {
  return static_cast<int>(parse_int(name, value, 1, kMaxWorldSize,
                                    fmt::format("a size (an integer in 1..{})", kMaxWorldSize)));
}

struct SourceVars {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // nullptr: derived (Slurm)
};

constexpr SourceVars kInc{"inc", "INC_RANK", "INC_WORLD_SIZE", "INC_LOCAL_RANK", "INC_LOCAL_SIZE"};
constexpr SourceVars kOmpi{"ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
// PMI as set by MPICH / Intel MPI hydra and srun --mpi=pmi2; hydra adds the local pair.
constexpr SourceVars kPmi{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
constexpr SourceVars kSlurm{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr};
constexpr SourceVars kTorch{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};

struct Found {
  const SourceVars* vars;
  std::string rank_var, size_var;  // the variables actually used (for messages)
  int rank = 0, size = 0;
  int local_rank = -1, local_size = -1;
};

// Slurm's task counts per node, e.g. "2(x3),1" -> {2, 2, 2, 1}.
std::vector<int> parse_tasks_per_node(const std::string& name, const std::string& v) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= v.size()) {
    auto comma = v.find(',', pos);
    std::string item = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int count = 0;
    long long repeat = 1;
    auto paren = item.find("(x");
    try {
      if (paren != std::string::npos) {
        if (item.back() != ')') throw Error(Error::Kind::config, "");
        count = parse_size(name, item.substr(0, paren));
        repeat =
            parse_int(name, item.substr(paren + 2, item.size() - paren - 3), 1, kMaxWorldSize, "");
      } else {
        count = parse_size(name, item);
      }
    } catch (const Error&) {
      config_error(fmt::format("{}='{}' is not a Slurm task count list (e.g. '2(x3),1')", name, v));
    }
    if (static_cast<long long>(out.size()) + repeat > kMaxWorldSize)
      config_error(fmt::format("{}='{}' lists more than {} nodes", name, v, kMaxWorldSize));
    out.insert(out.end(), static_cast<std::size_t>(repeat), count);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::optional<Found> read_source(const EnvLookup& env, const SourceVars& s) {
  std::string rank_var = s.rank, size_var = s.size;
  auto rank = get(env, rank_var);
  auto size = get(env, size_var);
  if (&s == &kSlurm && !size) {
    size = get(env, "SLURM_NPROCS");  // older Slurm
    size_var = size ? "SLURM_NPROCS" : "SLURM_NTASKS (or SLURM_NPROCS)";
  }
  if (!rank && !size) return std::nullopt;
  if (!rank)
    config_error(fmt::format("{}={} is set but {} is not; the {} launcher sets both", size_var,
                             *size, rank_var, s.source));
  if (!size)
    config_error(fmt::format("{}={} is set but {} is not; the {} launcher sets both", rank_var,
                             *rank, size_var, s.source));
  Found f{&s, rank_var, size_var};
  f.rank = parse_rank(rank_var, *rank);
  f.size = parse_size(size_var, *size);
  if (f.rank >= f.size)
    config_error(fmt::format("{}={} is not below {}={}", rank_var, f.rank, size_var, f.size));

  if (auto lr = get(env, s.local_rank)) f.local_rank = parse_rank(s.local_rank, *lr);
  if (s.local_size) {
    if (auto ls = get(env, s.local_size)) f.local_size = parse_size(s.local_size, *ls);
  } else {
    // Slurm: tasks on this node = entry SLURM_NODEID of the step's tasks-per-node list.
    const char* tpn_var = "SLURM_STEP_TASKS_PER_NODE";
    auto tpn = get(env, tpn_var);
    if (!tpn) tpn = get(env, tpn_var = "SLURM_TASKS_PER_NODE");
    auto node = get(env, "SLURM_NODEID");
    if (tpn && node) {
      auto counts = parse_tasks_per_node(tpn_var, *tpn);
      int node_id = parse_rank("SLURM_NODEID", *node);
      if (node_id >= static_cast<int>(counts.size()))
        config_error(fmt::format("SLURM_NODEID={} but {}='{}' lists {} nodes", node_id, tpn_var,
                                 *tpn, counts.size()));
      f.local_size = counts[static_cast<std::size_t>(node_id)];
    }
  }
  const char* ls_name = s.local_size ? s.local_size : "the Slurm tasks on this node";
  if (f.local_size > f.size)
    config_error(fmt::format("{}={} exceeds {}={}", ls_name, f.local_size, size_var, f.size));
  if (f.local_rank >= 0 && f.local_size > 0 && f.local_rank >= f.local_size)
    config_error(
        fmt::format("{}={} is not below {}={}", s.local_rank, f.local_rank, ls_name, f.local_size));
  if (f.local_rank >= f.size)
    config_error(
        fmt::format("{}={} is not below {}={}", s.local_rank, f.local_rank, size_var, f.size));
  return f;
}

// 1/true/yes/on or 0/false/no/off.
bool parse_bool(const std::string& name, const std::string& v) {
  std::string l;
  for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  config_error(fmt::format("{}='{}' is not a boolean (use 1 or 0)", name, v));
}

void check_host(const std::string& name, const std::string& host) {
  bool ok = host.size() <= 253;
  for (char c : host)
    ok = ok && c > ' ' && static_cast<unsigned char>(c) < 0x7f && c != '/' && c != '[' && c != ']';
  if (!ok) config_error(fmt::format("{}='{}' is not a host name or address", name, host));
}

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

std::string slurm_first_host(const std::string& nodelist, const std::string& var) {
  auto bad = [&](std::string_view why) {
    return Error(Error::Kind::config,
                 fmt::format("{}='{}' is not a Slurm host list ({})", var, nodelist, why));
  };
  std::string host;
  std::size_t i = 0;
  // The first entry ends at a comma outside brackets; each bracket group contributes the first
  // value of its first range ("[01-04,7]" -> "01", zero padding kept).
  while (i < nodelist.size() && nodelist[i] != ',') {
    char c = nodelist[i];
    if (c == '[') {
      auto close = nodelist.find(']', i);
      if (close == std::string::npos) throw bad("unclosed '['");
      std::string group = nodelist.substr(i + 1, close - i - 1);
      std::size_t end = group.find_first_of(",-");
      std::string first = group.substr(0, end);
      if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
        throw bad("bracket range does not start with a number");
      host += first;
      i = close + 1;
    } else if (c == ']') {
      throw bad("unbalanced ']'");
    } else {
      host += c;
      ++i;
    }
  }
  if (host.empty()) throw bad("empty first host");
  check_host(var, host);
  return host;
}

int slurm_store_port(std::uint64_t job_id, std::uint64_t step_id) {
  return static_cast<int>(10000 + (job_id * 16 + step_id % 16) % 20000);
}

BootstrapInfo detect_bootstrap() { return detect_bootstrap(transport::process_env()); }

BootstrapInfo detect_bootstrap(const EnvLookup& env) {
  // Read (and validate) every per-process source that is present. Slurm is read only when
  // nothing more specific is: in an sbatch script its batch-step values (SLURM_PROCID=0, maybe
  // no SLURM_NTASKS) reach every nested launcher's processes and must not get in the way.
  auto inc = read_source(env, kInc);
  auto ompi = read_source(env, kOmpi);
  auto pmi = read_source(env, kPmi);
  auto torch = read_source(env, kTorch);
  bool torch_elastic = get(env, "TORCHELASTIC_RUN_ID") || get(env, "GROUP_RANK");
  std::optional<Found> slurm;

  const Found* chosen = nullptr;
  for (const auto* f : {&inc, &ompi, &pmi}) {
    if (f->has_value()) {
      chosen = &**f;
      break;
    }
  }
  if (!chosen && torch && torch_elastic) chosen = &*torch;
  if (!chosen) {
    slurm = read_source(env, kSlurm);
    if (slurm) chosen = &*slurm;
  }
  if (!chosen && torch) chosen = &*torch;

  // Launchers that set per-process variables must agree with each other.
  if (chosen && chosen->vars != &kSlurm) {
    for (const auto* f : {&inc, &ompi, &pmi, &torch}) {
      if (!f->has_value() || &**f == chosen) continue;
      const Found& o = **f;
      if (o.rank != chosen->rank || o.size != chosen->size)
        config_error(fmt::format(
            "conflicting launcher variables: {}={} {}={} (used) but {}={} {}={}; unset the "
            "stale ones or make them agree",
            chosen->rank_var, chosen->rank, chosen->size_var, chosen->size, o.rank_var, o.rank,
            o.size_var, o.size));
    }
  }

  BootstrapInfo info;
  if (chosen) {
    info.rank = chosen->rank;
    info.world_size = chosen->size;
    info.local_rank = chosen->local_rank;
    info.local_size = chosen->local_size;
    info.source = chosen->vars->source;
  } else {
    info.source = "single";
    info.local_rank = 0;
    info.local_size = 1;
  }

  // Who hosts the store: rank 0 (the torch env:// convention) unless INC_STORE_HOST=0, which
  // inc launch sets because it runs the store itself.
  bool rank0_hosts = true;
  if (auto h = get(env, "INC_STORE_HOST")) rank0_hosts = parse_bool("INC_STORE_HOST", *h);

  auto master_addr = get(env, "MASTER_ADDR");
  auto master_port = get(env, "MASTER_PORT");
  if (master_addr.has_value() != master_port.has_value() && !get(env, "INC_STORE"))
    config_error(master_addr
                     ? fmt::format("MASTER_ADDR={} is set but MASTER_PORT is not", *master_addr)
                     : fmt::format("MASTER_PORT={} is set but MASTER_ADDR is not", *master_port));

  if (auto store = get(env, "INC_STORE")) {
    auto hp = transport::parse_host_port(*store, "INC_STORE");
    info.store_host = hp.host;
    info.store_port = hp.port;
    info.store_source = "INC_STORE";
  } else if (master_addr && master_port) {
    check_host("MASTER_ADDR", *master_addr);
    info.store_host = *master_addr;
    info.store_port = transport::parse_port(*master_port, "MASTER_PORT");
    info.store_source = "MASTER_ADDR/MASTER_PORT";
    // torchrun's agent already serves its own TCPStore on MASTER_PORT.
    auto agent = get(env, "TORCHELASTIC_USE_AGENT_STORE");
    if (info.source == "torchrun" && agent && parse_bool("TORCHELASTIC_USE_AGENT_STORE", *agent)) {
      if (info.store_port == 65535)
        config_error(
            "MASTER_PORT=65535: under torchrun INC uses MASTER_PORT+1 (torch's store "
            "holds MASTER_PORT); set INC_STORE=host:port instead");
      info.store_port += 1;
      info.store_source = "MASTER_ADDR/MASTER_PORT+1";
    }
  } else if (info.source == "slurm") {
    const char* list_var = "SLURM_STEP_NODELIST";
    auto list = get(env, list_var);
    if (!list) list = get(env, list_var = "SLURM_NODELIST");
    auto job = get(env, "SLURM_JOB_ID");
    const char* step_var = "SLURM_STEP_ID";
    auto step = get(env, step_var);
    if (!step) step = get(env, step_var = "SLURM_STEPID");
    if (!list || !job || !step)
      config_error(fmt::format(
          "rank and world size come from Slurm but there is no store address: set "
          "INC_STORE=host:port (rank 0's node) or MASTER_ADDR and MASTER_PORT, or run under "
          "srun so that SLURM_STEP_NODELIST, SLURM_JOB_ID and SLURM_STEP_ID are set (missing: "
          "{}{}{})",
          list ? "" : "SLURM_STEP_NODELIST ", job ? "" : "SLURM_JOB_ID ",
          step ? "" : "SLURM_STEP_ID"));
    info.store_host = slurm_first_host(*list, list_var);
    auto job_id = static_cast<std::uint64_t>(
        parse_int("SLURM_JOB_ID", *job, 0, (1LL << 62), "a job id (an integer >= 0)"));
    auto step_id = static_cast<std::uint64_t>(
        parse_int(step_var, *step, 0, (1LL << 62), "a step id (an integer >= 0)"));
    info.store_port = slurm_store_port(job_id, step_id);
    info.store_source = fmt::format("{}/SLURM_JOB_ID", list_var);
    // Block distribution puts rank 0 on the first node; if this rank 0 is elsewhere the
    // others could never reach it.
    if (info.rank == 0 && rank0_hosts) {
      if (auto me = get(env, "SLURMD_NODENAME"); me && *me != info.store_host)
        config_error(fmt::format(
            "rank 0 runs on {} (SLURMD_NODENAME) but the store address derived from {}='{}' "
            "is {}; set INC_STORE=$(hostname):port on rank 0's node or MASTER_ADDR/MASTER_PORT",
            *me, list_var, *list, info.store_host));
    }
  } else if (info.world_size == 1) {
    info.store_host = "127.0.0.1";
    info.store_port = 0;
    info.store_source = "local";
    info.host_store = true;
    return info;
  } else {
    config_error(fmt::format(
        "rank and world size come from {} ({}={}, {}={}) but no rendezvous store address is "
        "set: set INC_STORE=host:port to an address of rank 0's node (rank 0 hosts the store), "
        "e.g. mpirun -x INC_STORE=$(hostname):29500, or set MASTER_ADDR and MASTER_PORT",
        info.source, chosen->rank_var, info.rank, chosen->size_var, info.world_size));
  }
  info.host_store = rank0_hosts && info.rank == 0;
  return info;
}

StoreConnection connect_store(const BootstrapInfo& info, std::chrono::milliseconds timeout) {
  StoreConnection conn;
  transport::StoreClient::Options opts;
  opts.connect_timeout = timeout;
  std::string connect_host = info.store_host;
  int port = info.store_port;
  if (info.host_store) {
    std::string bind_host;
    if (is_loopback_name(info.store_host)) {
      bind_host = info.store_host;
    } else {
      if (!transport::is_local_host(info.store_host))
        config_error(fmt::format(
            "rank {} should host the rendezvous store at {} (from {}), but '{}' is not an "
            "address of this machine; point the store at rank 0's node, or set "
            "INC_STORE_HOST=0 if another process hosts it",
            info.rank, transport::format_host_port(info.store_host, info.store_port),
            info.store_source, info.store_host));
      bind_host = info.store_host.find(':') != std::string::npos ? "::" : "0.0.0.0";
    }
    try {
      conn.server = std::make_unique<transport::StoreServer>(bind_host, info.store_port);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  fmt::format("rank {} cannot host the rendezvous store on port {} (from {}): {}",
                              info.rank, info.store_port, info.store_source, e.what()));
    }
    port = conn.server->port();
    // Talk to the server over loopback when it listens on every interface.
    if (bind_host == "0.0.0.0") connect_host = "127.0.0.1";
    if (bind_host == "::") connect_host = "::1";
  }
  conn.client = std::make_unique<transport::StoreClient>(connect_host, port, opts);
  return conn;
}

}  // namespace inc::api
