// ProcessGroupInc: argument checks, staging of non-contiguous tensors, and the progress thread.
#include "process_group_inc.hpp"

#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace inc_torch {
namespace {

inc::DataType data_type(const at::Tensor& t, const char* coll) {
  switch (t.scalar_type()) {
    case at::kDouble: return inc::DataType::f64;
    case at::kFloat: return inc::DataType::f32;
    case at::kHalf: return inc::DataType::f16;
    case at::kBFloat16: return inc::DataType::bf16;
    case at::kChar: return inc::DataType::i8;
    case at::kByte: return inc::DataType::u8;
    case at::kInt: return inc::DataType::i32;
    case at::kUInt32: return inc::DataType::u32;
    case at::kLong: return inc::DataType::i64;
    case at::kUInt64: return inc::DataType::u64;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "inc: ", coll, " does not support dtype ", t.scalar_type(),
                   " (INC has float64, float32, float16, bfloat16, int8, uint8, int32, uint32, "
                   "int64, uint64)");
}

inc::ReduceOp reduce_op(const c10d::ReduceOp& op, const char* coll) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return inc::ReduceOp::sum;
    case c10d::ReduceOp::AVG: return inc::ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT: return inc::ReduceOp::prod;
    case c10d::ReduceOp::MIN: return inc::ReduceOp::min;
    case c10d::ReduceOp::MAX: return inc::ReduceOp::max;
    default: break;
  }
  constexpr const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  const auto i = static_cast<unsigned>(op.op_);
  TORCH_CHECK_VALUE(false, "inc: ", coll, " does not support ReduceOp ", i < 9 ? names[i] : "?",
                    " (BAND, BOR, BXOR and PREMUL_SUM are not INC operations; INC has SUM, "
                    "PRODUCT, MIN, MAX and AVG)");
}

void check_tensor(const at::Tensor& t, const char* coll) {
  TORCH_CHECK_VALUE(t.defined(), "inc: ", coll, ": undefined tensor");
  TORCH_CHECK_VALUE(t.device().is_cpu(), "inc: ", coll, " supports CPU tensors only, got a tensor on ",
                    t.device());
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "inc: ", coll, " supports dense (strided) tensors only, got ",
                    t.layout());
  (void)data_type(t, coll);
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* coll) {
  TORCH_CHECK_VALUE(ts.size() == 1, "inc: ", coll, " takes exactly one tensor per rank, got ", ts.size());
  check_tensor(ts[0], coll);
  return ts[0];
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, const char* coll) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "inc: ", coll, ": output dtype ", a.scalar_type(),
                   " differs from input dtype ", b.scalar_type());
}

// A contiguous buffer for an output tensor: the tensor itself, or a staging copy that
// `finish` copies back (a non-contiguous view is written through, as with gloo).
at::Tensor output_buffer(const at::Tensor& t, std::vector<std::function<void()>>& copies) {
  if (t.is_contiguous()) return t;
  at::Tensor buf = t.contiguous();
  copies.push_back([t, buf]() mutable { t.copy_(buf); });
  return buf;
}

std::function<void()> run_all(std::vector<std::function<void()>> fs) {
  if (fs.empty()) return {};
  return [fs = std::move(fs)] {
    for (auto& f : fs) f();
  };
}

std::size_t count(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

void check_pair(const at::Tensor& output, const at::Tensor& input, const char* coll) {
  check_tensor(input, coll);
  check_tensor(output, coll);
  same_dtype(output, input, coll);
}

// An out-of-place op from the contiguous `src` into `output` (staged if not contiguous):
// `start(comm, send, recv, send_count, recv_count)` issues it.
template <class Start>
Op staged_op(at::Tensor src, const at::Tensor& output, Start start) {
  std::vector<std::function<void()>> copies;
  at::Tensor buf = output_buffer(output, copies);
  Op op;
  op.keep = {src, buf};
  op.start = [src, buf, start](inc::Communicator& c) {
    return start(c, src.data_ptr(), buf.data_ptr(), count(src), count(buf));
  };
  op.finish = run_all(std::move(copies));
  return op;
}

auto reduce_scatter_start(inc::DataType dt, inc::ReduceOp rop) {
  return [dt, rop](inc::Communicator& c, const void* s, void* r, std::size_t, std::size_t n) {
    return c.ireduce_scatter(s, r, n, dt, rop);
  };
}

}  // namespace

WorkInc::WorkInc(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, title),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{})) {}

