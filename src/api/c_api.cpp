// The C ABI (include/inc/inc.h): a thin layer that turns inc::Error into codes plus a
// thread-local message.
#include "inc/inc.h"

#include <algorithm>
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

// A C caller may pass any int as an enumeration (inc.h makes them int-based in C++, so reading
// one is defined): values outside the enumeration are refused here, before the conversion to the
// uint8_t-based C++ enums, which would take them modulo 256 (262 would be INC_I32).
inc::DataType data_type_of(inc_datatype_t t, const char* fn) {
  const int v = static_cast<int>(t);
  if (v < 0 || v >= inc::kNumDataTypes)
    throw inc::Error(inc::Error::Kind::invalid_argument,
                     std::string(fn) + ": invalid data type " + std::to_string(v) + " (inc_datatype_t is 0.." +
                         std::to_string(inc::kNumDataTypes - 1) + ")");
  return static_cast<inc::DataType>(v);
}

inc::ReduceOp reduce_op_of(inc_op_t op, const char* fn) {
  const int v = static_cast<int>(op);
  if (v < 0 || v >= inc::kNumReduceOps)
    throw inc::Error(inc::Error::Kind::invalid_argument,
                     std::string(fn) + ": invalid reduction op " + std::to_string(v) + " (inc_op_t is 0.." +
                         std::to_string(inc::kNumReduceOps - 1) + ")");
  return static_cast<inc::ReduceOp>(v);
}

void copy_string(const std::string& s, char* buf, std::size_t len) {
  if (!buf || len == 0) return;
  std::size_t n = std::min(len - 1, s.size());
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

// inc_call_t.accumulate and inc_report_t.accumulate are inc::Accumulate's values (inc.h).
static_assert(static_cast<int>(inc::Accumulate::reproducible) == 4 && static_cast<int>(inc::Accumulate::fixed) == 5);

void fill_report(const inc::Report& r, inc_report_t& out) {
  out = inc_report_t{};
  out.coll = static_cast<inc_collective_t>(r.coll);
  out.seq = r.seq;
  copy_string(r.algorithm, out.algorithm, sizeof out.algorithm);
  out.in_network = r.in_network ? 1 : 0;
  copy_string(r.reason, out.reason, sizeof out.reason);
  out.bytes_sent = r.bytes_sent;
  out.bytes_received = r.bytes_received;
  out.retransmissions = r.retransmissions;
  out.overflow = r.overflow ? 1 : 0;
  out.seconds = r.seconds;
  out.accumulate = static_cast<int>(r.accumulate);
  out.link_bytes_per_element = r.link_bytes_per_element;
  out.inexact_blocks = r.inexact_blocks;
  out.nonfinite_blocks = r.nonfinite_blocks;
  out.overflow_events = r.overflow_events;
  out.events_counted = r.events_counted ? 1 : 0;
  out.nonfinite_inputs = r.nonfinite_inputs;
}

// The extended report (inc.h): the whole of it built here, then the prefix the caller's
// struct_size covers copied out, so that every version of the struct is filled by one code path.
void fill_report_ex(const inc::Report& r, inc_report_ex_t& out, const char* fn) {
  const std::uint32_t size = out.struct_size;
  if (size < INC_REPORT_EX_V1_SIZE)
    throw inc::Error(inc::Error::Kind::invalid_argument,
                     std::string(fn) + ": inc_report_ex_t.struct_size is " + std::to_string(size) +
                         ", below the first version's " + std::to_string(INC_REPORT_EX_V1_SIZE) +
                         " (set it to sizeof(inc_report_ex_t): inc_report_ex_init())");
  inc_report_ex_t ex;
  std::memset(&ex, 0, sizeof ex);
  ex.struct_size = static_cast<std::uint32_t>(std::min<std::size_t>(size, sizeof ex));
  fill_report(r, ex.report);
  ex.bytes_resent = r.bytes_resent;
  ex.messages_sent = r.messages_sent;
  ex.switch_operations = r.switch_operations;
  copy_string(r.offload, ex.offload, sizeof ex.offload);
  copy_string(r.wire_handler, ex.wire_handler, sizeof ex.wire_handler);
  ex.predicted_count = static_cast<std::uint32_t>(r.predicted_us.size());
  for (std::size_t i = 0; i < std::min<std::size_t>(r.predicted_us.size(), INC_REPORT_PREDICTED_MAX); ++i) {
    copy_string(r.predicted_us[i].first, ex.predicted[i].name, sizeof ex.predicted[i].name);
    ex.predicted[i].us = r.predicted_us[i].second;
  }
  ex.hop_count = static_cast<std::uint32_t>(r.hops.size());
  for (std::size_t i = 0; i < std::min<std::size_t>(r.hops.size(), INC_REPORT_HOPS_MAX); ++i) {
    auto& h = ex.hops[i];
    copy_string(r.hops[i].hop, h.hop, sizeof h.hop);
    h.accumulator_bits = r.hops[i].accumulator_bits;
    h.bytes_per_element = r.hops[i].bytes_per_element;
    copy_string(r.hops[i].carries, h.carries, sizeof h.carries);
  }
  std::memcpy(&out, &ex, ex.struct_size);
}

inc::Request start_request(const inc_call_t& c, inc_comm_t comm, const char* fn) {
  auto& cm = comm_of(comm);
  inc::CallOptions o;
  if (c.algo) o.algo = c.algo;
  if (c.accumulate < 0 || c.accumulate >= inc::kNumAccumulate)
    throw inc::Error(inc::Error::Kind::invalid_argument,
                     std::string(fn) + ": inc_call_t: invalid accumulate " + std::to_string(c.accumulate));
  o.accumulate = static_cast<inc::Accumulate>(c.accumulate);
  // Only the fields the collective uses are read (and checked).
  switch (c.coll) {
    case INC_ALLREDUCE:
      return cm.iallreduce(c.send, c.recv, c.count, data_type_of(c.type, fn), reduce_op_of(c.op, fn), o);
    case INC_REDUCE_SCATTER:
      return cm.ireduce_scatter(c.send, c.recv, c.count, data_type_of(c.type, fn), reduce_op_of(c.op, fn), o);
    case INC_ALLGATHER: return cm.iallgather(c.send, c.recv, c.count, data_type_of(c.type, fn), o);
    case INC_BROADCAST: return cm.ibroadcast(c.send, c.recv, c.count, data_type_of(c.type, fn), c.root, o);
    case INC_ALLTOALL: return cm.ialltoall(c.send, c.recv, c.count, data_type_of(c.type, fn), o);
    case INC_BARRIER: return cm.ibarrier(o);
  }
  throw inc::Error(inc::Error::Kind::invalid_argument,
                   "inc_call_t: invalid collective " + std::to_string(static_cast<int>(c.coll)));
}

inc_result_t start_call(const inc_call_t& c, inc_comm_t comm, inc_request_t* req, const char* fn) {
  if (!req) return null_arg((std::string(fn) + ": req").c_str());
  *req = nullptr;
  return guarded([&] { *req = new inc_request_s{start_request(c, comm, fn)}; });
}

}  // namespace

