// Launcher environment detection with fake environments: every launcher, nesting, and every
// error case; plus connect_store hosting / connecting.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "api/bootstrap.hpp"

using namespace inc::api;
using inc::Error;
using inc::transport::map_env;
using Env = std::map<std::string, std::string>;
using std::chrono::milliseconds;

namespace {

BootstrapInfo detect(const Env& e) { return detect_bootstrap(map_env(e)); }

// Expects a config error whose message contains every one of `parts`.
void expect_config_error(const Env& e, std::initializer_list<std::string> parts) {
  try {
    auto info = detect(e);
    ADD_FAILURE() << "expected a config error, got rank " << info.rank << " of " << info.world_size
                  << " from " << info.source;
  } catch (const Error& err) {
    EXPECT_EQ(static_cast<int>(err.kind()), static_cast<int>(Error::Kind::config)) << err.what();
    for (auto& p : parts)
      EXPECT_NE(std::string(err.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << err.what();
  }
}

const Env kIncLaunch = {
    {"INC_RANK", "1"},       {"INC_WORLD_SIZE", "4"},          {"INC_LOCAL_RANK", "1"},
    {"INC_LOCAL_SIZE", "4"}, {"INC_STORE", "127.0.0.1:29500"}, {"INC_STORE_HOST", "0"}};

Env with(Env base, const Env& extra) {
  for (auto& [k, v] : extra) base[k] = v;
  return base;
}
Env without(Env base, const std::string& key) {
  base.erase(key);
  return base;
}

}  // namespace

TEST(Bootstrap, IncLaunch) {
  auto i = detect(kIncLaunch);
  EXPECT_EQ(i.source, "inc");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 4);
  EXPECT_EQ(i.store_host, "127.0.0.1");
  EXPECT_EQ(i.store_port, 29500);
  EXPECT_FALSE(i.host_store);
  EXPECT_EQ(i.store_source, "INC_STORE");
  // inc launch sets INC_STORE_HOST=0 because it hosts the store; without it rank 0 hosts.
  EXPECT_FALSE(detect(with(kIncLaunch, {{"INC_RANK", "0"}})).host_store);
  EXPECT_TRUE(detect(with(without(kIncLaunch, "INC_STORE_HOST"), {{"INC_RANK", "0"}})).host_store);
  EXPECT_FALSE(detect(without(kIncLaunch, "INC_STORE_HOST")).host_store);  // rank 1
  EXPECT_TRUE(detect(with(kIncLaunch, {{"INC_RANK", "0"}, {"INC_STORE_HOST", "yes"}})).host_store);
  auto v6 = detect(with(kIncLaunch, {{"INC_STORE", "[::1]:1234"}}));
  EXPECT_EQ(v6.store_host, "::1");
  EXPECT_EQ(v6.store_port, 1234);
}

TEST(Bootstrap, LocalRankAndSizeAreOptional) {
  auto i = detect(without(without(kIncLaunch, "INC_LOCAL_RANK"), "INC_LOCAL_SIZE"));
  EXPECT_EQ(i.local_rank, -1);
  EXPECT_EQ(i.local_size, -1);
}

TEST(Bootstrap, OpenMpiWithIncStoreRankZeroHosts) {
  Env e = {{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "4"},
           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
           {"INC_STORE", "node1:29500"}};
  auto i = detect(e);
  EXPECT_EQ(i.source, "ompi");
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.store_host, "node1");
  EXPECT_TRUE(i.host_store);
  EXPECT_FALSE(detect(with(e, {{"OMPI_COMM_WORLD_RANK", "3"}})).host_store);
  EXPECT_FALSE(detect(with(e, {{"INC_STORE_HOST", "0"}})).host_store);
}

TEST(Bootstrap, OpenMpiWithMasterAddr) {
  auto i = detect({{"OMPI_COMM_WORLD_RANK", "2"},
                   {"OMPI_COMM_WORLD_SIZE", "3"},
                   {"MASTER_ADDR", "10.0.0.5"},
                   {"MASTER_PORT", "29500"}});
  EXPECT_EQ(i.source, "ompi");
  EXPECT_EQ(i.store_host, "10.0.0.5");
  EXPECT_EQ(i.store_port, 29500);  // not torchrun: nobody else holds MASTER_PORT
  EXPECT_EQ(i.store_source, "MASTER_ADDR/MASTER_PORT");
}

TEST(Bootstrap, OpenMpiWithoutStoreSaysWhatToSet) {
  expect_config_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                      {"ompi", "OMPI_COMM_WORLD_RANK=1", "INC_STORE", "MASTER_ADDR"});
  // An empty INC_STORE counts as unset.
  expect_config_error(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"INC_STORE", ""}},
      {"INC_STORE"});
}