void WorkInc::complete(std::exception_ptr error) {
  finish(error);  // wait() and is_completed() see it first, then the future's callbacks run
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

ProcessGroupInc::ProcessGroupInc(int rank, int size, const std::string& store, bool host_store)
    : c10d::Backend(rank, size) {
  inc::Options o;
  o.rank = rank;
  o.world_size = size;
  o.store = store;
  o.host_store = host_store ? 1 : 0;
  try {
    comm_ = inc::Communicator::init(o);
  } catch (const inc::Error& e) {
    TORCH_CHECK(false, "inc: joining the INC job as rank ", rank, " of ", size, " at ", store,
                " failed: ", e.what());
  }
  thread_ = std::thread([this] { run(); });
}

ProcessGroupInc::~ProcessGroupInc() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // completes (or fails) every queued call first
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::enqueue(c10d::OpType type, const char* title,
                                                        std::vector<at::Tensor> outputs, Op op) {
  op.work = c10::make_intrusive<WorkInc>(rank_, type, title, std::move(outputs));
  auto work = op.work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!stop_, "inc: ", title, " on a process group that is being destroyed");
    queue_.push_back(std::move(op));
  }
  cv_.notify_all();
  return work;
}

void ProcessGroupInc::retire(Op& op, std::exception_ptr error) {
  if (!error) {
    try {
      if (op.finish) op.finish();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && op.request.valid()) {
    auto report = op.request.report();
    std::lock_guard<std::mutex> lock(mu_);
    totals_.collectives += 1;
    totals_.in_network += report.in_network ? 1 : 0;
    totals_.bytes_sent += report.bytes_sent;
    totals_.bytes_received += report.bytes_received;
    last_report_ = std::move(report);
  }
  op.keep.clear();
  op.work->complete(error);
}

namespace {
std::exception_ptr as_torch_error(const std::exception& e) {
  return std::make_exception_ptr(std::runtime_error(std::string("inc: ") + e.what()));
}
}  // namespace

void ProcessGroupInc::run() {
  std::deque<Op> inflight;  // issued, in call order
  for (;;) {
    std::deque<Op> fresh;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !inflight.empty(); });
      if (stop_ && queue_.empty() && inflight.empty()) return;
      fresh.swap(queue_);
    }
    for (auto& op : fresh) {
      try {
        op.request = op.start(comm_);  // non-blocking: returns before the peers arrive
        inflight.push_back(std::move(op));
      } catch (const std::exception& e) {
        // Earlier calls complete first, so that Works complete in call order.
        for (auto& f : inflight) {
          try {
            f.request.wait();
            retire(f, nullptr);
          } catch (const std::exception& e2) {
            retire(f, as_torch_error(e2));
          }
        }
        inflight.clear();
        retire(op, as_torch_error(e));
      }
    }
    if (inflight.empty()) continue;
    // Block in the oldest call (every INC call of the job progresses inside it), then take
    // whatever else completed meanwhile, in order.
    try {
      inflight.front().request.wait();
      retire(inflight.front(), nullptr);
    } catch (const std::exception& e) {
      retire(inflight.front(), as_torch_error(e));
    }
    inflight.pop_front();
    while (!inflight.empty()) {
      try {
        if (!inflight.front().request.test()) break;
        retire(inflight.front(), nullptr);
      } catch (const std::exception& e) {
        retire(inflight.front(), as_torch_error(e));
      }
      inflight.pop_front();
    }
  }
}

inc::Report ProcessGroupInc::last_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_report_;
}

