// The engine's event trace: its files (trace.hpp). Written once, when the communicator's
// engine goes away, so nothing here is on the collective's path.
#include "coll/trace.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "coll/schedule.hpp"
#include "inc/types.hpp"

namespace inc::coll {

namespace {

constexpr std::uint32_t kNone = ~std::uint32_t{0};

struct File {
  std::FILE* f = nullptr;
  std::string path;
  File(const std::string& dir, const std::string& name) : f(std::fopen((dir + "/" + name).c_str(), "w")), path(dir + "/" + name) {
    if (!f) throw Error(Error::Kind::config, fmt::format("INC_TRACE: cannot write {}: {}", path, std::strerror(errno)));
  }
  ~File() {
    if (f) std::fclose(f);
  }
  void close() {  // reports a failed write (a full disk) rather than leaving half a file unsaid
    const bool bad = std::ferror(f) != 0;
    const int rc = std::fclose(f);
    f = nullptr;
    if (bad || rc != 0) throw Error(Error::Kind::config, fmt::format("INC_TRACE: writing {} failed", path));
  }
};

std::string_view coll_name(std::uint8_t c) { return c == 0xff ? "" : name(static_cast<Collective>(c)); }
std::string_view algo_name(std::uint8_t a) { return a == 0xff ? "" : name(static_cast<Algorithm>(a)); }
std::string_view kind_name(std::uint8_t k) { return k == 0xff ? "" : name(static_cast<OpKind>(k)); }

void write_csv(const Trace& t, const std::string& dir, const std::string& stem, int rank) {
  File out(dir, stem + ".csv");
  fmt::print(out.f, "# inc engine trace: rank={} events={} dropped={} cap={} clock=CLOCK_MONOTONIC\n", rank,
             t.records().size(), t.dropped(), t.cap());
  fmt::print(out.f, "t_ns,event,comm,seq,coll,algo,op,kind,peer,msg_index,bytes\n");
  for (const TraceRecord& r : t.records()) {
    fmt::print(out.f, "{},{},{},{},{},{},{},{},{},{},{}\n", r.t_ns, name(r.event), r.comm, r.seq, coll_name(r.coll),
               algo_name(r.algo), r.op == kNone ? -1 : static_cast<std::int64_t>(r.op), kind_name(r.kind), r.peer,
               r.msg_index, r.bytes);
  }
  out.close();
}

// Chrome trace event format (chrome://tracing, ui.perfetto.dev): pid = rank; thread 0 the
// collectives, 1 the sends (ready -> written; args: how long it waited for its notice), 2 the
// receives (ready -> last byte), ready notices as instants. Times in us.
void write_json(const Trace& t, const std::string& dir, const std::string& stem, int rank) {
  File out(dir, stem + ".json");
  auto us = [](std::int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); };
  fmt::print(out.f, "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"rank\":{},\"events\":{},\"dropped\":{}}},\n"
                    "\"traceEvents\":[\n", rank, t.records().size(), t.dropped());
  fmt::print(out.f, "{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_name\",\"args\":{{\"name\":\"rank {0}\"}}}}", rank);
  const char* threads[] = {"collectives", "sends", "receives"};
  for (int k = 0; k < 3; ++k)
    fmt::print(out.f, ",\n{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":\"{}\"}}}}",
               rank, k, threads[k]);
  auto span = [&](int tid, const std::string& nm, std::int64_t t0, std::int64_t t1, const std::string& args) {
    fmt::print(out.f, ",\n{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"name\":\"{}\",\"ts\":{},\"dur\":{},\"args\":{{{}}}}}", rank,
               tid, nm, us(t0), us(t1 - t0), args);
  };
  using CollKey = std::pair<std::uint32_t, std::uint64_t>;
  using MsgKey = std::tuple<std::uint32_t, std::uint64_t, std::int32_t, std::uint32_t>;  // comm, seq, peer, index
  std::map<CollKey, const TraceRecord*> colls;
  std::map<MsgKey, const TraceRecord*> sends, recvs;  // op_ready
  std::map<MsgKey, std::int64_t> posted;
  for (const TraceRecord& r : t.records()) {
    const MsgKey m{r.comm, r.seq, r.peer, r.msg_index};
    switch (r.event) {
      case TraceEvent::coll_start:
        colls[{r.comm, r.seq}] = &r;
        break;
      case TraceEvent::coll_end:
      case TraceEvent::coll_failed:
        if (auto it = colls.find({r.comm, r.seq}); it != colls.end()) {
          span(0, fmt::format("{} {} #{}{}", coll_name(r.coll), algo_name(r.algo), r.seq,
                              r.event == TraceEvent::coll_failed ? " (failed)" : ""),
               it->second->t_ns, r.t_ns, fmt::format("\"comm\":{},\"bytes\":{}", r.comm, it->second->bytes));
          colls.erase(it);
        }
        break;
      case TraceEvent::op_ready:
        if (r.kind == static_cast<std::uint8_t>(OpKind::send)) sends[m] = &r;
        else if (r.kind == static_cast<std::uint8_t>(OpKind::recv) || r.kind == static_cast<std::uint8_t>(OpKind::recv_reduce))
          recvs[m] = &r;
        break;
      case TraceEvent::send_posted:
        posted[m] = r.t_ns;
        break;
      case TraceEvent::send_done:
        if (auto it = sends.find(m); it != sends.end()) {
          const auto p = posted.find(m);
          const std::int64_t wait = p == posted.end() ? 0 : p->second - it->second->t_ns;
          span(1, fmt::format("send to {} #{}", r.peer, r.msg_index), it->second->t_ns, r.t_ns,
               fmt::format("\"seq\":{},\"bytes\":{},\"waited_for_notice_us\":{}", r.seq, r.bytes, us(wait)));
          sends.erase(it);
          if (p != posted.end()) posted.erase(p);
        }
        break;
      case TraceEvent::msg_end:
        if (auto it = recvs.find(m); it != recvs.end()) {
          span(2, fmt::format("recv from {} #{}", r.peer, r.msg_index), it->second->t_ns, r.t_ns,
               fmt::format("\"seq\":{},\"bytes\":{}", r.seq, r.bytes));
          recvs.erase(it);
        }
        break;
      case TraceEvent::notice_told:
      case TraceEvent::notice_arrived:
        fmt::print(out.f, ",\n{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{},\"name\":\"{} {} #{}\",\"ts\":{},"
                          "\"args\":{{\"seq\":{}}}}}",
                   rank, r.event == TraceEvent::notice_told ? 2 : 1, name(r.event), r.peer, r.msg_index, us(r.t_ns), r.seq);
        break;
      default:
        break;
    }
  }
  fmt::print(out.f, "\n]}}\n");
  out.close();
}

}  // namespace

const char* name(TraceEvent e) {
  switch (e) {
    case TraceEvent::coll_start: return "coll_start";
    case TraceEvent::coll_end: return "coll_end";
    case TraceEvent::coll_failed: return "coll_failed";
    case TraceEvent::op_ready: return "op_ready";
    case TraceEvent::send_posted: return "send_posted";
    case TraceEvent::notice_told: return "notice_told";
    case TraceEvent::notice_arrived: return "notice_arrived";
    case TraceEvent::msg_header: return "msg_header";
    case TraceEvent::msg_end: return "msg_end";
    case TraceEvent::send_done: return "send_done";
  }
  return "?";
}

Trace::Trace(std::size_t cap) : cap_(cap) { records_.reserve(cap); }

void Trace::write(const std::string& dir, const std::string& stem, int rank) const {
  write_csv(*this, dir, stem, rank);
  write_json(*this, dir, stem, rank);
}

std::string Trace::check_dir(const std::string& dir) {
  if (dir.empty()) return "an empty directory name";
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) return fmt::format("cannot create {}: {}", dir, std::strerror(errno));
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return fmt::format("cannot write in {}: {}", dir, std::strerror(errno));
  return "";
}

}  // namespace inc::coll
