// `inc numerics sweep`: input type x accumulator policy x members x tree shape against an
// exact reference. Every add is the library's kernel (src/numerics reduce(): the hosts' kernel,
// which the switch also runs for narrow 16-bit sums); widening and the root's single rounding
// are the library's exact conversions (load_as_double / store_from_double).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "inc/types.hpp"
#include "numerics/reduce.hpp"
#include "sim/plot.hpp"
#include "tools/numerics_tool.hpp"

namespace inc::tools {
namespace {

struct Buf {
  bool wide = false;               // f32 (floats) or i32 (integers), else the element type
  std::vector<std::uint8_t> bytes;
};

struct Ctx {
  DataType t;
  Accumulate policy;
  std::size_t n;                   // elements
  std::vector<char> overflowed;    // per element: some add or the final narrowing left the range
  double up_bytes = 0;             // bytes per element summed over every upward link
};

double type_max(DataType t) {
  switch (t) {
    case DataType::i4: return 7;
    case DataType::i8: return 127;
    case DataType::e4m3: return 448;
    case DataType::e5m2: return 57344;
    case DataType::f16: return 65504;
    case DataType::bf16: return 3.3895313892515355e38;
    default: return 0;
  }
}
double bytes_per_elem(DataType t) { return static_cast<double>(size_of(t)) / static_cast<double>(elements_per_unit(t)); }
DataType wide_type(DataType t) { return is_floating(t) ? DataType::f32 : DataType::i32; }

Buf widen(const Ctx& c, const Buf& b) {
  if (b.wide) return b;
  Buf w{true, std::vector<std::uint8_t>(4 * c.n)};
  for (std::size_t i = 0; i < c.n; ++i)
    numerics::store_from_double(wide_type(c.t), w.bytes.data(), i, numerics::load_as_double(c.t, b.bytes.data(), i));
  return w;
}

void add_into(Ctx& c, Buf& acc, const Buf& x) {
  if (acc.wide) {
    numerics::reduce(wide_type(c.t), ReduceOp::sum, acc.bytes.data(), acc.bytes.data(), x.bytes.data(), c.n);
    return;
  }
  if (!is_floating(c.t))  // the narrow add wraps; note which elements left the range
    for (std::size_t i = 0; i < c.n; ++i) {
      const double s = numerics::load_as_double(c.t, acc.bytes.data(), i) + numerics::load_as_double(c.t, x.bytes.data(), i);
      if (s > type_max(c.t) || s < -type_max(c.t) - 1) c.overflowed[i] = 1;
    }
  numerics::reduce(c.t, ReduceOp::sum, acc.bytes.data(), acc.bytes.data(), x.bytes.data(),
                   c.n / elements_per_unit(c.t));
}

// A node adds its children's buffers; what each child sends up is counted on its link.
struct Node {
  int member = -1;  // a host, or a switch with children
  std::vector<Node> kids;
};

Buf reduce_node(Ctx& c, const Node& node, const std::vector<Buf>& inputs, bool root = false) {
  if (node.member >= 0) {
    Buf b = inputs[static_cast<std::size_t>(node.member)];
    if (c.policy == Accumulate::wide) b = widen(c, b);  // the host converts (exact)
    c.up_bytes += b.wide ? 4.0 : bytes_per_elem(c.t);
    return b;
  }
  std::vector<Buf> got;
  for (const auto& k : node.kids) got.push_back(reduce_node(c, k, inputs));
  Buf acc = got[0];
  // widen: the first switch that really adds two or more inputs widens them.
  if (c.policy == Accumulate::widen && got.size() >= 2) acc = widen(c, acc);
  for (std::size_t k = 1; k < got.size(); ++k) add_into(c, acc, acc.wide ? widen(c, got[k]) : got[k]);
  if (!root) c.up_bytes += acc.wide ? 4.0 : bytes_per_elem(c.t);
  return acc;
}

Node make_tree(const std::string& shape, int members) {
  std::vector<Node> level;
  for (int m = 0; m < members; ++m) level.push_back(Node{m, {}});
  auto group = [](std::vector<Node> in, std::size_t k) {
    std::vector<Node> out;
    for (std::size_t i = 0; i < in.size(); i += k) {
      Node sw;
      for (std::size_t j = i; j < std::min(in.size(), i + k); ++j) sw.kids.push_back(in[j]);
      out.push_back(sw);
    }
    return out;
  };
  if (shape == "leaves4") level = group(level, 4);
  if (shape == "binary")
    while (level.size() > 2) level = group(level, 2);
  Node root;
  root.kids = level;
  if (root.kids.size() == 1 && root.kids[0].member < 0) return root.kids[0];
  return root;
}

struct Row {
  DataType t;
  Accumulate policy;
  int members;
  std::string shape;
  double mean_rel_err, max_rel_err, overflow_rate, up_bytes_per_member;
};

Row run_case(DataType t, Accumulate policy, int members, const std::string& shape, std::size_t n,
             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double sigma = type_max(t) / (is_floating(t) ? 16.0 : 4.0);
  std::normal_distribution<double> dist(0.0, sigma);
  const std::size_t unit_bytes = n * size_of(t) / elements_per_unit(t);
  std::vector<Buf> inputs(static_cast<std::size_t>(members));
  std::vector<long double> exact(n, 0.0L);
  for (auto& b : inputs) {
    b.bytes.assign(unit_bytes, 0);
    for (std::size_t i = 0; i < n; ++i) {
      numerics::store_from_double(t, b.bytes.data(), i, dist(rng));
      exact[i] += numerics::load_as_double(t, b.bytes.data(), i);  // exact: few, short values
    }
  }
  Ctx c{t, policy, n, std::vector<char>(n, 0)};
  Buf out = reduce_node(c, make_tree(shape, members), inputs, true);
  // The root's single rounding: floats to nearest-even, integers wrap modulo 2^bits (as the
  // switch's sum_widen does for i8), both noted as overflow when the total leaves the range.
  std::vector<double> result(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!out.wide) {
      result[i] = numerics::load_as_double(t, out.bytes.data(), i);
      continue;
    }
    const double w = numerics::load_as_double(wide_type(t), out.bytes.data(), i);
    if (is_floating(t)) {
      std::uint8_t tmp[2] = {0, 0};
      numerics::store_from_double(t, tmp, 0, w);
      result[i] = numerics::load_as_double(t, tmp, 0);
    } else {
      const double span = 2 * (type_max(t) + 1);
      double m = std::fmod(w + type_max(t) + 1, span);
      if (m < 0) m += span;
      result[i] = m - type_max(t) - 1;
    }
  }
  double sum_err = 0, max_err = 0;
  std::size_t finite = 0, over = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(exact[i]);
    if (!is_floating(t) && (e > type_max(t) || e < -type_max(t) - 1)) c.overflowed[i] = 1;
    if (!std::isfinite(result[i])) c.overflowed[i] = 1;
    if (c.overflowed[i]) ++over;
    if (!std::isfinite(result[i])) continue;
    const double scale = is_floating(t) ? (e != 0 ? std::fabs(e) : 1.0) : std::max(std::fabs(e), 1.0);
    const double err = std::fabs(result[i] - e) / scale;
    sum_err += err;
    max_err = std::max(max_err, err);
    ++finite;
  }
  return Row{t, policy, members, shape, finite ? sum_err / static_cast<double>(finite) : NAN, max_err,
             static_cast<double>(over) / static_cast<double>(n), c.up_bytes / members};
}

}  // namespace

