// ProcessGroupInc: a c10d backend ("inc") for CPU tensors on top of inc::Communicator.
//
// Every collective returns at once with a WorkInc: the calling thread checks the arguments
// (throwing a c10::Error that names what is wrong) and queues the call; the backend's
// progress thread issues it as a non-blocking INC call (inc::Request) and completes the Work
// and its Future when the request completes, in the order the calls were made, as gloo's
// worker threads do. All INC calls of one backend are made by its progress thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "inc/inc.hpp"

namespace inc_torch {

class WorkInc : public c10d::Work {
 public:
  WorkInc(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // Called by the progress thread once, when the INC request completed or failed.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One queued collective: how to issue it, what to do once it completed (copy staged outputs
// back into non-contiguous user tensors), and the tensors that must live until then.
struct Op {
  std::function<inc::Request(inc::Communicator&)> start;
  std::function<void()> finish;
  std::vector<at::Tensor> keep;
  c10::intrusive_ptr<WorkInc> work;
  inc::Request request;
};

class ProcessGroupInc : public c10d::Backend {
 public:
  // Joins (or, with host_store, hosts) the INC rendezvous store at `store` ("host:port") as
  // `rank` of `size`; INC_TIMEOUT, INC_SWITCH, INC_ALGO, ... apply as for any INC program.
  ProcessGroupInc(int rank, int size, const std::string& store, bool host_store);
  ~ProcessGroupInc() override;

  const std::string getBackendName() const override { return "inc"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // The report of the collective of this group that completed last (they complete in the
  // order they were called); an empty `algorithm` before the first one.
  inc::Report last_report() const;
  // Sums over the reports of every collective of this group completed so far (payload bytes
  // this rank sent and received, on the hosts or to and from the switch alike).
  struct Totals {
    std::uint64_t collectives = 0, in_network = 0, bytes_sent = 0, bytes_received = 0;
  };
  Totals totals() const;

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title,
                                         std::vector<at::Tensor> outputs, Op op);
  void run();
  void retire(Op& op, std::exception_ptr error);

  inc::Communicator comm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // called, not yet issued (guarded by mu_)
  bool stop_ = false;
  inc::Report last_report_;     // guarded by mu_
  Totals totals_;               // guarded by mu_
  std::thread thread_;
};

}  // namespace inc_torch
