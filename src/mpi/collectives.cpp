// The collectives INC runs, blocking and not: each has one plan (can INC do exactly what MPI
// specifies for these arguments? if so, how, with which MPI_IN_PLACE layout) used by both forms.
// Anything else passes to MPI (PMPI_*) with its reason counted.
#include <cstring>

#include "mpi/layer.hpp"

using namespace inc::mpi;
using inc::Communicator;
using inc::DataType;
using inc::Request;

namespace {

std::size_t bytes(DataType t, int count) { return inc::size_of(t) * static_cast<std::size_t>(count); }

// Each plan returns "" and fills `l` when INC can run the call, else the reason it passes.
std::string plan_allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                           MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  auto t = reduce_type(dt, why);
  if (!t) return why;
  auto o = reduce_op(op, why);
  if (!o) return why;
  if (count < 0) return "negative count (MPI reports the error)";
  // MPI_IN_PLACE: the input is recvbuf, as INC's in-place form (send == recv).
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  l.start = [=](Communicator& c) { return c.iallreduce(send, recvbuf, static_cast<std::size_t>(count), *t, *o); };
  return {};
}

std::string plan_reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype dt,
                                      MPI_Op op, MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  auto t = reduce_type(dt, why);
  if (!t) return why;
  auto o = reduce_op(op, why);
  if (!o) return why;
  if (recvcount < 0) return "negative count (MPI reports the error)";
  const auto n = static_cast<std::size_t>(recvcount);
  if (sendbuf != MPI_IN_PLACE) {
    l.start = [=](Communicator& c) { return c.ireduce_scatter(sendbuf, recvbuf, n, *t, *o); };
    return {};
  }
  // MPI_IN_PLACE: the input is recvbuf (size x recvcount), the result its first block. INC's
  // in-place form leaves the result in this rank's block: run that, then move the block.
  const int rank = comm_rank(comm);
  auto* base = static_cast<char*>(recvbuf);
  char* mine = base + bytes(*t, recvcount) * static_cast<std::size_t>(rank);
  l.start = [=](Communicator& c) { return c.ireduce_scatter(base, mine, n, *t, *o); };
  if (rank != 0 && n > 0) l.finish = [=] { std::memcpy(base, mine, bytes(*t, recvcount)); };
  return {};
}

std::string plan_reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype dt,
                                MPI_Op op, MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  const int p = l.comm->size();
  for (int i = 1; i < p; ++i)
    if (recvcounts[i] != recvcounts[0]) return "unequal recvcounts (INC's reduce_scatter has equal blocks)";
  return plan_reduce_scatter_block(sendbuf, recvbuf, recvcounts[0], dt, op, comm, l);
}

std::string plan_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  auto rb = movable_bytes(recvtype, recvcount, why);
  if (!rb) return why;
  const int rank = comm_rank(comm);
  auto* base = static_cast<char*>(recvbuf);
  // MPI_IN_PLACE: this rank's block is already at recvbuf + rank x block, INC's in-place form.
  const void* send = base + *rb * static_cast<std::size_t>(rank);
  if (sendbuf != MPI_IN_PLACE) {
    auto sb = movable_bytes(sendtype, sendcount, why);
    if (!sb) return why;
    if (*sb != *rb) return "send and receive type signatures differ (MPI reports the error)";
    send = sendbuf;
  }
  const std::size_t n = *rb;
  l.start = [=](Communicator& c) { return c.iallgather(send, base, n, DataType::u8); };
  return {};
}

std::string plan_bcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  auto b = movable_bytes(dt, count, why);
  if (!b) return why;
  if (root < 0 || root >= l.comm->size()) return "invalid root (MPI reports the error)";
  const std::size_t n = *b;
  l.start = [=](Communicator& c) { return c.ibroadcast(buf, buf, n, DataType::u8, root); };
  return {};
}

