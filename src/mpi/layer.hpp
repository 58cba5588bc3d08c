// The PMPI library's shared state (see docs/MPI.md): the INC twin of each MPI communicator,
// the mapping of MPI datatypes and ops to INC's, the counters behind the summary, INC errors
// as MPI error codes, and the table of non-blocking calls running on INC.
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "inc/inc.hpp"

namespace inc::mpi {

// Set up once in MPI_Init / MPI_Init_thread (init.cpp).
struct State {
  bool active = false;          // INC runs the calls it can
  std::string inactive_reason;  // why not, when !active (every call then passes to MPI)
  int keyval = MPI_KEYVAL_INVALID;  // attribute of each MPI communicator: its CommTwin
  int error_class = -1;             // class of the INC error codes
  int summary = 0;                  // INC_MPI_SUMMARY: 0, 1 (rank 0), 2 (every rank)
};
State& state();

// The INC communicator cached on an MPI communicator (attribute `State::keyval`); freed by
// the attribute's delete callback when MPI frees the communicator.
struct CommTwin {
  Communicator comm;
};

// What a call needs to run on INC: the communicator, how to start it, what to do after it
// completed (MPI_IN_PLACE layouts INC does not share are copied into place there).
struct Launch {
  Communicator* comm = nullptr;
  std::function<Request(Communicator&)> start;
  std::function<void()> finish;
};

// The INC communicator of `comm`, or nullptr with the reason the call passes to MPI.
Communicator* inc_comm(MPI_Comm comm, std::string& reason);
// INC's element type and op for a reduction, or the reason the call passes to MPI.
std::optional<DataType> reduce_type(MPI_Datatype t, std::string& reason);
std::optional<ReduceOp> reduce_op(MPI_Op op, std::string& reason);
// Bytes of `count` elements of `t` if they can move as plain bytes (a predefined datatype
// with no gaps: size == extent, lower bound 0), else nullopt with the reason.
std::optional<std::size_t> movable_bytes(MPI_Datatype t, int count, std::string& reason);
int comm_rank(MPI_Comm comm);
// Rank 0 (or every rank, INC_MPI_SUMMARY=all) prints the summary to stderr.
void print_summary();

// Counters for the summary printed at MPI_Finalize (INC_MPI_SUMMARY).
void count_passed(const char* call, const std::string& reason);
void count_on_inc(const char* call, const Report& r);

// An INC error as a new MPI error code (class "INC", the message as its string), raised on
// `comm`'s error handler; returns the code (what the call returns if the handler returns).
int error_code(const char* call, const Error& e);
int raise_on(MPI_Comm comm, int code);

// Running calls on INC. Blocking: starts and drives the call to completion while poking the
// MPI progress engine (so point-to-point transfers the peers wait for still advance).
// Non-blocking: returns an MPI generalized request the Wait/Test family completes.
int run_blocking(const char* call, MPI_Comm comm, Launch& l);
int run_nonblocking(const char* call, MPI_Comm comm, Launch& l, MPI_Request* out);
// True while a non-blocking call started on INC has not completed: blocking MPI calls that
// pass to the real MPI then wait for their own request while driving INC.
bool inc_in_flight();
// Advances every in-flight INC call; completes the generalized requests of those finished.
void progress();
// Waits for a real MPI request while driving INC (MPI_Wait of this library).
int wait_request(MPI_Request* r, MPI_Status* s);
// For MPI_Finalize: completes every INC call still in flight (also requests already freed),
// and ends the driver thread.
void drain();

// A blocking collective that passes to MPI, counted; while INC calls are in flight a driver
// thread advances them meanwhile (a peer may wait in INC for this rank; requests.cpp).
int pass_blocking(const char* call, const std::string& reason, const std::function<int()>& blocking);
// The same for any blocking MPI collective (MPI_Comm_split, MPI_Reduce, MPI_Gather, ...).
int during_mpi(const std::function<int()>& blocking);

}  // namespace inc::mpi