TEST(Bootstrap, Pmi) {
  auto i = detect({{"PMI_RANK", "5"},
                   {"PMI_SIZE", "8"},
                   {"MPI_LOCALRANKID", "1"},
                   {"MPI_LOCALNRANKS", "4"},
                   {"INC_STORE", "head:4000"}});
  EXPECT_EQ(i.source, "pmi");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world_size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 4);
}

TEST(Bootstrap, SlurmDerivesStoreFromStepNodelist) {
  Env e = {{"SLURM_PROCID", "5"},
           {"SLURM_NTASKS", "8"},
           {"SLURM_LOCALID", "1"},
           {"SLURM_NODEID", "1"},
           {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
           {"SLURM_STEP_NODELIST", "gpu[07-08]"},
           {"SLURM_JOB_ID", "1234"},
           {"SLURM_STEP_ID", "0"}};
  auto i = detect(e);
  EXPECT_EQ(i.source, "slurm");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world_size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 4);
  EXPECT_EQ(i.store_host, "gpu07");
  EXPECT_EQ(i.store_port, slurm_store_port(1234, 0));
  EXPECT_EQ(i.store_port, 10000 + (1234 * 16) % 20000);
  EXPECT_FALSE(i.host_store);
  // Rank 0 on the first node hosts.
  auto r0 =
      detect(with(e, {{"SLURM_PROCID", "0"}, {"SLURMD_NODENAME", "gpu07"}, {"SLURM_NODEID", "0"}}));
  EXPECT_TRUE(r0.host_store);
  // Uneven nodes: "3(x2),2" -> node 2 has 2 tasks.
  auto uneven = detect(with(
      e, {{"SLURM_NTASKS", "8"}, {"SLURM_NODEID", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "3(x2),2"}}));
  EXPECT_EQ(uneven.local_size, 2);
  // INC_STORE wins over the derived address.
  EXPECT_EQ(detect(with(e, {{"INC_STORE", "login:9999"}})).store_host, "login");
  // Older Slurm: SLURM_NPROCS, SLURM_STEPID.
  auto old = detect(with(without(without(e, "SLURM_NTASKS"), "SLURM_STEP_ID"),
                         {{"SLURM_NPROCS", "8"}, {"SLURM_STEPID", "3"}}));
  EXPECT_EQ(old.world_size, 8);
  EXPECT_EQ(old.store_port, slurm_store_port(1234, 3));
}

