// inc_torch._C: the backend's constructor for torch.distributed.Backend.register_backend, and
// the group's last INC report and totals for Python.
#include <torch/python.h>

#include <pybind11/pybind11.h>

#include "process_group_inc.hpp"

namespace py = pybind11;

namespace {

inc_torch::ProcessGroupInc& as_inc(const c10::intrusive_ptr<c10d::Backend>& b) {
  auto* pg = dynamic_cast<inc_torch::ProcessGroupInc*>(b.get());
  TORCH_CHECK_VALUE(pg != nullptr, "inc_torch: this group's CPU backend is ",
                    b ? b->getBackendName() : std::string("none"), ", not inc");
  return *pg;
}

py::dict report_dict(const inc::Report& r) {
  py::dict d;
  d["collective"] = std::string(inc::name(r.coll));
  d["seq"] = r.seq;
  d["algorithm"] = r.algorithm;
  d["in_network"] = r.in_network;
  d["reason"] = r.reason;
  d["bytes_sent"] = r.bytes_sent;
  d["bytes_received"] = r.bytes_received;
  d["seconds"] = r.seconds;
  d["overflow"] = r.overflow;
  d["retransmissions"] = r.retransmissions;
  d["bytes_resent"] = r.bytes_resent;
  d["messages_sent"] = r.messages_sent;
  d["switch_operations"] = r.switch_operations;
  d["accumulate"] = std::string(inc::name(r.accumulate));
  d["link_bytes_per_element"] = r.link_bytes_per_element;
  d["inexact_blocks"] = r.inexact_blocks;
  d["nonfinite_blocks"] = r.nonfinite_blocks;
  d["overflow_events"] = r.overflow_events;
  d["events_counted"] = r.events_counted;
  d["nonfinite_inputs"] = r.nonfinite_inputs;
  py::list hops;
  for (const auto& h : r.hops) {
    py::dict hd;
    hd["hop"] = h.hop;
    hd["accumulator_bits"] = h.accumulator_bits;
    hd["bytes_per_element"] = h.bytes_per_element;
    hd["carries"] = h.carries;
    hops.append(hd);
  }
  d["hops"] = hops;
  py::list predicted;  // (path, microseconds), cheapest first
  for (const auto& [path, us] : r.predicted_us) predicted.append(py::make_tuple(path, us));
  d["predicted_us"] = predicted;
  d["offload"] = r.offload;
  d["wire_handler"] = r.wire_handler;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "INC's c10d backend for torch.distributed (CPU tensors)";
  m.def(
      "create_backend",
      [](int rank, int size, const std::string& store, bool host_store) -> c10::intrusive_ptr<c10d::Backend> {
        py::gil_scoped_release nogil;  // init() waits for the other ranks
        return c10::make_intrusive<inc_torch::ProcessGroupInc>(rank, size, store, host_store);
      },
      py::arg("rank"), py::arg("size"), py::arg("store"), py::arg("host_store"));
  m.def(
      "last_report",
      [](const c10::intrusive_ptr<c10d::Backend>& b) { return report_dict(as_inc(b).last_report()); },
      "The INC report of the group's most recently completed collective.");
  m.def(
      "totals",
      [](const c10::intrusive_ptr<c10d::Backend>& b) {
        auto t = as_inc(b).totals();
        py::dict d;
        d["collectives"] = t.collectives;
        d["in_network"] = t.in_network;
        d["bytes_sent"] = t.bytes_sent;
        d["bytes_received"] = t.bytes_received;
        return d;
      },
      "Counts and payload bytes summed over the group's completed collectives.");
}
