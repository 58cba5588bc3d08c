// MPI communicators, datatypes and ops seen from INC; counters and the summary; INC errors as
// MPI error codes (see layer.hpp).
#include "mpi/layer.hpp"

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

namespace inc::mpi {

State& state() {
  static State s;
  return s;
}

namespace {

// Counters: per call, how many ran on INC (in the network / on the hosts) and how many passed
// to MPI, by reason. A mutex because MPI_THREAD_SERIALIZED programs may call from several
// threads (one at a time, but without a happens-before MPI would give us).
struct Counters {
  std::mutex mu;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> on_inc;  // {network, hosts}
  std::map<std::string, std::map<std::string, std::uint64_t>> passed;
};
Counters& counters() {
  static Counters c;
  return c;
}

std::string type_name(MPI_Datatype t) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  if (PMPI_Type_get_name(t, name, &len) != MPI_SUCCESS || len == 0) return "unnamed datatype";
  return name;
}

}  // namespace

int comm_rank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

Communicator* inc_comm(MPI_Comm comm, std::string& reason) {
  State& s = state();
  if (!s.active) {
    reason = s.inactive_reason;
    return nullptr;
  }
  if (comm == MPI_COMM_NULL) {
    reason = "MPI_COMM_NULL (MPI reports the error)";
    return nullptr;
  }
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    reason = "invalid communicator (MPI reports the error)";
    return nullptr;
  }
  if (inter) {
    reason = "intercommunicator";
    return nullptr;
  }
  void* v = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, s.keyval, &v, &flag);
  if (!flag || !v) {
    reason = "communicator without an INC twin (MPI_COMM_SELF, or made by MPI_Comm_create_group, "
             "MPI_Comm_idup, a topology call, ...)";
    return nullptr;
  }
  return &static_cast<CommTwin*>(v)->comm;
}

std::optional<DataType> reduce_type(MPI_Datatype t, std::string& reason) {
  // By size where C leaves it open (long); fixed-width types by definition.
  auto int_of = [](std::size_t bytes, bool is_signed) -> std::optional<DataType> {
    switch (bytes) {
      case 1: return is_signed ? DataType::i8 : DataType::u8;
      case 4: return is_signed ? DataType::i32 : DataType::u32;
      case 8: return is_signed ? DataType::i64 : DataType::u64;
      default: return std::nullopt;
    }
  };
  std::optional<DataType> d;
  if (t == MPI_FLOAT) d = DataType::f32;
  else if (t == MPI_DOUBLE) d = DataType::f64;
  else if (t == MPI_INT) d = int_of(sizeof(int), true);
  else if (t == MPI_UNSIGNED) d = int_of(sizeof(unsigned), false);
  else if (t == MPI_LONG) d = int_of(sizeof(long), true);
  else if (t == MPI_UNSIGNED_LONG) d = int_of(sizeof(unsigned long), false);
  else if (t == MPI_LONG_LONG_INT || t == MPI_LONG_LONG) d = int_of(sizeof(long long), true);
  else if (t == MPI_UNSIGNED_LONG_LONG) d = int_of(sizeof(unsigned long long), false);
  else if (t == MPI_SIGNED_CHAR || t == MPI_INT8_T) d = DataType::i8;
  else if (t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T) d = DataType::u8;
  else if (t == MPI_INT32_T) d = DataType::i32;
  else if (t == MPI_UINT32_T) d = DataType::u32;
  else if (t == MPI_INT64_T) d = DataType::i64;
  else if (t == MPI_UINT64_T) d = DataType::u64;
  else if (t == MPI_AINT) d = int_of(sizeof(MPI_Aint), true);
  else if (t == MPI_OFFSET) d = int_of(sizeof(MPI_Offset), true);
  else if (t == MPI_COUNT) d = int_of(sizeof(MPI_Count), true);
  if (!d) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
      reason = "invalid datatype (MPI reports the error)";
    else if (combiner != MPI_COMBINER_NAMED)
      reason = "derived datatype";
    else
      reason = fmt::format("datatype {} (no INC element type)", type_name(t));
  }
  return d;
}

