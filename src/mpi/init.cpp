// Bootstrap of INC from MPI (MPI_Init, MPI_Init_thread), its end (MPI_Finalize), and the INC
// twin of every intracommunicator made by a call collective over an INC communicator.
//
// Bootstrap: rank 0 of MPI_COMM_WORLD serves an INC rendezvous store on a port the kernel
// picks and broadcasts its address with PMPI_Bcast; every rank then joins INC with its MPI
// rank and size (inc::Options), so no launcher variables are needed. The ranks agree on the
// outcome (PMPI_Allreduce): if INC could not start on some rank, INC is off on all of them
// and every call passes to MPI, the summary saying why.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "api/mpi_support.hpp"
#include "mpi/layer.hpp"

using namespace inc::mpi;

namespace {

int delete_twin(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommTwin*>(value);
  return MPI_SUCCESS;
}

void start_inc(int provided) {
  State& s = state();
  inc::api::MpiLayerSettings settings;
  try {
    settings = inc::api::mpi_layer_settings();
  } catch (const inc::Error& e) {
    std::fprintf(stderr, "inc_mpi: %s\n", e.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  s.summary = settings.summary;
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_twin, &s.keyval, nullptr);
  PMPI_Add_error_class(&s.error_class);
  if (!settings.enabled) {
    s.inactive_reason = "INC_MPI=0";
    return;
  }
  if (provided == MPI_THREAD_MULTIPLE) {
    // INC's calls on one communicator may not overlap from several threads.
    s.inactive_reason = "MPI_THREAD_MULTIPLE (INC takes calls from one thread at a time)";
    return;
  }
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  char addr[256] = {};
  std::string why;
  if (rank == 0) {
    try {
      std::snprintf(addr, sizeof addr, "%s", inc::api::host_ephemeral_store().c_str());
    } catch (const std::exception& e) {
      why = std::string("rank 0 cannot serve the INC store: ") + e.what();
    }
  }
  PMPI_Bcast(addr, sizeof addr, MPI_CHAR, 0, MPI_COMM_WORLD);
  auto twin = std::make_unique<CommTwin>();
  if (addr[0] == '\0') {
    if (why.empty()) why = "rank 0 could not serve the INC store";
  } else {
    inc::Options o;
    o.rank = rank;
    o.world_size = size;
    o.store = addr;
    o.host_store = 0;
    try {
      twin->comm = inc::Communicator::init(o);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  int ok = why.empty() ? 1 : 0, all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (!ok) std::fprintf(stderr, "inc_mpi: rank %d: INC did not start, every call passes to MPI: %s\n", rank, why.c_str());
    s.inactive_reason = ok ? "INC did not start on another rank" : "INC did not start: " + why;
    return;
  }
  PMPI_Comm_set_attr(MPI_COMM_WORLD, s.keyval, twin.release());
  s.active = true;
}

// After a call that made `made` from `parent`, collectively over `parent`: the INC twin of
// `made` (a split of the parent's twin, ranks in the same order), agreed by all its ranks.
void twin_of(MPI_Comm parent, MPI_Comm made) {
  std::string why;
  inc::Communicator* pc = inc_comm(parent, why);
  if (!pc) return;  // the same on every rank of parent: its twin exists on all or none
  int color = -1, key = 0;
  if (made != MPI_COMM_NULL) {
    int inter = 0;
    PMPI_Comm_test_inter(made, &inter);
    if (inter) return;  // never the case for an intracommunicator parent; kept for safety
    // The color: the parent rank of the new communicator's rank 0, equal for its members and
    // different for every other new communicator of this call. The key: the rank in it.
    MPI_Group pg, mg;
    PMPI_Comm_group(parent, &pg);
    PMPI_Comm_group(made, &mg);
    int zero = 0;
    PMPI_Group_translate_ranks(mg, 1, &zero, pg, &color);
    PMPI_Group_free(&pg);
    PMPI_Group_free(&mg);
    PMPI_Comm_rank(made, &key);
  }
  auto twin = std::make_unique<CommTwin>();
  int ok = 1;
  try {
    twin->comm = pc->split(color, key);
    if (made != MPI_COMM_NULL) {
      int size = 0;
      PMPI_Comm_size(made, &size);
      ok = twin->comm.valid() && twin->comm.size() == size && twin->comm.rank() == key;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc_mpi: rank %d: no INC twin for a new communicator, its calls pass to MPI: %s\n",
                 comm_rank(MPI_COMM_WORLD), e.what());
    ok = 0;
  }
  int all = 0;
  during_mpi([&] { return PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, parent); });
  if (all && made != MPI_COMM_NULL) PMPI_Comm_set_attr(made, state().keyval, twin.release());
}

}  // namespace

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) start_inc(MPI_THREAD_SINGLE);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) start_inc(*provided);
  return rc;
}

int MPI_Finalize(void) {
  drain();
  print_summary();
  State& s = state();
  if (s.active) {
    // Every rank is done with INC before any closes its connections.
    PMPI_Barrier(MPI_COMM_WORLD);
    PMPI_Comm_delete_attr(MPI_COMM_WORLD, s.keyval);
    s.active = false;
    s.inactive_reason = "after MPI_Finalize";
  }
  if (s.keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&s.keyval);
  return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  int rc = during_mpi([&] { return PMPI_Comm_dup(comm, out); });
  if (rc == MPI_SUCCESS) twin_of(comm, *out);
  return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* out) {
  int rc = during_mpi([&] { return PMPI_Comm_dup_with_info(comm, info, out); });
  if (rc == MPI_SUCCESS) twin_of(comm, *out);
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  int rc = during_mpi([&] { return PMPI_Comm_split(comm, color, key, out); });
  if (rc == MPI_SUCCESS) twin_of(comm, *out);
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  int rc = during_mpi([&] { return PMPI_Comm_split_type(comm, type, key, info, out); });
  if (rc == MPI_SUCCESS) twin_of(comm, *out);
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* out) {
  int rc = during_mpi([&] { return PMPI_Comm_create(comm, group, out); });
  if (rc == MPI_SUCCESS) twin_of(comm, *out);
  return rc;
}

}  // extern "C"
