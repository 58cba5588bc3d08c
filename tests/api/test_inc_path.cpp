// The Core-INC configuration of a rank (IncPath): environment to worker settings (INC_TIMEOUT
// becomes the worker's deadlines), configuration errors naming the variable, and the plan that
// decides which calls the switch can run.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "api/controller_tree.hpp"
#include "api/inc_path.hpp"

using namespace inc;
using inc::api::IncPath;

namespace {

std::unique_ptr<IncPath> path(std::map<std::string, std::string> vars, int rank = 2, int nranks = 4) {
  return IncPath::from_env(transport::map_env(std::move(vars)), rank, nranks, 0x1234, std::chrono::seconds(42));
}

std::string config_error(std::map<std::string, std::string> vars) {
  try {
    path(std::move(vars));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no configuration error";
  return "";
}

}  // namespace

TEST(IncPath, NoSwitchConfiguredIsNoPath) { EXPECT_EQ(path({}), nullptr); }

TEST(IncPath, EnvironmentBecomesTheWorkersSettings) {
  auto p = path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_JOB", "9"}, {"INC_SWITCH_WINDOW", "8"}});
  ASSERT_NE(p, nullptr);
  const auto& a = p->attachment();
  EXPECT_EQ(a.worker.job, 9u);
  EXPECT_EQ(a.worker.member, 2u);
  EXPECT_EQ(a.worker.switch_ep.str(), "127.0.0.1:7710");
  EXPECT_EQ(a.worker.window, 8u);
  EXPECT_NE(a.worker.session, 0u);
  // INC_TIMEOUT bounds every deadline of the in-network path; the start-up join waits at most
  // INC_SWITCH_JOIN_TIMEOUT (default 10 s) before the job runs on the hosts.
  EXPECT_EQ(a.worker.join_timeout, 10 * sw::kSecond);
  EXPECT_EQ(a.worker.progress_timeout, 42 * sw::kSecond);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_JOIN_TIMEOUT", "2.5"}})->attachment().worker.join_timeout,
            2500 * sw::kMillisecond);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_JOIN_TIMEOUT", "100"}})->attachment().worker.join_timeout,
            42 * sw::kSecond);  // never beyond INC_TIMEOUT
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}})->accumulate_default(), Accumulate::widen);
  EXPECT_FALSE(a.faults.enabled());
  // The seed is mixed with the rank (2 here).
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_FAULT_SEED", "7"}})->attachment().faults.seed,
            7u * 1000003u + 2u);
  EXPECT_NE(a.where.find("127.0.0.1:7710"), std::string::npos) << a.where;
  // INC_SWITCH_NUMERICS=fixed: the deprecated spelling of INC_ACCUMULATE=fixed.
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_NUMERICS", "fixed"}})->accumulate_default(),
            Accumulate::fixed);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_NUMERICS", "fixed"}, {"INC_ACCUMULATE", "fixed"}})
                ->accumulate_default(),
            Accumulate::fixed);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_ACCUMULATE", "reproducible"}})->accumulate_default(),
            Accumulate::reproducible);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}})->attachment().worker.window, 0u);  // controlled
}

TEST(IncPath, BadValuesNameTheVariable) {
  EXPECT_NE(config_error({{"INC_SWITCH", "nowhere"}}).find("INC_SWITCH"), std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_JOB", "0"}}).find("INC_SWITCH_JOB"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_JOIN_TIMEOUT", "soon"}}).find("INC_SWITCH_JOIN_TIMEOUT"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_RTO_MIN_US", "0"}}).find("INC_SWITCH_RTO_MIN_US"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_WINDOW", "-3"}}).find("INC_SWITCH_WINDOW"),
            std::string::npos);
  // Integers are digits only (src/api/env_number.hpp): no sign, no blank; the seed too.
  for (const char* bad : {"+8", " 8", "8 "})
    EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_WINDOW", bad}}).find("INC_SWITCH_WINDOW='"),
              std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_JOB", "+9"}}).find("INC_SWITCH_JOB='+9'"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_FAULT_SEED", "seven"}}).find("INC_FAULT_SEED='seven'"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_NUMERICS", "exact"}}).find("INC_SWITCH_NUMERICS"),
            std::string::npos);
  // The deprecated and the new spelling must agree.
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_SWITCH_NUMERICS", "fixed"}, {"INC_ACCUMULATE", "widen"}})
                .find("contradicts INC_SWITCH_NUMERICS"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_FAULT_LOSS", "1.5"}}).find("INC_FAULT_LOSS"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_TOPOLOGY", "/nonexistent/tree.topo"}}).find("INC_TOPOLOGY"), std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_ACCUMULATE", "wider"}}).find("INC_ACCUMULATE"),
            std::string::npos);
  EXPECT_NE(config_error({{"INC_SWITCH", "1.2.3.4:1"}, {"INC_ACCUMULATE", "auto"}}).find("INC_ACCUMULATE"),
            std::string::npos);
}

