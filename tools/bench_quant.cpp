// The expected result of a collective through a lossy Edge-INC wire handler (bench_quant.hpp).
#include "tools/bench_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "coll/local_executor.hpp"
#include "numerics/fp8.hpp"
#include "numerics/half.hpp"
#include "numerics/mx.hpp"
#include "numerics/reduce.hpp"

namespace inc::tools {

namespace {

bool wide_float(DataType t) { return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16; }

struct MxFormat {
  numerics::MxElem elem;
  std::size_t block;
};
std::optional<MxFormat> mx_format(const std::string& h) {
  using numerics::MxElem;
  if (h == "mxfp8") return MxFormat{MxElem::fp8_e4m3, 32};
  if (h == "mxfp8e5m2") return MxFormat{MxElem::fp8_e5m2, 32};
  if (h == "mxfp6e2m3") return MxFormat{MxElem::fp6_e2m3, 32};
  if (h == "mxfp6e3m2") return MxFormat{MxElem::fp6_e3m2, 32};
  if (h == "mxfp4") return MxFormat{MxElem::fp4_e2m1, 32};
  if (h == "mxint8") return MxFormat{MxElem::int8, 32};
  if (h == "bfp16") return MxFormat{MxElem::int8, 16};
  return std::nullopt;
}

bool known(const std::string& h) {
  return h == "bf16" || h == "f16" || h == "int8" || h == "e4m3" || h == "e5m2" || mx_format(h).has_value();
}

float load(DataType t, const std::byte* p, std::size_t i) { return static_cast<float>(numerics::load_as_double(t, p, i)); }
void store(DataType t, std::byte* p, std::size_t i, double v) { numerics::store_from_double(t, p, i, v); }

}  // namespace

bool handler_converts(const std::string& h, DataType t) {
  if (h == "bf16" || h == "f16") return t == DataType::f32;
  return known(h) && wide_float(t);
}

bool quantise_message(const std::string& h, DataType t, std::byte* data, std::size_t bytes) {
  if (h.empty()) return true;
  if (!known(h)) return false;
  if (!handler_converts(h, t)) return true;
  const std::size_t n = bytes / size_of(t);
  if (h == "bf16" || h == "f16") {  // round to nearest even, widened back
    for (std::size_t i = 0; i < n; ++i) {
      const float x = load(t, data, i);
      store(t, data, i, h == "bf16" ? numerics::bf16_to_f32(numerics::f32_to_bf16(x)) : numerics::f16_to_f32(numerics::f32_to_f16(x)));
    }
  } else if (h == "int8") {  // per 256: scale = max|x| / 127 (f32), q = nearest-even x / scale
    for (std::size_t first = 0; first < n; first += 256) {
      const std::size_t k = std::min<std::size_t>(256, n - first);
      float maxabs = 0;
      bool finite = true;
      for (std::size_t i = first; i < first + k; ++i) {
        finite = finite && std::isfinite(load(t, data, i));
        maxabs = std::max(maxabs, std::fabs(load(t, data, i)));
      }
      const float scale = finite ? maxabs / 127.0f : std::numeric_limits<float>::quiet_NaN();
      for (std::size_t i = first; i < first + k; ++i) {
        float q = 0;
        if (finite && scale > 0) q = std::clamp(std::nearbyint(load(t, data, i) / scale), -127.0f, 127.0f);
        store(t, data, i, static_cast<float>(static_cast<std::int8_t>(q)) * scale);
      }
    }
  } else if (h == "e4m3" || h == "e5m2") {  // one rounding per element, OCP non-saturating
    for (std::size_t i = 0; i < n; ++i) {
      const double x = numerics::load_as_double(t, data, i);
      store(t, data, i, h == "e4m3" ? numerics::e4m3_to_f32(numerics::f64_to_e4m3(x)) : numerics::e5m2_to_f32(numerics::f64_to_e5m2(x)));
    }
  } else {  // MX / BFP blocks from the message's start (mx.hpp's reference encoder and decoder)
    const MxFormat f = *mx_format(h);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = load(t, data, i);
    std::vector<std::uint8_t> scales((n + f.block - 1) / f.block), codes(n);
    numerics::mx_encode(f.elem, v.data(), n, f.block, scales.data(), codes.data());
    std::vector<double> out(n);
    numerics::mx_decode(f.elem, scales.data(), codes.data(), n, f.block, out.data());
    for (std::size_t i = 0; i < n; ++i) store(t, data, i, out[i]);
  }
  return true;
}

std::string quantised_reference(const coll::CollectiveParams& proto, const std::string& h,
                                const std::vector<std::vector<std::byte>>& inputs, int rank,
                                std::vector<std::byte>& result) {
  if (!h.empty() && !known(h)) return "unknown wire handler '" + h + "'";
  const int p = proto.nranks;
  std::vector<coll::RankSchedule> schedules;
  std::vector<coll::LocalBuffers> bufs(static_cast<std::size_t>(p));
  std::vector<coll::CollectiveParams> params;
  for (int r = 0; r < p; ++r) {
    coll::CollectiveParams q = proto;
    q.rank = r;
    // The API's rule: a broadcast runs in place on every rank but the root.
    if (q.coll == Collective::broadcast) q.in_place = proto.in_place || r != proto.root;
    schedules.push_back(coll::build_schedule(q));
    for (const coll::Op& o : schedules.back().ops)
      if (o.kind != coll::OpKind::send && o.kind != coll::OpKind::recv && o.kind != coll::OpKind::recv_reduce &&
          o.kind != coll::OpKind::copy && o.kind != coll::OpKind::reduce)
        return "the schedule has in-network or reproducible-sum steps";
    auto& b = bufs[static_cast<std::size_t>(r)];
    b.output.assign(coll::output_bytes(q), std::byte{0});
    b.input = inputs[static_cast<std::size_t>(r)];
    b.input.resize(coll::input_bytes(q));
    if (q.in_place) b.output = b.input;  // one buffer: BufferId::input names the output
    params.push_back(q);
  }
  // The engines' proxies run the same schedules; each send's payload crosses the wire in the
  // handler's format (the oracle executor of src/coll, with the reference's rounding).
  coll::LocalRunOptions o;
  o.wire = [&](std::byte* data, std::size_t bytes) { quantise_message(h, proto.dtype, data, bytes); };
  try {
    // A broadcast's ranks differ in in_place: the oracle takes it from each rank's buffers.
    coll::run_local(params[static_cast<std::size_t>(proto.coll == Collective::broadcast ? proto.root : 0)], schedules, bufs, o);
  } catch (const Error& e) {
    return std::string("the reference run failed: ") + e.what();
  }
  const coll::Region g = coll::result_region(params[static_cast<std::size_t>(rank)]);
  const auto& out = bufs[static_cast<std::size_t>(rank)].output;
  result.assign(out.begin() + static_cast<std::ptrdiff_t>(g.offset), out.begin() + static_cast<std::ptrdiff_t>(g.offset + g.bytes));
  if (proto.op == ReduceOp::avg && (proto.coll == Collective::allreduce || proto.coll == Collective::reduce_scatter))
    numerics::divide(proto.dtype, result.data(), result.size() / size_of(proto.dtype), static_cast<std::uint64_t>(p));
  return "";
}

}  // namespace inc::tools
