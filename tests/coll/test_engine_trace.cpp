// The engine's event trace (src/coll/trace.hpp, executor_trace.cpp): three Engines over
// socket pairs in one thread run a ring Allreduce whose messages wait for ready notices; each
// rank's trace must hold every event of every message once, in a consistent order, under keys
// that match across ranks. And the recorder's cap, its files and an unwritable directory.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "coll/executor.hpp"
#include "coll/trace.hpp"
#include "tests/coll/engine_mesh.hpp"

using namespace inc;
using namespace inc::coll;

namespace {

constexpr int kRanks = 3;

// kRanks engines, each recording up to `cap` events (0: no trace).
struct Mesh : test::EngineMesh {
  explicit Mesh(std::size_t cap) : EngineMesh(kRanks) {
    if (cap)
      for (auto& x : e) x->enable_trace(cap);
  }
  // One ring Allreduce of `count` floats on every rank; true if every rank got the sum.
  bool allreduce(std::uint64_t count) {
    std::vector<std::vector<float>> in(kRanks), out(kRanks);
    std::shared_ptr<CollOp> op[kRanks];
    for (int r = 0; r < kRanks; ++r) {
      in[r].assign(count, static_cast<float>(r + 1));
      out[r].assign(count, 0.0f);
      CollectiveParams p;
      p.coll = Collective::allreduce;
      p.algo = Algorithm::ring;
      p.nranks = kRanks;
      p.rank = r;
      p.count = count;
      p.dtype = DataType::f32;
      op[r] = e[r]->start(0, p, in[r].data(), out[r].data(), "test");
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // a hang, not a speed check
    bool all = false;
    while (!all && std::chrono::steady_clock::now() < until) {
      all = true;
      for (int r = 0; r < kRanks; ++r) all = e[r]->test(*op[r]) && all;
    }
    if (!all) return false;
    for (int r = 0; r < kRanks; ++r)
      for (float x : out[r])
        if (x != 6.0f) return false;
    return true;
  }
};

using Msg = std::tuple<std::uint64_t, int, int, std::uint32_t>;  // seq, sender, receiver, msg_index

// (sender, receiver, index) of every record of event `ev` in every rank's trace, each once.
std::multiset<Msg> messages(const Mesh& m, TraceEvent ev) {
  std::multiset<Msg> out;
  for (int r = 0; r < kRanks; ++r)
    for (const TraceRecord& x : m.e[r]->trace()->records()) {
      if (x.event != ev) continue;
      const bool sender_side = ev == TraceEvent::send_posted || ev == TraceEvent::send_done ||
                               ev == TraceEvent::notice_arrived;
      out.insert({x.seq, sender_side ? r : x.peer, sender_side ? x.peer : r, x.msg_index});
    }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(EngineTrace, RecordsEveryMessageInOrderWithMatchingKeys) {
  Mesh m(Trace::kDefaultCap);
  const std::uint64_t count = 3 * 64 * 1024;  // 768 KiB: ring chunks of 256 KiB wait for notices
  ASSERT_TRUE(m.allreduce(count));
  ASSERT_TRUE(m.allreduce(count));
  for (int r = 0; r < kRanks; ++r) {
    const auto& rec = m.e[r]->trace()->records();
    ASSERT_FALSE(rec.empty());
    EXPECT_EQ(m.e[r]->trace()->dropped(), 0u);
    // Per collective: starts first, ends last; the clock never goes back.
    std::map<std::uint64_t, int> state;  // seq -> 0 none, 1 started, 2 ended
    for (std::size_t k = 0; k < rec.size(); ++k) {
      const TraceRecord& x = rec[k];
      if (k) {
        EXPECT_GE(x.t_ns, rec[k - 1].t_ns) << "rank " << r << " record " << k;
      }
      if (x.event == TraceEvent::coll_start) {
        EXPECT_EQ(state[x.seq], 0) << "rank " << r << " seq " << x.seq << " started twice";
        EXPECT_EQ(x.bytes, count * 4);
        EXPECT_EQ(x.algo, static_cast<std::uint8_t>(Algorithm::ring));
        state[x.seq] = 1;
      } else if (x.event == TraceEvent::coll_end) {
        EXPECT_EQ(state[x.seq], 1) << "rank " << r << " seq " << x.seq;
        state[x.seq] = 2;
      } else if (x.event == TraceEvent::op_ready || x.event == TraceEvent::send_posted ||
                 x.event == TraceEvent::send_done || x.event == TraceEvent::notice_told) {
        EXPECT_EQ(state[x.seq], 1) << "rank " << r << ": " << name(x.event) << " outside its collective";
      }
    }
    EXPECT_EQ(state.size(), 2u);
    for (auto [seq, s] : state) EXPECT_EQ(s, 2) << "rank " << r << " seq " << seq;
    // Per send: ready, its notice, posted, done; per receive: ready, notice told, header, end.
    std::map<std::tuple<std::uint64_t, int, std::uint32_t, bool>, std::string> seen;  // seq, peer, idx, sending
    for (const TraceRecord& x : rec) {
      char c = 0;
      bool sending = true;
      switch (x.event) {
        case TraceEvent::op_ready:
          if (x.kind == static_cast<std::uint8_t>(OpKind::send)) c = 'R';
          else if (x.kind == static_cast<std::uint8_t>(OpKind::recv) || x.kind == static_cast<std::uint8_t>(OpKind::recv_reduce))
            c = 'r', sending = false;
          break;
        case TraceEvent::notice_arrived: c = 'N'; break;
        case TraceEvent::send_posted: c = 'P'; break;
        case TraceEvent::send_done: c = 'D'; break;
        case TraceEvent::notice_told: c = 't', sending = false; break;
        case TraceEvent::msg_header: c = 'h', sending = false; break;
        case TraceEvent::msg_end: c = 'e', sending = false; break;
        default: break;
      }
      if (c) seen[{x.seq, x.peer, x.msg_index, sending}] += c;
    }
    ASSERT_FALSE(seen.empty());
    for (const auto& [k, s] : seen) {
      const auto& [seq, peer, idx, sending] = k;
      // The notice may come before the send is ready (the receiver is a step ahead) or after.
      if (sending) {
        EXPECT_TRUE(s == "RNPD" || s == "NRPD") << "rank " << r << " seq " << seq << " to " << peer << " #" << idx << ": " << s;
      } else {
        EXPECT_EQ(s, "rthe") << "rank " << r << " seq " << seq << " from " << peer << " #" << idx;
      }
    }
  }
  // Across ranks: every message posted is received, every notice told arrives, same keys.
  const auto posted = messages(m, TraceEvent::send_posted);
  EXPECT_EQ(posted.size(), 2u * kRanks * 2 * (kRanks - 1));  // 2 collectives, 2(p-1) sends per rank
  EXPECT_EQ(messages(m, TraceEvent::send_done), posted);
  EXPECT_EQ(messages(m, TraceEvent::msg_header), posted);
  EXPECT_EQ(messages(m, TraceEvent::msg_end), posted);
  EXPECT_EQ(messages(m, TraceEvent::notice_told), posted);
  EXPECT_EQ(messages(m, TraceEvent::notice_arrived), posted);
}

TEST(EngineTrace, SmallMessagesHaveNoNotices) {
  Mesh m(Trace::kDefaultCap);
  ASSERT_TRUE(m.allreduce(3 * 1024));  // 4 KiB chunks: eager
  EXPECT_TRUE(messages(m, TraceEvent::notice_told).empty());
  EXPECT_TRUE(messages(m, TraceEvent::notice_arrived).empty());
  EXPECT_EQ(messages(m, TraceEvent::msg_end), messages(m, TraceEvent::send_posted));
  EXPECT_EQ(messages(m, TraceEvent::send_posted).size(), 1u * kRanks * 2 * (kRanks - 1));
}

TEST(EngineTrace, OffByDefault) {
  Mesh m(0);
  ASSERT_TRUE(m.allreduce(3 * 1024));
  for (auto& e : m.e) {
    EXPECT_EQ(e->trace(), nullptr);
    EXPECT_FALSE(e->write_trace("/nonexistent", "rank"));
  }
}

TEST(EngineTrace, CapKeepsTheFirstEventsAndCountsTheRest) {
  Mesh m(10);
  ASSERT_TRUE(m.allreduce(3 * 64 * 1024));  // the collective loses nothing
  for (int r = 0; r < kRanks; ++r) {
    const Trace& t = *m.e[r]->trace();
    EXPECT_EQ(t.records().size(), 10u);
    EXPECT_GT(t.dropped(), 0u);
    EXPECT_EQ(t.records().front().event, TraceEvent::coll_start);
  }
  char dir[] = "/tmp/inc-trace-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ASSERT_TRUE(m.e[1]->write_trace(dir, "rank-1"));
  const std::string csv = slurp(std::string(dir) + "/rank-1.csv");
  const std::string json = slurp(std::string(dir) + "/rank-1.json");
  const auto dropped = m.e[1]->trace()->dropped();
  EXPECT_NE(csv.find("rank=1 events=10 dropped=" + std::to_string(dropped) + " cap=10"), std::string::npos) << csv;
  std::size_t lines = 0;
  for (char c : csv) lines += c == '\n';
  EXPECT_EQ(lines, 2u + 10u);  // the '#' line, the column names, the records
  EXPECT_NE(csv.find(",coll_start,0,0,allreduce,ring,"), std::string::npos) << csv;
  EXPECT_NE(json.find("\"dropped\":" + std::to_string(dropped)), std::string::npos) << json;
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  for (const char* f : {"/rank-1.csv", "/rank-1.json"}) ::unlink((std::string(dir) + f).c_str());
  ::rmdir(dir);
}

TEST(EngineTrace, UnwritableDirectoryIsAClearErrorAndLosesNothing) {
  Mesh m(Trace::kDefaultCap);
  ASSERT_TRUE(m.allreduce(3 * 64 * 1024));
  EXPECT_NE(Trace::check_dir("/proc/inc-trace-test"), "");
  EXPECT_NE(Trace::check_dir("/dev/null"), "");  // not a directory
  EXPECT_EQ(Trace::check_dir("/tmp"), "");
  try {
    m.e[0]->write_trace("/proc/inc-trace-test", "rank-0");
    FAIL() << "wrote a trace into /proc";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config);
    EXPECT_NE(std::string(e.what()).find("INC_TRACE: cannot write /proc/inc-trace-test/rank-0.csv"), std::string::npos)
        << e.what();
  }
  // The engine goes on: another collective, traced too.
  const auto before = m.e[0]->trace()->records().size();
  ASSERT_TRUE(m.allreduce(3 * 64 * 1024));
  EXPECT_GT(m.e[0]->trace()->records().size(), before);
}
