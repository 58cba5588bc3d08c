#include "coll/local_executor.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "numerics/events.hpp"
#include "numerics/reduce.hpp"

namespace inc::coll {

std::vector<RankSchedule> build_schedules(CollectiveParams p) {
  std::vector<RankSchedule> out;
  out.reserve(static_cast<std::size_t>(std::max(p.nranks, 0)));
  for (int r = 0; r < p.nranks; ++r) {
    p.rank = r;
    out.push_back(build_schedule(p));
  }
  return out;
}

namespace {

constexpr std::uint32_t kNone = ~0u;

class LocalRun {
 public:
  LocalRun(const CollectiveParams& p, const std::vector<RankSchedule>& s,
           std::vector<LocalBuffers>& b, const LocalRunOptions& o)
      : p_(p), s_(s), b_(b), o_(o), rng_(o.seed), elem_(size_of(p.dtype)) {}

  LocalRunResult run() {
    validate_and_index();
    for (std::uint32_t g = 0; g < total_; ++g)
      if (remaining_[g] == 0) on_ready(g);
    while (!fireable_.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, fireable_.size() - 1);
      const std::size_t i = pick(rng_);
      const Action a = fireable_[i];
      fireable_[i] = fireable_.back();
      fireable_.pop_back();
      fire(a);
    }
    if (done_count_ != total_) throw deadlock();
    return std::move(result_);
  }

 private:
  enum class ActionKind : std::uint8_t { op, pair, group };
  struct Action {
    ActionKind kind;
    std::uint32_t id;  // op: global op; pair: the send; group: inc group
  };
  struct Channel {
    int from = 0, to = 0;
    std::vector<std::uint32_t> sends, recvs;  // global ops, in program order
    std::vector<std::vector<std::byte>> msgs;
    std::vector<std::uint8_t> arrived;
    std::uint32_t sends_done = 0;
  };

  const CollectiveParams& p_;
  const std::vector<RankSchedule>& s_;
  std::vector<LocalBuffers>& b_;
  const LocalRunOptions& o_;
  std::mt19937_64 rng_;
  const std::uint64_t elem_;

  std::vector<std::vector<std::byte>> scratch_;
  std::vector<std::uint32_t> base_;  // global index of rank r's op 0
  std::uint32_t total_ = 0, done_count_ = 0;
  std::vector<int> rank_of_;
  std::vector<std::uint32_t> remaining_, succ_begin_, succ_;
  std::vector<std::uint8_t> ready_, queued_, done_;
  std::vector<std::uint32_t> chan_of_, seq_of_;  // p2p: channel and k; inc: group in seq_of_
  std::vector<Channel> chans_;
  std::vector<std::vector<std::uint32_t>> groups_;  // inc group -> global op per rank
  std::vector<int> group_ready_;
  std::vector<Action> fireable_;
  LocalRunResult result_;

  const Op& op(std::uint32_t g) const {
    const int r = rank_of_[g];
    return s_[static_cast<std::size_t>(r)].ops[g - base_[static_cast<std::size_t>(r)]];
  }
  std::uint32_t local(std::uint32_t g) const { return g - base_[static_cast<std::size_t>(rank_of_[g])]; }

  std::string where() const {
    return fmt::format("{} ({}, {} ranks, {} x {})", name(p_.coll),
                       s_.empty() ? std::string_view("?") : name(s_[0].algo), p_.nranks, p_.count,
                       name(p_.dtype));
  }
  std::string describe(std::uint32_t g) const {
    return fmt::format("rank {} op {} ({})", rank_of_[g], local(g), to_string(op(g)));
  }
  Error op_error(Error::Kind k, int r, std::size_t i, const std::string& what) const {
    return Error(k, fmt::format("{}: rank {} op {} ({}): {}", where(), r, i,
                                to_string(s_[static_cast<std::size_t>(r)].ops[i]), what));
  }

  // Resolved buffer of a region: in place, the input is the output.
  std::vector<std::byte>& buffer(int r, BufferId id) {
    auto& bufs = b_[static_cast<std::size_t>(r)];
    switch (id) {
      case BufferId::input:
        return p_.in_place ? bufs.output : bufs.input;
      case BufferId::output:
        return bufs.output;
      case BufferId::scratch:
        return scratch_[static_cast<std::size_t>(r)];
    }
    return bufs.output;
  }
  std::byte* ptr(int r, const Region& reg) { return buffer(r, reg.buf).data() + reg.offset; }
  BufferId resolved(BufferId id) const {
    return (id == BufferId::input && p_.in_place) ? BufferId::output : id;
  }

