// The C ABI (include/inc/inc.h): a thin layer that turns inc::Error into codes plus a
// thread-local message.
#include "inc/inc.h"

#include <cstring>
#include <exception>
#include <string>

#include "inc/inc.hpp"

struct inc_comm_s {
  inc::Communicator comm;
};
struct inc_request_s {
  inc::Request req;
};

namespace {

thread_local std::string g_last_error;

inc_result_t code_of(inc::Error::Kind k) {
  switch (k) {
    case inc::Error::Kind::invalid_argument: return INC_ERR_INVALID_ARGUMENT;
    case inc::Error::Kind::config: return INC_ERR_CONFIG;
    case inc::Error::Kind::mismatch: return INC_ERR_MISMATCH;
    case inc::Error::Kind::timeout: return INC_ERR_TIMEOUT;
    case inc::Error::Kind::peer_failure: return INC_ERR_PEER_FAILURE;
    case inc::Error::Kind::network: return INC_ERR_NETWORK;
    case inc::Error::Kind::internal: return INC_ERR_INTERNAL;
  }
  return INC_ERR_INTERNAL;
}

template <class F>
inc_result_t guarded(F&& f) {
  try {
    f();
    return INC_SUCCESS;
  } catch (const inc::Error& e) {
    g_last_error = e.what();
    return code_of(e.kind());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return INC_ERR_INTERNAL;
  }
}

inc_result_t null_arg(const char* what) {
  g_last_error = std::string(what) + " is null";
  return INC_ERR_INVALID_ARGUMENT;
}

inc::Communicator& comm_of(inc_comm_t c) {
  if (!c) throw inc::Error(inc::Error::Kind::invalid_argument, "communicator handle is null");
  return c->comm;
}

}  // namespace

extern "C" {

inc_result_t inc_init(inc_comm_t* comm) {
  if (!comm) return null_arg("inc_init: comm");
  return guarded([&] { *comm = new inc_comm_s{inc::Communicator::init()}; });
}

inc_result_t inc_comm_free(inc_comm_t comm) {
  delete comm;
  return INC_SUCCESS;
}

inc_result_t inc_comm_rank(inc_comm_t comm, int* rank) {
  if (!rank) return null_arg("inc_comm_rank: rank");
  return guarded([&] { *rank = comm_of(comm).rank(); });
}

inc_result_t inc_comm_size(inc_comm_t comm, int* size) {
  if (!size) return null_arg("inc_comm_size: size");
  return guarded([&] { *size = comm_of(comm).size(); });
}

inc_result_t inc_comm_split(inc_comm_t comm, int color, int key, inc_comm_t* out) {
  if (!out) return null_arg("inc_comm_split: out");
  return guarded([&] {
    auto c = comm_of(comm).split(color, key);
    *out = c.valid() ? new inc_comm_s{std::move(c)} : nullptr;
  });
}

inc_result_t inc_allreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                           inc_op_t op, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).allreduce(send, recv, count, static_cast<inc::DataType>(type),
                            static_cast<inc::ReduceOp>(op));
  });
}

inc_result_t inc_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                inc_datatype_t type, inc_op_t op, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).reduce_scatter(send, recv, recv_count, static_cast<inc::DataType>(type),
                                 static_cast<inc::ReduceOp>(op));
  });
}

inc_result_t inc_allgather(const void* send, void* recv, size_t send_count, inc_datatype_t type,
                           inc_comm_t comm) {
  return guarded(
      [&] { comm_of(comm).allgather(send, recv, send_count, static_cast<inc::DataType>(type)); });
}

inc_result_t inc_broadcast(const void* send, void* recv, size_t count, inc_datatype_t type,
                           int root, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).ibroadcast(send, recv, count, static_cast<inc::DataType>(type), root).wait();
  });
}

inc_result_t inc_alltoall(const void* send, void* recv, size_t count, inc_datatype_t type,
                          inc_comm_t comm) {
  return guarded(
      [&] { comm_of(comm).alltoall(send, recv, count, static_cast<inc::DataType>(type)); });
}

inc_result_t inc_barrier(inc_comm_t comm) {
  return guarded([&] { comm_of(comm).barrier(); });
}

inc_result_t inc_iallreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                            inc_op_t op, inc_comm_t comm, inc_request_t* req) {
  if (!req) return null_arg("inc_iallreduce: req");
  return guarded([&] {
    *req = new inc_request_s{comm_of(comm).iallreduce(send, recv, count,
                                                      static_cast<inc::DataType>(type),
                                                      static_cast<inc::ReduceOp>(op))};
  });
}

inc_result_t inc_iallgather(const void* send, void* recv, size_t send_count,
                            inc_datatype_t type, inc_comm_t comm, inc_request_t* req) {
  if (!req) return null_arg("inc_iallgather: req");
  return guarded([&] {
    *req = new inc_request_s{
        comm_of(comm).iallgather(send, recv, send_count, static_cast<inc::DataType>(type))};
  });
}

inc_result_t inc_wait(inc_request_t req) {
  if (!req) return null_arg("inc_wait: req");
  inc_result_t r = guarded([&] { req->req.wait(); });
  delete req;
  return r;
}

inc_result_t inc_test(inc_request_t req, int* done) {
  if (!req) return null_arg("inc_test: req");
  if (!done) return null_arg("inc_test: done");
  *done = 0;
  inc_result_t r = guarded([&] { *done = req->req.test() ? 1 : 0; });
  if (r != INC_SUCCESS || *done) delete req;
  return r;
}

inc_result_t inc_last_algorithm(inc_comm_t comm, char* buf, size_t buf_len, int* in_network) {
  return guarded([&] {
    auto rep = comm_of(comm).last_report();
    if (buf && buf_len > 0) {
      std::size_t n = std::min(buf_len - 1, rep.algorithm.size());
      std::memcpy(buf, rep.algorithm.data(), n);
      buf[n] = '\0';
    }
    if (in_network) *in_network = rep.in_network ? 1 : 0;
  });
}

const char* inc_last_error(void) { return g_last_error.c_str(); }

const char* inc_version(void) { return "0.1.0"; }

}  // extern "C"
