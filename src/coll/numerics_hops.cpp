#include "coll/numerics_hops.hpp"

#include <string>

namespace inc::coll {

namespace {
std::string level_name(std::size_t k, std::size_t levels) {
  if (levels == 1) return "switch";
  if (levels == 2) return k == 0 ? "leaf" : "spine";
  return k + 1 == levels ? "root" : "switch" + std::to_string(k);
}
// An MX element's code bits (its share of the block's scale byte counts in the bytes only).
std::uint32_t mx_element_bits(DataType t) {
  return static_cast<std::uint32_t>(8 * (size_of(t) - 1) / elements_per_unit(t));
}
}  // namespace

std::vector<NumericsHop> switch_hops(DataType t, ReduceOp op, Accumulate ran,
                                     const std::vector<std::uint32_t>& members, bool levels_known) {
  const std::size_t levels = members.empty() ? 1 : members.size();
  const bool sum = op == ReduceOp::sum || op == ReduceOp::avg;
  // Bits and bytes per element (i4 and the MX blocks hold several elements per unit; an MX
  // element's share of its block's scale byte counts in the bytes, not the bits).
  const auto nbits = is_mx(t) ? mx_element_bits(t) : static_cast<std::uint32_t>(8 * size_of(t));
  const double bpe = static_cast<double>(size_of(t)) / static_cast<double>(elements_per_unit(t));
  const std::string tn(name(t));
  std::vector<NumericsHop> hops;
  const std::string first = levels_known ? level_name(0, levels) : "switch";
  // What goes up on the hop above level k - 1 (k = 0: from the hosts), and the result down.
  auto up = [&](std::size_t k, NumericsHop h) {
    h.hop = (k == 0 ? "host->" + first : level_name(k - 1, levels) + "->" + level_name(k, levels));
    hops.push_back(std::move(h));
  };
  const std::string root = levels_known ? level_name(levels - 1, levels) : "switch";
  auto down = [&](NumericsHop h) {
    h.hop = root + "->hosts";
    hops.push_back(std::move(h));
  };
  const std::size_t shown = levels_known ? levels : 1;
  if (sum && ran == Accumulate::reproducible) {
    for (std::size_t k = 0; k < shown; ++k) up(k, {"", 64, 8, "two i32 limbs per element (exact)"});
    down({"", 64, 8, "limb sums (each host rounds once)"});
    return hops;
  }
  if (sum && ran == Accumulate::fixed && t == DataType::f32) {
    for (std::size_t k = 0; k < shown; ++k) up(k, {"", 32, 4, "i32 fixed point (shared exponent per block)"});
    down({"", 32, 4, "i32 fixed-point sum (each host scales it back)"});
    return hops;
  }
  if (sum && ran == Accumulate::wide) {
    for (std::size_t k = 0; k < shown; ++k) up(k, {"", 32, 4, "f32 (" + tn + " widened on the host)"});
    down({"", 32, 4, "f32 result (each host rounds once)"});
    return hops;
  }
  const bool narrow_type = t == DataType::f16 || t == DataType::bf16 || t == DataType::i8 || t == DataType::u8 || is_mx(t);
  if (sum && ran == Accumulate::widen && narrow_type) {
    const std::string wide = (t == DataType::i8 || t == DataType::u8) ? "i32" : "f32";
    // The first switch that adds two or more inputs widens; one with a single member passes
    // its member's packet on as it came.
    bool widened = false;
    for (std::size_t k = 0; k < shown; ++k) {
      if (widened) up(k, {"", 32, 4, wide + " partial sums"});
      else up(k, {"", nbits, bpe, k == 0 ? tn + " inputs" : tn + " input passed on (one member below)"});
      if (members.size() > k && members[k] >= 2) widened = true;
    }
    down({"", nbits, bpe, tn + " result (rounded/wrapped once at the root)"});
    return hops;
  }
  // narrow sums, min/max and the types the switch keeps as they are (i32, f32, u32 as i32).
  const std::string what = sum ? (narrow_type ? tn + " partial sums (each add rounds/wraps)" : tn + " partial sums")
                               : tn + " (exact)";
  for (std::size_t k = 0; k < shown; ++k) up(k, {"", nbits, bpe, k == 0 ? tn + " inputs" : what});
  down({"", nbits, bpe, tn + " result"});
  return hops;
}

std::vector<NumericsHop> host_hops(DataType t, ReduceOp op, Accumulate ran, Collective coll) {
  const bool sum = op == ReduceOp::sum || op == ReduceOp::avg;
  if (sum && ran == Accumulate::reproducible)
    return {{"host->host", 64, 8, "two i32 limbs per element (exact; each host rounds once)"}};
  const std::string tn(name(t));
  const auto nbits = is_mx(t) ? mx_element_bits(t) : static_cast<std::uint32_t>(8 * size_of(t)) / static_cast<std::uint32_t>(elements_per_unit(t));
  const double bpe = static_cast<double>(size_of(t)) / static_cast<double>(elements_per_unit(t));
  if (sum && ran == Accumulate::wide)  // (coll::host_accumulate: only where it widened)
    return {{"host->host", 32, 4, "f32 partial sums (" + tn + " widened on each host; each host rounds once)"}};
  if (sum && ran == Accumulate::widen) {
    std::vector<NumericsHop> hops = {{"host->host (first step)", nbits, bpe, tn + " inputs"},
                                     {"host->host", 32, 4, "f32 partial sums"}};
    if (coll == Collective::allreduce)
      hops.push_back({"host->host (allgather)", nbits, bpe, tn + " result (rounded once where complete)"});
    return hops;
  }
  return {{"host->host", is_mx(t) ? mx_element_bits(t)
                                  : static_cast<std::uint32_t>(8 * size_of(t)) / static_cast<std::uint32_t>(elements_per_unit(t)),
           static_cast<double>(size_of(t)) / static_cast<double>(elements_per_unit(t)),
           sum ? tn + " partial sums (each step rounds/wraps)" : tn}};
}

}  // namespace inc::coll