void plot_column_pairs(const std::string& out, const std::string& title, const std::string& xlabel,
                       const std::string& ylabel, bool log_y, const std::string& data, int series, int first_column) {
  sim::render_plot(out,
                   fmt::format("set datafile separator ','\nset title '{2}'\nset xlabel '{3}'\nset ylabel '{4}'\n{5}"
                               "set key outside right noenhanced\nset grid\n"
                               "plot for [i=0:{0}] '{1}' using 1:(column({6}+2*i)) with linespoints lw 1.5 "
                               "title columnheader(2+2*i)\n",
                               series - 1, data, title, xlabel, ylabel,
                               log_y ? "set logscale xy 2\nset format y '%.0e'\n" : "set logscale x 2\n", first_column),
                   1100, 600);
}

int numerics_sweep(const SweepOptions& o) {
  const DataType types[] = {DataType::i4, DataType::i8, DataType::e4m3, DataType::e5m2, DataType::f16, DataType::bf16};
  const Accumulate policies[] = {Accumulate::narrow, Accumulate::widen, Accumulate::wide};
  const char* shapes[] = {"flat", "leaves4", "binary"};
  std::vector<Row> rows;
  std::uint64_t seed = o.seed;
  for (DataType t : types)
    for (int m : o.members)
      for (const char* shape : shapes) {
        ++seed;  // the same inputs for the three policies
        for (Accumulate a : policies) rows.push_back(run_case(t, a, m, shape, o.elements, seed));
      }

  fmt::print("Sum of {} elements per member, inputs ~ N(0, max/16) for floats and N(0, max/4) for integers,\n"
             "rounded into the type; exact reference in long double. rel.err = |result - exact| / |exact|;\n"
             "overflow = a non-finite result (floats) or an add or total outside the range (integers);\n"
             "B/elem/member = bytes per element over every upward link, per member.\n\n",
             o.elements);
  fmt::print("{:<5} {:<7} {:>7} {:<7} {:>12} {:>12} {:>9} {:>13}\n", "type", "policy", "members", "shape",
             "mean rel.err", "max rel.err", "overflow", "B/elem/member");
  for (const auto& r : rows)
    fmt::print("{:<5} {:<7} {:>7} {:<7} {:>12.3e} {:>12.3e} {:>9.4f} {:>13.3f}\n", name(r.t), name(r.policy),
               r.members, r.shape, r.mean_rel_err, r.max_rel_err, r.overflow_rate, r.up_bytes_per_member);

  print_host_sweep(o, host_sweep(o));  // the host algorithms under the host policies

  if (o.out_dir.empty()) return 0;
  const std::string csv = o.out_dir + "/numerics_sweep.csv";
  std::ofstream f(csv);
  if (!f) throw Error(Error::Kind::config, fmt::format("inc numerics: cannot write {}", csv));
  f << "type,policy,members,shape,mean_rel_err,max_rel_err,overflow_rate,up_bytes_per_elem_per_member\n";
  for (const auto& r : rows)
    f << fmt::format("{},{},{},{},{:.6e},{:.6e},{:.6f},{:.4f}\n", name(r.t), name(r.policy), r.members, r.shape,
                     r.mean_rel_err, r.max_rel_err, r.overflow_rate, r.up_bytes_per_member);
  f.close();
  fmt::print("\nwrote {}\n", csv);
  if (!o.plot) return 0;
  // Plot data: the flat tree, one column per (type, policy), rows = members.
  const std::string data = o.out_dir + "/numerics_sweep_flat.csv";
  std::ofstream d(data);
  d << "members";
  for (DataType t : types)
    for (Accumulate a : policies) d << "," << name(t) << " " << name(a) << "," << name(t) << " " << name(a) << " overflow";
  d << "\n";
  for (int m : o.members) {
    d << m;
    for (DataType t : types)
      for (Accumulate a : policies)
        for (const auto& r : rows)
          if (r.t == t && r.policy == a && r.members == m && r.shape == "flat")
            d << fmt::format(",{:.6e},{:.6f}", std::max(r.mean_rel_err, 1e-12), r.overflow_rate);
    d << "\n";
  }
  d.close();
  const int series = static_cast<int>(std::size(types) * std::size(policies));
  plot_column_pairs(o.out_dir + "/numerics_error", "Sum on one switch: mean relative error vs members", "members",
                    "mean relative error", true, data, series, 2);
  plot_column_pairs(o.out_dir + "/numerics_overflow", "Sum on one switch: overflow rate vs members", "members",
                    "fraction of elements", false, data, series, 3);
  fmt::print("wrote {0}/numerics_sweep_flat.csv, {0}/numerics_error.png/.svg, {0}/numerics_overflow.png/.svg\n",
             o.out_dir);
  return 0;
}

}  // namespace inc::tools