TEST(IncPath, AccumulatorPolicyDefaultsToWidenAndFollowsTheEnvironment) {
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}})->accumulate_default(), Accumulate::widen);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_ACCUMULATE", "narrow"}})->accumulate_default(),
            Accumulate::narrow);
  EXPECT_EQ(path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_ACCUMULATE", "WIDE"}})->accumulate_default(),
            Accumulate::wide);
}

TEST(IncPath, PlanSaysWhatTheSwitchCanDoAndWhyNot) {
  auto p = path({{"INC_SWITCH", "127.0.0.1:7710"}});
  EXPECT_TRUE(p->plan(Collective::allreduce, DataType::f32, ReduceOp::sum).ok);
  EXPECT_TRUE(p->plan(Collective::allreduce, DataType::i32, ReduceOp::max).ok);
  EXPECT_TRUE(p->plan(Collective::reduce_scatter, DataType::u32, ReduceOp::avg).ok);
  EXPECT_TRUE(p->plan(Collective::allgather, DataType::f16, ReduceOp::sum).ok);  // replication
  EXPECT_TRUE(p->plan(Collective::broadcast, DataType::u8, ReduceOp::sum).ok);
  EXPECT_TRUE(p->plan(Collective::barrier, DataType::u8, ReduceOp::sum).ok);
  for (DataType t : {DataType::f16, DataType::bf16}) {
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::widen).why.find("rounded once at the root"),
              std::string::npos);
    EXPECT_NE(p->plan(Collective::reduce_scatter, t, ReduceOp::avg, Accumulate::narrow).why.find("each add in a switch rounds"),
              std::string::npos);
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::wide).why.find("4 B/element"),
              std::string::npos);
    EXPECT_TRUE(p->plan(Collective::allreduce, t, ReduceOp::max, Accumulate::narrow).ok);
    EXPECT_FALSE(p->plan(Collective::allreduce, t, ReduceOp::prod, Accumulate::widen).ok);
  }
  for (DataType t : {DataType::i8, DataType::u8}) {
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::widen).why.find("exactly a total"),
              std::string::npos);
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::narrow).why.find("any partial sum"),
              std::string::npos);
    EXPECT_TRUE(p->plan(Collective::reduce_scatter, t, ReduceOp::min, Accumulate::narrow).ok);
  }
  for (DataType t : {DataType::e4m3, DataType::e5m2}) {  // fp8: 1 B/element, every policy
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::widen).why.find("rounded once at the root"),
              std::string::npos);
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::avg, Accumulate::narrow).why.find("1 B/element on every link"),
              std::string::npos);
    EXPECT_NE(p->plan(Collective::allreduce, t, ReduceOp::sum, Accumulate::wide).why.find("4 B/element"),
              std::string::npos);
    EXPECT_TRUE(p->plan(Collective::reduce_scatter, t, ReduceOp::max, Accumulate::narrow).ok);
    EXPECT_FALSE(p->plan(Collective::allreduce, t, ReduceOp::prod, Accumulate::widen).ok);
  }
  EXPECT_NE(p->plan(Collective::allreduce, DataType::i4, ReduceOp::sum, Accumulate::widen).why.find("0.5 B/element"),
            std::string::npos);
  EXPECT_TRUE(p->plan(Collective::allreduce, DataType::i4, ReduceOp::min, Accumulate::narrow).ok);
  auto no = p->plan(Collective::allreduce, DataType::i64, ReduceOp::sum);
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.why.find("i64"), std::string::npos) << no.why;
  no = p->plan(Collective::allreduce, DataType::i32, ReduceOp::prod);
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.why.find("multiply"), std::string::npos) << no.why;
  EXPECT_FALSE(p->plan(Collective::allreduce, DataType::u32, ReduceOp::min).ok);
  EXPECT_FALSE(p->plan(Collective::alltoall, DataType::f32, ReduceOp::sum).ok);
  auto fixed = path({{"INC_SWITCH", "127.0.0.1:7710"}, {"INC_SWITCH_NUMERICS", "fixed"}});
  EXPECT_FALSE(fixed->plan(Collective::allreduce, DataType::f32, ReduceOp::max, fixed->accumulate_default()).ok);
  EXPECT_TRUE(fixed->plan(Collective::allreduce, DataType::f32, ReduceOp::avg, fixed->accumulate_default()).ok);
}

// A tree request may wait for slots as long as the job's timeout, less a margin (a tenth, at
// most 1 s) for the answer to reach rank 0 before it gives up (controller_tree.hpp).
TEST(ControllerTree, TheWaitForSlotsFollowsTheJobsTimeout) {
  using std::chrono::milliseconds;
  EXPECT_EQ(api::tree_wait_ms(milliseconds(60000)), 59000u);
  EXPECT_EQ(api::tree_wait_ms(milliseconds(2000)), 1800u);
  EXPECT_EQ(api::tree_wait_ms(milliseconds(500)), 450u);
  EXPECT_EQ(api::tree_wait_ms(milliseconds(86400000)), 86399000u);
}