extern "C" {

inc_result_t inc_init(inc_comm_t* comm) {
  if (!comm) return null_arg("inc_init: comm");
  *comm = nullptr;  // on failure the caller holds no communicator to free
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
  *out = nullptr;
  return guarded([&] {
    auto c = comm_of(comm).split(color, key);
    *out = c.valid() ? new inc_comm_s{std::move(c)} : nullptr;
  });
}

inc_result_t inc_comm_dup(inc_comm_t comm, inc_comm_t* out) {
  if (!out) return null_arg("inc_comm_dup: out");
  *out = nullptr;
  return guarded([&] { *out = new inc_comm_s{comm_of(comm).dup()}; });
}

inc_result_t inc_allreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                           inc_op_t op, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).allreduce(send, recv, count, data_type_of(type, "inc_allreduce"),
                            reduce_op_of(op, "inc_allreduce"));
  });
}

inc_result_t inc_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                inc_datatype_t type, inc_op_t op, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).reduce_scatter(send, recv, recv_count, data_type_of(type, "inc_reduce_scatter"),
                                 reduce_op_of(op, "inc_reduce_scatter"));
  });
}

inc_result_t inc_allgather(const void* send, void* recv, size_t send_count, inc_datatype_t type,
                           inc_comm_t comm) {
  return guarded(
      [&] { comm_of(comm).allgather(send, recv, send_count, data_type_of(type, "inc_allgather")); });
}

inc_result_t inc_broadcast(const void* send, void* recv, size_t count, inc_datatype_t type,
                           int root, inc_comm_t comm) {
  return guarded([&] {
    comm_of(comm).ibroadcast(send, recv, count, data_type_of(type, "inc_broadcast"), root).wait();
  });
}

inc_result_t inc_alltoall(const void* send, void* recv, size_t count, inc_datatype_t type,
                          inc_comm_t comm) {
  return guarded(
      [&] { comm_of(comm).alltoall(send, recv, count, data_type_of(type, "inc_alltoall")); });
}

inc_result_t inc_barrier(inc_comm_t comm) {
  return guarded([&] { comm_of(comm).barrier(); });
}

inc_result_t inc_iallreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                            inc_op_t op, inc_comm_t comm, inc_request_t* req) {
  return start_call({INC_ALLREDUCE, send, recv, count, type, op, 0, nullptr, 0}, comm, req, "inc_iallreduce");
}