  // whole_elems: the region is whole elements of the op's arithmetic (the call's type, or the
  // i32 / f32 of a reproducible or wide sum; f32 regions of widen/narrow: whole floats).
  void check_region(int r, std::size_t i, const Region& reg, bool write, bool whole_elems) {
    if (reg.bytes == 0) return;
    const auto size = buffer(r, reg.buf).size();
    if (reg.offset > size || reg.bytes > size - reg.offset)
      throw op_error(Error::Kind::invalid_argument, r, i,
                     fmt::format("region outside its buffer of {} bytes", size));
    const Op& o = s_[static_cast<std::size_t>(r)].ops[i];
    const bool f32_side = (o.kind == OpKind::widen && &reg == &o.dst) || (o.kind == OpKind::narrow && &reg == &o.src);
    const std::uint64_t esz = f32_side ? 4 : o.arith == Arith::call ? elem_ : size_of(arithmetic(o, p_.dtype, p_.op).dtype);
    if (whole_elems && (reg.bytes % esz != 0 || reg.offset % esz != 0))
      throw op_error(Error::Kind::invalid_argument, r, i,
                     fmt::format("region is not whole {} elements", name(p_.dtype)));
    if (write && resolved(reg.buf) == BufferId::input)
      throw op_error(Error::Kind::invalid_argument, r, i, "writes the input buffer out of place");
  }
  // src and dst of a local combine/copy: same size, and identical or disjoint.
  void check_pair(int r, std::size_t i, const Region& a, const Region& d) {
    if (a.bytes != d.bytes)
      throw op_error(Error::Kind::invalid_argument, r, i, "source and destination sizes differ");
    if (a.bytes && resolved(a.buf) == resolved(d.buf) && a.offset != d.offset &&
        a.offset < d.offset + d.bytes && d.offset < a.offset + a.bytes)
      throw op_error(Error::Kind::invalid_argument, r, i, "source and destination partially overlap");
  }

  void validate_and_index() {
    const int P = p_.nranks;
    if (P < 1 || s_.size() != static_cast<std::size_t>(P) || b_.size() != static_cast<std::size_t>(P))
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: need one schedule and one buffer set per rank ({}), got {} and {}",
                              where(), P, s_.size(), b_.size()));
    scratch_.resize(static_cast<std::size_t>(P));
    base_.resize(static_cast<std::size_t>(P) + 1);
    std::uint64_t total = 0;
    for (int r = 0; r < P; ++r) {
      base_[static_cast<std::size_t>(r)] = static_cast<std::uint32_t>(total);
      total += s_[static_cast<std::size_t>(r)].ops.size();
      if (total >= kNone) throw Error(Error::Kind::invalid_argument, "too many ops for run_local");
      scratch_[static_cast<std::size_t>(r)].assign(s_[static_cast<std::size_t>(r)].scratch_bytes,
                                                  std::byte{0xA5});
    }
    base_[static_cast<std::size_t>(P)] = static_cast<std::uint32_t>(total);
    total_ = static_cast<std::uint32_t>(total);
    rank_of_.resize(total_);
    remaining_.assign(total_, 0);
    ready_.assign(total_, 0);
    queued_.assign(total_, 0);
    done_.assign(total_, 0);
    chan_of_.assign(total_, kNone);
    seq_of_.assign(total_, kNone);
    succ_begin_.assign(total_ + 1, 0);

    std::unordered_map<std::uint64_t, std::uint32_t> chan_index;
    auto channel = [&](int from, int to) -> Channel& {
      const std::uint64_t key = (static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to);
      auto [it, added] = chan_index.try_emplace(key, static_cast<std::uint32_t>(chans_.size()));
      if (added) {
        chans_.emplace_back();
        chans_.back().from = from;
        chans_.back().to = to;
      }
      return chans_[it->second];
    };