ProcessGroupInc::Totals ProcessGroupInc::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const char* coll = "broadcast";
  const at::Tensor& t = single(tensors, coll);
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "inc: broadcast: root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "inc: broadcast: rootTensor must be 0 (one tensor per rank)");
  std::vector<std::function<void()>> copies;
  at::Tensor buf = output_buffer(t, copies);
  auto dt = data_type(t, coll);
  int root = static_cast<int>(opts.rootRank);
  Op op;
  op.keep = {buf};
  op.start = [buf, dt, root](inc::Communicator& c) {
    return c.ibroadcast(buf.data_ptr(), buf.data_ptr(), count(buf), dt, root);
  };
  op.finish = run_all(std::move(copies));
  return enqueue(c10d::OpType::BROADCAST, "inc:broadcast", tensors, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const char* coll = "allreduce";
  const at::Tensor& t = single(tensors, coll);
  auto rop = reduce_op(opts.reduceOp, coll);
  std::vector<std::function<void()>> copies;
  at::Tensor buf = output_buffer(t, copies);
  auto dt = data_type(t, coll);
  Op op;
  op.keep = {buf};
  op.start = [buf, dt, rop](inc::Communicator& c) {
    return c.iallreduce(buf.data_ptr(), buf.data_ptr(), count(buf), dt, rop);
  };
  op.finish = run_all(std::move(copies));
  return enqueue(c10d::OpType::ALLREDUCE, "inc:all_reduce", tensors, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions&) {
  const char* coll = "allgather";
  const at::Tensor& in = single(inputs, coll);
  TORCH_CHECK_VALUE(outputs.size() == 1, "inc: allgather takes one output list per rank, got ", outputs.size());
  auto& outs = outputs[0];
  TORCH_CHECK_VALUE(static_cast<int>(outs.size()) == size_, "inc: allgather: the output list has ",
                    outs.size(), " tensors for a group of ", size_);
  for (const auto& o : outs) {
    check_tensor(o, coll);
    same_dtype(o, in, coll);
    TORCH_CHECK_VALUE(o.numel() == in.numel(), "inc: allgather: an output tensor has ", o.numel(),
                      " elements, the input ", in.numel());
  }
  at::Tensor src = in.contiguous();
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
  auto dt = data_type(in, coll);
  Op op;
  op.keep = {src, flat};
  op.start = [src, flat, dt](inc::Communicator& c) {
    return c.iallgather(src.data_ptr(), flat.data_ptr(), count(src), dt);
  };
  op.finish = [outs, flat, n = in.numel()]() mutable {
    for (std::size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
  };
  return enqueue(c10d::OpType::ALLGATHER, "inc:all_gather", outs, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::AllgatherOptions&) {
  const char* coll = "allgather_into_tensor";
  check_pair(output, input, coll);
  TORCH_CHECK_VALUE(output.numel() == static_cast<int64_t>(size_) * input.numel(), "inc: ", coll,
                    ": the output has ", output.numel(), " elements, expected ", size_, " x ",
                    input.numel());
  auto dt = data_type(input, coll);
  Op op = staged_op(input.contiguous(), output,
                    [dt](inc::Communicator& c, const void* s, void* r, std::size_t n, std::size_t) {
                      return c.iallgather(s, r, n, dt);
                    });
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "inc:_allgather_base", {output}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ReduceScatterOptions& opts) {
  const char* coll = "reduce_scatter";
  const at::Tensor& out = single(outputs, coll);
  auto rop = reduce_op(opts.reduceOp, coll);
  TORCH_CHECK_VALUE(inputs.size() == 1, "inc: reduce_scatter takes one input list per rank, got ", inputs.size());
  auto& ins = inputs[0];
  TORCH_CHECK_VALUE(static_cast<int>(ins.size()) == size_, "inc: reduce_scatter: the input list has ",
                    ins.size(), " tensors for a group of ", size_);
  std::vector<at::Tensor> flat_in;
  for (const auto& i : ins) {
    check_tensor(i, coll);
    same_dtype(out, i, coll);
    TORCH_CHECK_VALUE(i.numel() == out.numel(), "inc: reduce_scatter: an input tensor has ", i.numel(),
                      " elements, the output ", out.numel());
    flat_in.push_back(i.reshape({-1}));
  }
  Op op = staged_op(at::cat(flat_in), out, reduce_scatter_start(data_type(out, coll), rop));
  return enqueue(c10d::OpType::REDUCE_SCATTER, "inc:reduce_scatter", outputs, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::ReduceScatterOptions& opts) {
  const char* coll = "reduce_scatter_tensor";
  check_pair(output, input, coll);
  auto rop = reduce_op(opts.reduceOp, coll);
  TORCH_CHECK_VALUE(input.numel() == static_cast<int64_t>(size_) * output.numel(), "inc: ", coll,
                    ": the input has ", input.numel(), " elements, expected ", size_, " x ",
                    output.numel());
  Op op = staged_op(input.contiguous(), output, reduce_scatter_start(data_type(input, coll), rop));
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "inc:_reduce_scatter_base", {output}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions&) {
  const char* coll = "all_to_all_single";
  check_pair(output, input, coll);
  TORCH_CHECK_VALUE(input.numel() == output.numel(), "inc: ", coll, ": input has ", input.numel(),
                    " elements, output ", output.numel(), " (INC's alltoall sends equal blocks)");
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.size(0) % size_ == 0, "inc: ", coll,
                    ": the first dimension (", input.dim() ? input.size(0) : 0,
                    ") must divide into ", size_, " equal blocks");
  const int64_t rows = input.size(0) / size_;
  for (auto* splits : {&input_splits, &output_splits})
    for (int64_t s : *splits)
      TORCH_CHECK_VALUE(s == rows, "inc: ", coll, " supports equal splits only (", rows,
                        " rows per rank here); got split sizes ", c10::IntArrayRef(*splits));
  for (auto* splits : {&input_splits, &output_splits})
    TORCH_CHECK_VALUE(splits->empty() || static_cast<int>(splits->size()) == size_, "inc: ", coll,
                      ": ", splits->size(), " split sizes for a group of ", size_);
  auto dt = data_type(input, coll);
  const auto ranks = static_cast<std::size_t>(size_);
  Op op = staged_op(input.contiguous(), output,
                    [dt, ranks](inc::Communicator& c, const void* s, void* r, std::size_t n, std::size_t) {
                      return c.ialltoall(s, r, n / ranks, dt);
                    });
  return enqueue(c10d::OpType::ALLTOALL_BASE, "inc:all_to_all", {output}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInc::barrier(const c10d::BarrierOptions&) {
  Op op;
  op.start = [](inc::Communicator& c) { return c.ibarrier(); };
  return enqueue(c10d::OpType::BARRIER, "inc:barrier", {}, std::move(op));
}

}  // namespace inc_torch