inc_result_t inc_ireduce_scatter(const void* send, void* recv, size_t recv_count,
                                 inc_datatype_t type, inc_op_t op, inc_comm_t comm,
                                 inc_request_t* req) {
  return start_call({INC_REDUCE_SCATTER, send, recv, recv_count, type, op, 0, nullptr, 0}, comm, req,
                    "inc_ireduce_scatter");
}

inc_result_t inc_iallgather(const void* send, void* recv, size_t send_count,
                            inc_datatype_t type, inc_comm_t comm, inc_request_t* req) {
  return start_call({INC_ALLGATHER, send, recv, send_count, type, INC_SUM, 0, nullptr, 0}, comm, req,
                    "inc_iallgather");
}

inc_result_t inc_ibroadcast(const void* send, void* recv, size_t count, inc_datatype_t type,
                            int root, inc_comm_t comm, inc_request_t* req) {
  return start_call({INC_BROADCAST, send, recv, count, type, INC_SUM, root, nullptr, 0}, comm, req,
                    "inc_ibroadcast");
}

inc_result_t inc_ialltoall(const void* send, void* recv, size_t count, inc_datatype_t type,
                           inc_comm_t comm, inc_request_t* req) {
  return start_call({INC_ALLTOALL, send, recv, count, type, INC_SUM, 0, nullptr, 0}, comm, req,
                    "inc_ialltoall");
}

inc_result_t inc_ibarrier(inc_comm_t comm, inc_request_t* req) {
  return start_call({INC_BARRIER, nullptr, nullptr, 0, INC_U8, INC_SUM, 0, nullptr, 0}, comm, req,
                    "inc_ibarrier");
}

inc_result_t inc_start(const inc_call_t* call, inc_comm_t comm, inc_request_t* req) {
  if (!call) return null_arg("inc_start: call");
  return start_call(*call, comm, req, "inc_start");
}

inc_result_t inc_run(const inc_call_t* call, inc_comm_t comm) {
  if (!call) return null_arg("inc_run: call");
  return guarded([&] { start_request(*call, comm, "inc_run").wait(); });
}

inc_result_t inc_wait(inc_request_t req) {
  if (!req) return null_arg("inc_wait: req");
  return guarded([&] { req->req.wait(); });
}

inc_result_t inc_test(inc_request_t req, int* done) {
  if (!req) return null_arg("inc_test: req");
  if (!done) return null_arg("inc_test: done");
  *done = 0;
  return guarded([&] { *done = req->req.test() ? 1 : 0; });
}

inc_result_t inc_request_free(inc_request_t req) {
  delete req;
  return INC_SUCCESS;
}

inc_result_t inc_request_report(inc_request_t req, inc_report_t* out) {
  if (!req) return null_arg("inc_request_report: req");
  if (!out) return null_arg("inc_request_report: out");
  return guarded([&] { fill_report(req->req.report(), *out); });
}

inc_result_t inc_last_report(inc_comm_t comm, inc_report_t* out) {
  if (!out) return null_arg("inc_last_report: out");
  return guarded([&] { fill_report(comm_of(comm).last_report(), *out); });
}

inc_result_t inc_request_report_ex(inc_request_t req, inc_report_ex_t* out) {
  if (!req) return null_arg("inc_request_report_ex: req");
  if (!out) return null_arg("inc_request_report_ex: out");
  return guarded([&] { fill_report_ex(req->req.report(), *out, "inc_request_report_ex"); });
}

inc_result_t inc_last_report_ex(inc_comm_t comm, inc_report_ex_t* out) {
  if (!out) return null_arg("inc_last_report_ex: out");
  return guarded([&] { fill_report_ex(comm_of(comm).last_report(), *out, "inc_last_report_ex"); });
}

inc_result_t inc_request_bytes_resent(inc_request_t req, uint64_t* out) {
  if (!req) return null_arg("inc_request_bytes_resent: req");
  if (!out) return null_arg("inc_request_bytes_resent: out");
  return guarded([&] { *out = req->req.report().bytes_resent; });
}

inc_result_t inc_last_bytes_resent(inc_comm_t comm, uint64_t* out) {
  if (!out) return null_arg("inc_last_bytes_resent: out");
  return guarded([&] { *out = comm_of(comm).last_report().bytes_resent; });
}

inc_result_t inc_last_algorithm(inc_comm_t comm, char* buf, size_t buf_len, int* in_network) {
  return guarded([&] {
    auto rep = comm_of(comm).last_report();
    copy_string(rep.algorithm, buf, buf_len);
    if (in_network) *in_network = rep.in_network ? 1 : 0;
  });
}

const char* inc_last_error(void) { return g_last_error.c_str(); }

const char* inc_version(void) { return "0.1.0"; }

}  // extern "C"