std::string plan_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  auto rb = movable_bytes(recvtype, recvcount, why);
  if (!rb) return why;
  // MPI_IN_PLACE: the data to send is recvbuf, replaced by what arrives: INC's in-place form.
  const void* send = recvbuf;
  if (sendbuf != MPI_IN_PLACE) {
    auto sb = movable_bytes(sendtype, sendcount, why);
    if (!sb) return why;
    if (*sb != *rb) return "send and receive type signatures differ (MPI reports the error)";
    send = sendbuf;
  }
  const std::size_t n = *rb;
  l.start = [=](Communicator& c) { return c.ialltoall(send, recvbuf, n, DataType::u8); };
  return {};
}

std::string plan_barrier(MPI_Comm comm, Launch& l) {
  std::string why;
  if (!(l.comm = inc_comm(comm, why))) return why;
  l.start = [](Communicator& c) { return c.ibarrier(); };
  return {};
}

}  // namespace

// Each MPI call: plan; on INC (blocking or not), else the real MPI with the reason counted.
#define INC_MPI_BLOCKING(NAME, PLAN, PASS)                                               \
  {                                                                                      \
    Launch l;                                                                            \
    std::string why = PLAN;                                                              \
    if (!why.empty()) return pass_blocking(NAME, why, [&] { return PASS; });             \
    return run_blocking(NAME, comm, l);                                                  \
  }
#define INC_MPI_NONBLOCKING(NAME, PLAN, IPASS)                                           \
  {                                                                                      \
    Launch l;                                                                            \
    std::string why = PLAN;                                                              \
    if (!why.empty()) {                                                                  \
      count_passed(NAME, why);                                                           \
      MPI_Request* r_ = request;                                                         \
      return IPASS;                                                                      \
    }                                                                                    \
    return run_nonblocking(NAME, comm, l, request);                                      \
  }

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Allreduce", plan_allreduce(sendbuf, recvbuf, count, dt, op, comm, l),
                     PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm))

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Iallreduce", plan_allreduce(sendbuf, recvbuf, count, dt, op, comm, l),
                        PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, r_))

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype dt, MPI_Op op,
                             MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Reduce_scatter_block",
                     plan_reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, l),
                     PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm))

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype dt, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Ireduce_scatter_block",
                        plan_reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, l),
                        PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, r_))

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Reduce_scatter", plan_reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, l),
                     PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm))

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype dt, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Ireduce_scatter", plan_reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, l),
                        PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, r_))

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Allgather",
                     plan_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, l),
                     PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Iallgather",
                        plan_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, l),
                        PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r_))

int MPI_Bcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Bcast", plan_bcast(buf, count, dt, root, comm, l),
                     PMPI_Bcast(buf, count, dt, root, comm))

int MPI_Ibcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Ibcast", plan_bcast(buf, count, dt, root, comm, l),
                        PMPI_Ibcast(buf, count, dt, root, comm, r_))

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Alltoall",
                     plan_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, l),
                     PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Ialltoall",
                        plan_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, l),
                        PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r_))

int MPI_Barrier(MPI_Comm comm)
    INC_MPI_BLOCKING("MPI_Barrier", plan_barrier(comm, l), PMPI_Barrier(comm))

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request)
    INC_MPI_NONBLOCKING("MPI_Ibarrier", plan_barrier(comm, l), PMPI_Ibarrier(comm, r_))

}  // extern "C"

// Blocking collectives INC does not run (MPI_Reduce to a root is not built on INC): to MPI,
// counted, with INC driven meanwhile when INC calls are in flight.
extern "C" {

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
  return pass_blocking("MPI_Reduce", "a reduction to one root (not built on INC)",
                       [&] { return PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm); });
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return during_mpi([&] { return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm); });
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return during_mpi([&] { return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm); });
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return during_mpi(
      [&] { return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm); });
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  return during_mpi([&] { return PMPI_Scan(sendbuf, recvbuf, count, dt, op, comm); });
}

}  // extern "C"