    std::vector<std::vector<std::uint32_t>> inc_ops(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) {
      const RankSchedule& s = s_[static_cast<std::size_t>(r)];
      const std::size_t n = s.ops.size();
      if (s.dep_begin.size() != n + 1 || s.dep_begin.back() != s.deps.size())
        throw Error(Error::Kind::invalid_argument,
                    fmt::format("{}: rank {}: schedule has no dependencies (infer_dependencies not run)",
                                where(), r));
      for (std::size_t i = 0; i < n; ++i) {
        const Op& o = s.ops[i];
        const std::uint32_t g = base_[static_cast<std::size_t>(r)] + static_cast<std::uint32_t>(i);
        rank_of_[g] = r;
        remaining_[g] = s.dep_begin[i + 1] - s.dep_begin[i];
        for (std::uint32_t d = s.dep_begin[i]; d < s.dep_begin[i + 1]; ++d) {
          if (s.deps[d] >= i)
            throw op_error(Error::Kind::invalid_argument, r, i, "depends on a later op");
          ++succ_begin_[base_[static_cast<std::size_t>(r)] + s.deps[d] + 1];
        }
        const bool p2p = o.kind == OpKind::send || is_recv(o.kind);
        if (p2p && (o.peer < 0 || o.peer >= P))
          throw op_error(Error::Kind::invalid_argument, r, i, "peer out of range");
        switch (o.kind) {
          case OpKind::send: {
            check_region(r, i, o.src, false, false);
            Channel& c = channel(r, o.peer);
            chan_of_[g] = static_cast<std::uint32_t>(&c - chans_.data());
            seq_of_[g] = static_cast<std::uint32_t>(c.sends.size());
            c.sends.push_back(g);
            break;
          }
          case OpKind::recv:
          case OpKind::recv_reduce: {
            const bool red = o.kind == OpKind::recv_reduce;
            check_region(r, i, o.dst, true, red);
            if (red) {
              check_region(r, i, o.src, false, true);
              check_pair(r, i, o.src, o.dst);
            }
            Channel& c = channel(o.peer, r);
            chan_of_[g] = static_cast<std::uint32_t>(&c - chans_.data());
            seq_of_[g] = static_cast<std::uint32_t>(c.recvs.size());
            c.recvs.push_back(g);
            break;
          }
          case OpKind::copy:
          case OpKind::reduce:
            check_region(r, i, o.src, false, o.kind == OpKind::reduce);
            check_region(r, i, o.dst, true, o.kind == OpKind::reduce);
            check_pair(r, i, o.src, o.dst);
            break;
          case OpKind::repro_scan:
          case OpKind::repro_encode:
          case OpKind::repro_decode:
            check_region(r, i, o.src, false, true);
            check_region(r, i, o.dst, true, true);
            check_region(r, i, o.aux, false, true);
            break;
          case OpKind::widen:  // the call's type -> f32 (MX: a block -> 32 floats)
          case OpKind::narrow:
            check_region(r, i, o.src, false, true);
            check_region(r, i, o.dst, true, true);
            if ((o.kind == OpKind::widen ? o.dst : o.src).bytes * size_of(p_.dtype) !=
                (o.kind == OpKind::widen ? o.src : o.dst).bytes * 4 * elements_per_unit(p_.dtype))
              throw op_error(Error::Kind::invalid_argument, r, i, "f32 and narrow sizes differ");
            break;
          case OpKind::inc_reduce:
          case OpKind::inc_broadcast:
          case OpKind::inc_gather:
            check_region(r, i, o.src, false, o.kind == OpKind::inc_reduce);
            check_region(r, i, o.dst, true, o.kind == OpKind::inc_reduce);
            seq_of_[g] = static_cast<std::uint32_t>(inc_ops[static_cast<std::size_t>(r)].size());
            inc_ops[static_cast<std::size_t>(r)].push_back(g);
            break;
        }
      }
    }
    for (std::uint32_t g = 0; g < total_; ++g) succ_begin_[g + 1] += succ_begin_[g];
    succ_.resize(succ_begin_[total_]);
    {
      std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
      for (int r = 0; r < P; ++r) {
        const RankSchedule& s = s_[static_cast<std::size_t>(r)];
        const std::uint32_t b = base_[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < s.ops.size(); ++i)
          for (std::uint32_t d = s.dep_begin[i]; d < s.dep_begin[i + 1]; ++d)
            succ_[fill[b + s.deps[d]]++] = b + static_cast<std::uint32_t>(i);
      }
    }

    // Point-to-point pairing: FIFO per (sender, receiver), equal sizes.
    for (Channel& c : chans_) {
      if (c.sends.size() != c.recvs.size())
        throw Error(Error::Kind::mismatch,
                    fmt::format("{}: rank {} sends {} messages to rank {}, which posts {} receives from it{}",
                                where(), c.from, c.sends.size(), c.to, c.recvs.size(),
                                first_unpaired(c)));
      for (std::size_t k = 0; k < c.sends.size(); ++k) {
        const std::uint64_t sb = op(c.sends[k]).src.bytes, rb = op(c.recvs[k]).dst.bytes;
        if (sb != rb)
          throw Error(Error::Kind::mismatch,
                      fmt::format("{}: message #{} from rank {} to rank {}: {} sends {} B, {} expects {} B",
                                  where(), k, c.from, c.to, describe(c.sends[k]), sb,
                                  describe(c.recvs[k]), rb));
      }
      c.msgs.resize(c.sends.size());
      c.arrived.assign(c.sends.size(), 0);
    }