TEST(Bootstrap, SlurmErrors) {
  Env e = {{"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "2"},
           {"SLURM_STEP_NODELIST", "n1"},
           {"SLURM_JOB_ID", "7"},
           {"SLURM_STEP_ID", "0"}};
  expect_config_error(without(e, "SLURM_STEP_ID"), {"Slurm", "INC_STORE", "SLURM_STEP_ID"});
  expect_config_error(without(e, "SLURM_STEP_NODELIST"), {"SLURM_STEP_NODELIST"});
  expect_config_error(with(e, {{"SLURMD_NODENAME", "n2"}}), {"n2", "n1", "INC_STORE"});
  expect_config_error(with(e, {{"SLURM_JOB_ID", "x7"}}), {"SLURM_JOB_ID='x7'"});
  expect_config_error(with(e, {{"SLURM_STEP_NODELIST", "n[01-02"}}),
                      {"SLURM_STEP_NODELIST='n[01-02'"});
  expect_config_error(with(e, {{"SLURM_NODEID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x"}}),
                      {"SLURM_STEP_TASKS_PER_NODE='2(x'"});
  expect_config_error(with(e, {{"SLURM_NODEID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}}),
                      {"SLURM_NODEID=3"});
  expect_config_error(without(e, "SLURM_NTASKS"), {"SLURM_PROCID=0", "SLURM_NPROCS"});
}

TEST(Bootstrap, SlurmFirstHost) {
  EXPECT_EQ(slurm_first_host("node[01-04,7],gpu5", "V"), "node01");
  EXPECT_EQ(slurm_first_host("a1,a2", "V"), "a1");
  EXPECT_EQ(slurm_first_host("single", "V"), "single");
  EXPECT_EQ(slurm_first_host("rack[2-3]-n[009-010]", "V"), "rack2-n009");
  EXPECT_EQ(slurm_first_host("n[5]", "V"), "n5");
  for (const char* bad : {"", "n[", "n[a-b]", "n]1", ",n1", "n[]"})
    EXPECT_THROW(slurm_first_host(bad, "V"), Error) << bad;
}

TEST(Bootstrap, Torchrun) {
  Env e = {{"RANK", "3"},
           {"WORLD_SIZE", "4"},
           {"LOCAL_RANK", "1"},
           {"LOCAL_WORLD_SIZE", "2"},
           {"GROUP_RANK", "1"},
           {"TORCHELASTIC_RUN_ID", "abc"},
           {"MASTER_ADDR", "node0"},
           {"MASTER_PORT", "29500"},
           {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  auto i = detect(e);
  EXPECT_EQ(i.source, "torchrun");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.store_host, "node0");
  EXPECT_EQ(i.store_port, 29501);  // torch's agent store holds MASTER_PORT
  EXPECT_FALSE(i.host_store);
  EXPECT_TRUE(detect(with(e, {{"RANK", "0"}})).host_store);
  EXPECT_EQ(detect(without(e, "TORCHELASTIC_USE_AGENT_STORE")).store_port, 29500);
  expect_config_error(with(e, {{"MASTER_PORT", "65535"}}), {"MASTER_PORT", "INC_STORE"});
}

TEST(Bootstrap, TorchrunInsideSrunUsesTorchrunRanks) {
  // srun starts one torchrun per node; SLURM_PROCID is the node's task, RANK the worker's.
  auto i = detect({{"SLURM_PROCID", "1"},
                   {"SLURM_NTASKS", "2"},
                   {"RANK", "5"},
                   {"WORLD_SIZE", "8"},
                   {"TORCHELASTIC_RUN_ID", "j"},
                   {"MASTER_ADDR", "n0"},
                   {"MASTER_PORT", "29500"}});
  EXPECT_EQ(i.source, "torchrun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world_size, 8);
}

TEST(Bootstrap, NestedLaunchersInsideSbatchIgnoreStaleSlurmValues) {
  // inc launch inside an sbatch script: the batch step's SLURM_PROCID=0 reaches every rank,
  // sometimes without SLURM_NTASKS.
  auto i = detect(with(kIncLaunch, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}));
  EXPECT_EQ(i.source, "inc");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(detect(with(kIncLaunch, {{"SLURM_PROCID", "0"}})).rank, 1);
  // mpirun inside sbatch.
  auto m = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"},
                   {"INC_STORE", "n1:5"}});
  EXPECT_EQ(m.source, "ompi");
  EXPECT_EQ(m.rank, 3);
}

TEST(Bootstrap, ConflictingSourcesNameBothVariables) {
  expect_config_error({{"INC_RANK", "1"},
                       {"INC_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_RANK", "2"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"INC_STORE", "h:1"}},
                      {"INC_RANK=1", "OMPI_COMM_WORLD_RANK=2"});
  expect_config_error({{"INC_RANK", "1"},
                       {"INC_WORLD_SIZE", "4"},
                       {"PMI_RANK", "1"},
                       {"PMI_SIZE", "8"},
                       {"INC_STORE", "h:1"}},
                      {"INC_WORLD_SIZE=4", "PMI_SIZE=8"});
  expect_config_error({{"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"RANK", "1"},
                       {"WORLD_SIZE", "2"},
                       {"INC_STORE", "h:1"}},
                      {"OMPI_COMM_WORLD_RANK=0", "RANK=1"});
  // Agreeing sources are fine.
  auto i = detect({{"INC_RANK", "2"},
                   {"INC_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_RANK", "2"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"INC_STORE", "h:1"}});
  EXPECT_EQ(i.source, "inc");
}

TEST(Bootstrap, SingleProcessWithoutLauncher) {
  auto i = detect({});
  EXPECT_EQ(i.source, "single");
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world_size, 1);
  EXPECT_TRUE(i.host_store);
  EXPECT_EQ(i.store_port, 0);
  // A one-rank launcher job needs no store address either.
  auto one = detect({{"INC_RANK", "0"}, {"INC_WORLD_SIZE", "1"}});
  EXPECT_EQ(one.source, "inc");
  EXPECT_TRUE(one.host_store);
}

TEST(Bootstrap, BadValuesNameVariableAndValue) {
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "abc"}}), {"INC_RANK='abc'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "-1"}}), {"INC_RANK='-1'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "1.0"}}), {"INC_RANK='1.0'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", " 1"}}), {"INC_RANK=' 1'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "+1"}}), {"INC_RANK='+1'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "-0"}}), {"INC_RANK='-0'"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "99999999999999999999"}}), {"INC_RANK"});
  expect_config_error(with(kIncLaunch, {{"INC_RANK", "4"}}), {"INC_RANK=4", "INC_WORLD_SIZE=4"});
  expect_config_error(with(kIncLaunch, {{"INC_WORLD_SIZE", "0"}}), {"INC_WORLD_SIZE='0'"});
  expect_config_error(without(kIncLaunch, "INC_WORLD_SIZE"), {"INC_RANK=1", "INC_WORLD_SIZE"});
  expect_config_error(without(kIncLaunch, "INC_RANK"), {"INC_WORLD_SIZE=4", "INC_RANK"});
  expect_config_error(with(kIncLaunch, {{"INC_LOCAL_RANK", "4"}}),
                      {"INC_LOCAL_RANK=4", "INC_LOCAL_SIZE=4"});
  expect_config_error(with(kIncLaunch, {{"INC_LOCAL_SIZE", "5"}}),
                      {"INC_LOCAL_SIZE=5", "INC_WORLD_SIZE=4"});
  expect_config_error(with(kIncLaunch, {{"INC_LOCAL_RANK", "x"}}), {"INC_LOCAL_RANK='x'"});
  expect_config_error(with(kIncLaunch, {{"INC_STORE", "127.0.0.1"}}), {"INC_STORE='127.0.0.1'"});
  expect_config_error(with(kIncLaunch, {{"INC_STORE", "h:70000"}}), {"INC_STORE", "70000"});
  expect_config_error(with(kIncLaunch, {{"INC_STORE", "h:0"}}), {"INC_STORE"});
  expect_config_error(with(kIncLaunch, {{"INC_STORE_HOST", "maybe"}}), {"INC_STORE_HOST='maybe'"});
  Env mpi = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  expect_config_error(with(mpi, {{"MASTER_ADDR", "h"}}), {"MASTER_ADDR=h", "MASTER_PORT"});
  expect_config_error(with(mpi, {{"MASTER_PORT", "1"}}), {"MASTER_PORT=1", "MASTER_ADDR"});
  expect_config_error(with(mpi, {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}}),
                      {"MASTER_PORT", "'http'"});
  expect_config_error(with(mpi, {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}}), {"MASTER_PORT"});
  expect_config_error(with(mpi, {{"MASTER_ADDR", "a b"}, {"MASTER_PORT", "1"}}),
                      {"MASTER_ADDR='a b'"});
  expect_config_error(with(mpi, {{"OMPI_COMM_WORLD_SIZE", "two"}}), {"OMPI_COMM_WORLD_SIZE='two'"});
  expect_config_error({{"PMI_RANK", "0"}}, {"PMI_RANK=0", "PMI_SIZE"});
  expect_config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-3"}},
                      {"LOCAL_RANK='-3'"});
}

