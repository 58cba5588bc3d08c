// Who am I and where is the rendezvous store: reads the environment set by the launcher
// (inc launch, mpirun, srun, torchrun), validates it, and connects to (or hosts) the store.
// docs/USAGE.md has the user-facing table of variables.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "transport/socket.hpp"
#include "transport/store.hpp"

namespace inc::api {

using transport::EnvLookup;

struct BootstrapInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;  // -1: the launcher did not say
  int local_size = -1;  // -1: the launcher did not say
  std::string store_host;
  int store_port = 0;       // 0 only for a single-process job (ephemeral, hosted in-process)
  bool host_store = false;  // this process must run the StoreServer (see connect_store)
  // Where rank / world size came from: "inc", "ompi", "pmi", "slurm", "torchrun", or
  // "single" (no launcher variables at all: a one-process job).
  std::string source;
  // Where the store address came from, for messages: "INC_STORE", "MASTER_ADDR/MASTER_PORT",
  // "SLURM_STEP_NODELIST/SLURM_JOB_ID", or "local".
  std::string store_source;
};

// Reads rank, world size, local rank/size and the store address. Order of sources:
//   INC_RANK / INC_WORLD_SIZE  >  OMPI_COMM_WORLD_*  >  PMI_RANK / PMI_SIZE  >
//   torchrun (RANK / WORLD_SIZE with TORCHELASTIC_RUN_ID)  >  SLURM_PROCID / SLURM_NTASKS  >
//   plain RANK / WORLD_SIZE.
// The INC, OpenMPI, PMI and torchrun values must agree when several are set (error naming both
// variables); Slurm's are not compared, because nested launchers (mpirun or torchrun inside an
// allocation, inc launch inside sbatch) inherit stale SLURM_PROCID values.
// Store address: INC_STORE, else MASTER_ADDR + MASTER_PORT (+1 under torchrun's agent store),
// else, for Slurm, the first host of SLURM_STEP_NODELIST and a port derived from the job and step
// ids; a one-process job needs none. Rank 0 hosts the store unless INC_STORE_HOST=0.
// Every bad value throws Error::Kind::config naming the variable and the value.
BootstrapInfo detect_bootstrap(const EnvLookup& env);
BootstrapInfo detect_bootstrap();  // the process environment

// First host of a Slurm host list: "node[01-04,7],gpu5" -> "node01". Error::Kind::config
// naming `var` if malformed.
std::string slurm_first_host(const std::string& nodelist, const std::string& var);
// Port INC derives for a Slurm step: 10000 + (job_id * 16 + step_id % 16) % 20000, i.e. in
// [10000, 30000) below Linux's ephemeral range; jobs on the same node collide only if their
// ids are congruent.
int slurm_store_port(std::uint64_t job_id, std::uint64_t step_id);

// The rendezvous store as seen from this process. `server` is set only in the process that
// hosts it; it must outlive every other rank's use of the store, so the host should pass a
// final barrier before destroying it.
struct StoreConnection {
  std::unique_ptr<transport::StoreServer> server;
  std::unique_ptr<transport::StoreClient> client;
};

// Hosts the store if info.host_store (binding the loopback address it names, else all
// interfaces, on info.store_port; a host that is not this machine is a config error), then
// connects to it, retrying until `timeout` while the host is not up yet.
StoreConnection connect_store(const BootstrapInfo& info, std::chrono::milliseconds timeout);

}  // namespace inc::api