    // Core-INC groups: the k-th inc op of every rank.
    const std::size_t ngroups = inc_ops[0].size();
    for (int r = 1; r < P; ++r)
      if (inc_ops[static_cast<std::size_t>(r)].size() != ngroups)
        throw Error(Error::Kind::mismatch,
                    fmt::format("{}: rank 0 issues {} inc ops, rank {} issues {}", where(), ngroups, r,
                                inc_ops[static_cast<std::size_t>(r)].size()));
    groups_.resize(ngroups);
    group_ready_.assign(ngroups, 0);
    for (std::size_t k = 0; k < ngroups; ++k) {
      auto& grp = groups_[k];
      for (int r = 0; r < P; ++r) grp.push_back(inc_ops[static_cast<std::size_t>(r)][k]);
      check_group(k);
    }
  }

  std::string first_unpaired(const Channel& c) const {
    const std::size_t k = std::min(c.sends.size(), c.recvs.size());
    if (k < c.sends.size()) return fmt::format(" (first unmatched: {})", describe(c.sends[k]));
    if (k < c.recvs.size()) return fmt::format(" (first unmatched: {})", describe(c.recvs[k]));
    return "";
  }

  void check_group(std::size_t k) {
    const auto& grp = groups_[k];
    const Op& first = op(grp[0]);
    auto bad = [&](std::uint32_t g, const std::string& what) {
      return Error(Error::Kind::mismatch,
                   fmt::format("{}: switch operation #{}: {} vs {}: {}", where(), k, describe(grp[0]),
                               describe(g), what));
    };
    std::uint64_t bytes = first.kind == OpKind::inc_reduce ? first.src.bytes : 0;
    if (first.kind == OpKind::inc_gather) bytes = first.src.bytes * static_cast<std::uint64_t>(p_.nranks);
    if (first.kind == OpKind::inc_broadcast) {
      if (first.peer < 0 || first.peer >= p_.nranks) throw bad(grp[0], "root out of range");
      bytes = op(grp[static_cast<std::size_t>(first.peer)]).src.bytes;
    }
    for (std::uint32_t g : grp) {
      const Op& o = op(g);
      if (o.kind != first.kind) throw bad(g, "different kinds");
      if (o.kind == OpKind::inc_reduce && o.src.bytes != bytes) throw bad(g, "different sizes");
      if (o.kind == OpKind::inc_broadcast && o.peer != first.peer) throw bad(g, "different roots");
      if (o.kind == OpKind::inc_gather && o.src.bytes != first.src.bytes) throw bad(g, "different block sizes");
      if (o.dst.bytes != 0 && o.dst.bytes != bytes)
        throw bad(g, fmt::format("destination of {} B for {} B of data", o.dst.bytes, bytes));
    }
  }

  // ---- execution ----

  void push(Action a) { fireable_.push_back(a); }

  void on_ready(std::uint32_t g) {
    ready_[g] = 1;
    const Op& o = op(g);
    switch (o.kind) {
      case OpKind::copy:
      case OpKind::reduce:
      case OpKind::repro_scan:
      case OpKind::repro_encode:
      case OpKind::repro_decode:
      case OpKind::widen:
      case OpKind::narrow:
        queued_[g] = 1;
        push({ActionKind::op, g});
        break;
      case OpKind::send:
        o_.rendezvous ? try_pair(g) : try_send(g);
        break;
      case OpKind::recv:
      case OpKind::recv_reduce: {
        const Channel& c = chans_[chan_of_[g]];
        if (o_.rendezvous) {
          try_pair(c.sends[seq_of_[g]]);
        } else if (c.arrived[seq_of_[g]]) {
          queued_[g] = 1;
          push({ActionKind::op, g});
        }
        break;
      }
      case OpKind::inc_reduce:
      case OpKind::inc_broadcast:
      case OpKind::inc_gather:
        if (++group_ready_[seq_of_[g]] == p_.nranks) push({ActionKind::group, seq_of_[g]});
        break;
    }
  }

  bool channel_allows(std::uint32_t send) const {
    return !o_.ordered_channels || chans_[chan_of_[send]].sends_done == seq_of_[send];
  }
  void try_send(std::uint32_t s) {
    if (ready_[s] && !queued_[s] && channel_allows(s)) {
      queued_[s] = 1;
      push({ActionKind::op, s});
    }
  }
  void try_pair(std::uint32_t s) {
    const std::uint32_t r = chans_[chan_of_[s]].recvs[seq_of_[s]];
    if (ready_[s] && ready_[r] && !queued_[s] && channel_allows(s)) {
      queued_[s] = queued_[r] = 1;
      push({ActionKind::pair, s});
    }
  }

  void complete(std::uint32_t g) {
    done_[g] = 1;
    ++done_count_;
    ++result_.ops;
    if (o_.record_trace) result_.trace.emplace_back(rank_of_[g], local(g));
    for (std::uint32_t i = succ_begin_[g]; i < succ_begin_[g + 1]; ++i)
      if (--remaining_[succ_[i]] == 0) on_ready(succ_[i]);
  }

  void deliver(std::uint32_t recv, const std::byte* data) {
    const Op& o = op(recv);
    const int r = rank_of_[recv];
    if (o.dst.bytes == 0) return;
    if (o.kind == OpKind::recv) {
      std::memcpy(ptr(r, o.dst), data, o.dst.bytes);
    } else {
      const auto a = arithmetic(o, p_.dtype, p_.op);
      result_.overflow_events +=
          numerics::reduce_counted(a.dtype, a.op, ptr(r, o.dst), ptr(r, o.src), data, o.dst.bytes / size_of(a.dtype));
    }
  }

  void after_send(std::uint32_t s) {
    Channel& c = chans_[chan_of_[s]];
    ++c.sends_done;
    ++result_.messages;
    result_.message_bytes += op(s).src.bytes;
    const std::uint32_t k = seq_of_[s];
    if (o_.ordered_channels && k + 1 < c.sends.size())
      o_.rendezvous ? try_pair(c.sends[k + 1]) : try_send(c.sends[k + 1]);
  }

  void fire(const Action& a) {
    switch (a.kind) {
      case ActionKind::op: {
        const std::uint32_t g = a.id;
        const Op& o = op(g);
        const int r = rank_of_[g];
        if (o.kind == OpKind::send) {
          Channel& c = chans_[chan_of_[g]];
          const std::uint32_t k = seq_of_[g];
          const std::byte* src = o.src.bytes ? ptr(r, o.src) : nullptr;
          c.msgs[k].assign(src, src + o.src.bytes);
          if (o_.wire && o.src.bytes) o_.wire(c.msgs[k].data(), o.src.bytes);
          c.arrived[k] = 1;
          complete(g);
          after_send(g);
          const std::uint32_t recv = c.recvs[k];
          if (ready_[recv] && !queued_[recv]) {
            queued_[recv] = 1;
            push({ActionKind::op, recv});
          }
        } else if (is_recv(o.kind)) {
          Channel& c = chans_[chan_of_[g]];
          auto& msg = c.msgs[seq_of_[g]];
          deliver(g, msg.data());
          msg = {};
          complete(g);
        } else if (o.kind == OpKind::copy) {
          if (o.dst.bytes) std::memmove(ptr(r, o.dst), ptr(r, o.src), o.dst.bytes);
          complete(g);
        } else if (o.kind == OpKind::reduce) {
          const auto ar = arithmetic(o, p_.dtype, p_.op);
          if (o.dst.bytes)
            result_.overflow_events += numerics::reduce_counted(ar.dtype, ar.op, ptr(r, o.dst), ptr(r, o.dst),
                                                                ptr(r, o.src), o.dst.bytes / size_of(ar.dtype));
          complete(g);
        } else {  // repro_scan, repro_encode, repro_decode, widen, narrow
          result_.overflow_events +=
              run_local_op(o, p_, ptr(r, o.src), ptr(r, o.dst), o.aux.bytes ? ptr(r, o.aux) : nullptr);
          complete(g);
        }
        break;
      }
      case ActionKind::pair: {
        const std::uint32_t s = a.id;
        const Channel& c = chans_[chan_of_[s]];
        const std::uint32_t recv = c.recvs[seq_of_[s]];
        const Op& so = op(s);
        // Through a copy: sender and receiver may be the same rank and buffer.
        std::vector<std::byte> data(so.src.bytes);
        if (so.src.bytes) std::memcpy(data.data(), ptr(rank_of_[s], so.src), so.src.bytes);
        if (o_.wire && so.src.bytes) o_.wire(data.data(), so.src.bytes);
        deliver(recv, data.data());
        complete(s);
        after_send(s);
        complete(recv);
        break;
      }
      case ActionKind::group:
        fire_group(a.id);
        break;
    }
  }

  void fire_group(std::uint32_t k) {
    const auto& grp = groups_[k];
    const Op& first = op(grp[0]);
    std::vector<std::byte> data;
    if (first.kind == OpKind::inc_reduce) {
      // The aggregate in rank order: ((c0 op c1) op c2) ...
      data.resize(first.src.bytes);
      const auto ar = arithmetic(first, p_.dtype, p_.op);
      const std::uint64_t n = first.src.bytes / size_of(ar.dtype);
      for (std::size_t r = 0; r < grp.size(); ++r) {
        const Op& o = op(grp[r]);
        if (!o.src.bytes) continue;
        const std::byte* src = ptr(static_cast<int>(r), o.src);
        if (r == 0)
          std::memcpy(data.data(), src, o.src.bytes);
        else
          numerics::reduce(ar.dtype, ar.op, data.data(), data.data(), src, n);
      }
    } else if (first.kind == OpKind::inc_gather) {
      // The blocks in rank order.
      data.resize(first.src.bytes * grp.size());
      for (std::size_t r = 0; r < grp.size(); ++r) {
        const Op& o = op(grp[r]);
        if (o.src.bytes) std::memcpy(data.data() + r * o.src.bytes, ptr(static_cast<int>(r), o.src), o.src.bytes);
      }
    } else {
      const auto root = static_cast<std::size_t>(first.peer);
      const Op& o = op(grp[root]);
      data.resize(o.src.bytes);
      if (o.src.bytes) std::memcpy(data.data(), ptr(static_cast<int>(root), o.src), o.src.bytes);
    }
    for (std::size_t r = 0; r < grp.size(); ++r) {
      const Op& o = op(grp[r]);
      if (o.dst.bytes) std::memcpy(ptr(static_cast<int>(r), o.dst), data.data(), o.dst.bytes);
    }
    ++result_.switch_ops;
    for (std::uint32_t g : grp) complete(g);
  }

  // No op can fire and some are not done: name the ops that are ready but stuck (the others
  // wait for them through dependencies).
  Error deadlock() const {
    std::vector<std::string> lines;
    std::size_t stuck = 0;
    for (std::uint32_t g = 0; g < total_; ++g) {
      if (done_[g] || !ready_[g]) continue;
      ++stuck;
      if (lines.size() >= 12) continue;
      const Op& o = op(g);
      std::string why;
      if (o.kind == OpKind::send) {
        const Channel& c = chans_[chan_of_[g]];
        const std::uint32_t k = seq_of_[g];
        if (!channel_allows(g))
          why = fmt::format("waits for earlier message #{} to rank {} ({})", c.sends_done, c.to,
                            describe(c.sends[c.sends_done]));
        else
          why = fmt::format("message #{} waits for its receive {}, not yet posted", k,
                            describe(c.recvs[k]));
      } else if (is_recv(o.kind)) {
        const Channel& c = chans_[chan_of_[g]];
        const std::uint32_t k = seq_of_[g];
        why = fmt::format("waits for message #{} from rank {}, {}{}", k, c.from, describe(c.sends[k]),
                          done_[c.sends[k]] ? "" : " not yet sent");
      } else if (is_inc(o.kind)) {
        why = fmt::format("waits for switch operation #{} ({} of {} ranks ready)", seq_of_[g],
                          group_ready_[seq_of_[g]], p_.nranks);
      } else {
        why = "ready but not run (executor bug)";
      }
      lines.push_back(fmt::format("  {}: {}", describe(g), why));
    }
    std::string msg = fmt::format(
        "{}: deadlock: {} of {} ops not done, {} ready but blocked{}:", where(), total_ - done_count_,
        total_, stuck, o_.rendezvous ? " (rendezvous sends)" : "");
    for (const auto& l : lines) msg += "\n" + l;
    return Error(Error::Kind::internal, msg);
  }
};

}  // namespace

LocalRunResult run_local(const CollectiveParams& p, const std::vector<RankSchedule>& schedules,
                         std::vector<LocalBuffers>& buffers, const LocalRunOptions& options) {
  LocalRun run(p, schedules, buffers, options);
  return run.run();
}

}  // namespace inc::coll