std::optional<ReduceOp> reduce_op(MPI_Op op, std::string& reason) {
  if (op == MPI_SUM) return ReduceOp::sum;
  if (op == MPI_PROD) return ReduceOp::prod;
  if (op == MPI_MIN) return ReduceOp::min;
  if (op == MPI_MAX) return ReduceOp::max;
  static const std::pair<MPI_Op, const char*> named[] = {
      {MPI_LAND, "MPI_LAND"},     {MPI_BAND, "MPI_BAND"},     {MPI_LOR, "MPI_LOR"},
      {MPI_BOR, "MPI_BOR"},       {MPI_LXOR, "MPI_LXOR"},     {MPI_BXOR, "MPI_BXOR"},
      {MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"}, {MPI_REPLACE, "MPI_REPLACE"},
      {MPI_NO_OP, "MPI_NO_OP"}};
  for (const auto& [o, n] : named)
    if (op == o) {
      reason = fmt::format("op {} (INC has sum, prod, min, max)", n);
      return std::nullopt;
    }
  int commute = 1;
  if (op == MPI_OP_NULL || PMPI_Op_commutative(op, &commute) != MPI_SUCCESS)
    reason = "invalid op (MPI reports the error)";
  else
    reason = commute ? "user-defined op" : "non-commutative user-defined op";
  return std::nullopt;
}

std::optional<std::size_t> movable_bytes(MPI_Datatype t, int count, std::string& reason) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  if (count < 0 || PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      PMPI_Type_size(t, &size) != MPI_SUCCESS || PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS) {
    reason = "invalid count or datatype (MPI reports the error)";
    return std::nullopt;
  }
  if (combiner != MPI_COMBINER_NAMED) {
    reason = "derived datatype";
    return std::nullopt;
  }
  if (lb != 0 || extent != size) {
    reason = fmt::format("datatype {} has gaps (size {} B, extent {} B)", type_name(t), size, extent);
    return std::nullopt;
  }
  return static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
}

void count_passed(const char* call, const std::string& reason) {
  auto& c = counters();
  std::lock_guard lk(c.mu);
  ++c.passed[call][reason];
}

void count_on_inc(const char* call, const Report& r) {
  auto& c = counters();
  std::lock_guard lk(c.mu);
  auto& n = c.on_inc[call];
  ++(r.in_network ? n.first : n.second);
}

int error_code(const char* call, const Error& e) {
  int code = MPI_ERR_OTHER;
  if (PMPI_Add_error_code(state().error_class, &code) != MPI_SUCCESS) return MPI_ERR_OTHER;
  std::string msg = fmt::format("{} on INC: {}", call, e.what());
  if (msg.size() >= MPI_MAX_ERROR_STRING) msg.resize(MPI_MAX_ERROR_STRING - 1);
  PMPI_Add_error_string(code, msg.c_str());
  return code;
}

int raise_on(MPI_Comm comm, int code) {
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

void print_summary() {
  const State& s = state();
  int rank = comm_rank(MPI_COMM_WORLD), size = 1;
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (s.summary == 0 || (s.summary == 1 && rank != 0)) return;
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  PMPI_Get_library_version(version, &len);
  std::string lib(version, static_cast<std::size_t>(len));
  lib = lib.substr(0, lib.find_first_of(",\n"));
  for (char& ch : lib)
    if (ch == '\t') ch = ' ';
  auto& c = counters();
  std::lock_guard lk(c.mu);
  std::string out = fmt::format("inc_mpi: summary of rank {} of {} ({}): {}\n", rank, size, lib,
                                s.active ? "INC active" : "INC inactive: " + s.inactive_reason);
  std::uint64_t total_inc = 0, total_net = 0, total_passed = 0;
  for (const auto& [call, n] : c.on_inc) {
    out += fmt::format("inc_mpi:   on INC      {:<28} {:>8}  (in network {}, hosts {})\n", call,
                       n.first + n.second, n.first, n.second);
    total_inc += n.first + n.second;
    total_net += n.first;
  }
  for (const auto& [call, reasons] : c.passed)
    for (const auto& [why, n] : reasons) {
      out += fmt::format("inc_mpi:   passed      {:<28} {:>8}  {}\n", call, n, why);
      total_passed += n;
    }
  out += fmt::format("inc_mpi: rank {}: {} calls on INC ({} in network), {} passed to MPI\n", rank,
                     total_inc, total_net, total_passed);
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace inc::mpi