TEST(ConnectStore, SingleProcessHostsAnEphemeralStore) {
  auto conn = connect_store(detect({}), milliseconds(10000));
  ASSERT_TRUE(conn.server);
  ASSERT_TRUE(conn.client);
  conn.client->set("k", "v");
  EXPECT_EQ(conn.server->peek("k"), "v");
}

TEST(ConnectStore, RankZeroHostsAndOthersConnect) {
  int port;
  {
    auto probe = inc::transport::listen_tcp("127.0.0.1", 0);
    port = probe.port;
  }
  std::string store = "127.0.0.1:" + std::to_string(port);
  auto r0 = detect({{"INC_RANK", "0"}, {"INC_WORLD_SIZE", "2"}, {"INC_STORE", store}});
  auto r1 = detect({{"INC_RANK", "1"}, {"INC_WORLD_SIZE", "2"}, {"INC_STORE", store}});
  ASSERT_TRUE(r0.host_store);
  ASSERT_FALSE(r1.host_store);
  auto c0 = connect_store(r0, milliseconds(10000));
  auto c1 = connect_store(r1, milliseconds(10000));
  EXPECT_TRUE(c0.server);
  EXPECT_FALSE(c1.server);
  EXPECT_EQ(c0.server->port(), port);
  c1.client->set("from1", "x");
  EXPECT_EQ(c0.client->get("from1", milliseconds(10000)), "x");
}

TEST(ConnectStore, HostingANonLocalAddressIsAConfigError) {
  auto info =
      detect({{"INC_RANK", "0"}, {"INC_WORLD_SIZE", "2"}, {"INC_STORE", "192.0.2.1:29500"}});
  try {
    connect_store(info, milliseconds(1000));
    ADD_FAILURE() << "expected a config error";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(Error::Kind::config));
    EXPECT_NE(std::string(e.what()).find("192.0.2.1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("INC_STORE_HOST=0"), std::string::npos) << e.what();
  }
}

TEST(ConnectStore, BusyPortNamesTheSource) {
  auto busy = inc::transport::listen_tcp("127.0.0.1", 0);
  auto info = detect({{"INC_RANK", "0"},
                      {"INC_WORLD_SIZE", "2"},
                      {"INC_STORE", "127.0.0.1:" + std::to_string(busy.port)}});
  try {
    connect_store(info, milliseconds(1000));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("INC_STORE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(busy.port)), std::string::npos);
  }
}
