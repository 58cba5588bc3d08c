/* The C ABI from a C program: run by `inc launch` (see CMakeLists.txt). Exits non-zero on
 * the first wrong result, printing what went wrong. Every collective is called, blocking and
 * not, and several distinct error codes are checked (invalid argument, config, mismatch or
 * peer failure), on the hosts and through a switch (`c_abi switch`, `c_abi mismatch inc`, and
 * `c_abi lossy` while datagrams are lost). The extended report's checks are c_abi_report.c's
 * (also `c_abi tuning` under INC_TUNING and `c_abi edge [HANDLER]` under `inc launch --edge`). */
#include <inc/inc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_abi_check.h"

enum { N = 1001, MAXR = 64 };

static int collectives(inc_comm_t comm, int rank, int size) {
  static int in[N], out[N], big[MAXR * 4], shard[4];
  for (int i = 0; i < N; ++i) in[i] = rank + i;
  CHECK(inc_allreduce(in, out, N, INC_I32, INC_SUM, comm));
  for (int i = 0; i < N; ++i)
    if (out[i] != size * i + size * (size - 1) / 2) FAIL("allreduce: element %d is %d", i, out[i]);

  /* reduce_scatter: block r of every rank's input is r*10 + k; rank r's shard sums them. */
  for (int r = 0; r < size; ++r)
    for (int k = 0; k < 4; ++k) big[r * 4 + k] = r * 10 + k;
  CHECK(inc_reduce_scatter(big, shard, 4, INC_I32, INC_SUM, comm));
  for (int k = 0; k < 4; ++k)
    if (shard[k] != size * (rank * 10 + k)) FAIL("reduce_scatter: element %d is %d", k, shard[k]);

  /* Blocking allgather. */
  int mine2[2] = {rank, -rank}, all2[MAXR * 2];
  CHECK(inc_allgather(mine2, all2, 2, INC_I32, comm));
  for (int r = 0; r < size; ++r)
    if (all2[2 * r] != r || all2[2 * r + 1] != -r) FAIL("allgather: block %d is %d %d", r, all2[2 * r], all2[2 * r + 1]);

  /* alltoall: rank r sends r*100 + d to rank d. */
  int to[MAXR], from[MAXR];
  for (int d = 0; d < size; ++d) to[d] = rank * 100 + d;
  CHECK(inc_alltoall(to, from, 1, INC_I32, comm));
  for (int s = 0; s < size; ++s)
    if (from[s] != s * 100 + rank) FAIL("alltoall: from rank %d got %d", s, from[s]);

  int b = rank == size - 1 ? 77 : 0;
  CHECK(inc_broadcast(&b, &b, 1, INC_I32, size - 1, comm));
  if (b != 77) FAIL("broadcast: got %d", b);
  return 0;
}

static int nonblocking(inc_comm_t comm, int rank, int size) {
  /* Every non-blocking call at once, completed in reverse order, some by inc_test. */
  double mine = rank, all[MAXR];
  long long x = rank + 1, sum = 0;
  float rs_in[MAXR], rs_out = 0;
  int a2a_in[MAXR], a2a_out[MAXR], bc = rank == 0 ? 5 : -1;
  for (int r = 0; r < size; ++r) rs_in[r] = (float)(r + rank), a2a_in[r] = rank;
  inc_request_t req[6];
  CHECK(inc_iallgather(&mine, all, 1, INC_F64, comm, &req[0]));
  CHECK(inc_iallreduce(&x, &sum, 1, INC_I64, INC_SUM, comm, &req[1]));
  CHECK(inc_ireduce_scatter(rs_in, &rs_out, 1, INC_F32, INC_MAX, comm, &req[2]));
  CHECK(inc_ialltoall(a2a_in, a2a_out, 1, INC_I32, comm, &req[3]));
  CHECK(inc_ibroadcast(&bc, &bc, 1, INC_I32, 0, comm, &req[4]));
  CHECK(inc_ibarrier(comm, &req[5]));
  for (int k = 5; k >= 3; --k) CHECK(inc_wait(req[k]));
  for (int k = 2; k >= 0; --k) {
    int done = 0;
    while (!done) CHECK(inc_test(req[k], &done));
  }
  /* Completion is idempotent: the requests are still valid and report success again. */
  for (int k = 0; k < 6; ++k) {
    int done = 0;
    CHECK(inc_wait(req[k]));
    CHECK(inc_test(req[k], &done));
    if (!done) FAIL("inc_test on a completed request said not done");
  }
  for (int r = 0; r < size; ++r)
    if (all[r] != r) FAIL("iallgather: block %d is %g", r, all[r]);
  if (sum != (long long)size * (size + 1) / 2) FAIL("iallreduce: %lld", sum);
  if (rs_out != (float)(rank + size - 1)) FAIL("ireduce_scatter max: %g", rs_out);
  for (int s = 0; s < size; ++s)
    if (a2a_out[s] != s) FAIL("ialltoall: from %d got %d", s, a2a_out[s]);
  if (bc != 5) FAIL("ibroadcast: %d", bc);

  /* Each request keeps its own report; the communicator's last one is some completed call. */
  inc_report_t rep;
  CHECK(inc_request_report(req[1], &rep));
  if (rep.coll != INC_ALLREDUCE || strlen(rep.algorithm) == 0 || rep.in_network != 0 ||
      strlen(rep.reason) == 0 || rep.seconds < 0)
    FAIL("iallreduce report: coll %d algorithm '%s' reason '%s'", (int)rep.coll, rep.algorithm, rep.reason);
  if (size > 1 && rep.bytes_sent == 0) FAIL("iallreduce report: no bytes sent");
  uint64_t resent = 1;
  CHECK(inc_request_bytes_resent(req[1], &resent));
  if (resent != 0) FAIL("iallreduce on the hosts: bytes_resent %llu", (unsigned long long)resent);
  CHECK(inc_request_report(req[5], &rep));
  if (rep.coll != INC_BARRIER) FAIL("ibarrier report: coll %d", (int)rep.coll);
  for (int k = 0; k < 6; ++k) CHECK(inc_request_free(req[k]));
  CHECK(inc_request_free(NULL));

  /* Per-call algorithm through inc_start / inc_run. */
  inc_call_t call;
  memset(&call, 0, sizeof call);
  call.coll = INC_ALLREDUCE;
  call.send = &x;
  call.recv = &sum;
  call.count = 1;
  call.type = INC_I64;
  call.op = INC_MAX;
  call.algo = "ring";
  inc_request_t r;
  CHECK(inc_start(&call, comm, &r));
  CHECK(inc_wait(r));
  CHECK(inc_request_report(r, &rep));
  CHECK(inc_request_free(r));
  if (sum != size || strcmp(rep.algorithm, "ring") != 0 || strstr(rep.reason, "ring") == NULL)
    FAIL("inc_start ring: %lld, algorithm '%s', reason '%s'", sum, rep.algorithm, rep.reason);
  call.algo = "recursive_doubling";
  CHECK(inc_run(&call, comm));
  CHECK(inc_last_report(comm, &rep));
  if (strcmp(rep.algorithm, "recursive_doubling") != 0) FAIL("inc_run: algorithm '%s'", rep.algorithm);
  char algo[64];
  int in_network = -1;
  CHECK(inc_last_algorithm(comm, algo, sizeof algo, &in_network));
  if (strcmp(algo, "recursive_doubling") != 0 || in_network != 0)
    FAIL("last algorithm '%s' in_network %d", algo, in_network);
  return 0;
}

static int errors(inc_comm_t comm, int size) {
  int in[4] = {0}, out[8] = {0};
  inc_request_t r = NULL;
  EXPECT_CODE(inc_allreduce(NULL, out, 4, INC_I32, INC_SUM, comm), INC_ERR_INVALID_ARGUMENT, "null");
  EXPECT_CODE(inc_broadcast(in, out, 1, INC_I32, size, comm), INC_ERR_INVALID_ARGUMENT, "root");
  EXPECT_CODE(inc_allreduce(in, out, 1, (inc_datatype_t)42, INC_SUM, comm), INC_ERR_INVALID_ARGUMENT, "type");
  /* Not taken modulo 256 for INC_I32 / INC_SUM: the C ABI checks the whole int. */
  EXPECT_CODE(inc_allreduce(in, out, 1, (inc_datatype_t)(256 + INC_I32), INC_SUM, comm), INC_ERR_INVALID_ARGUMENT, "262");
  EXPECT_CODE(inc_allreduce(in, out, 1, INC_I32, (inc_op_t)(256 + INC_SUM), comm), INC_ERR_INVALID_ARGUMENT, "256");
  EXPECT_CODE(inc_iallgather(in, out, 1, (inc_datatype_t)-1, comm, &r), INC_ERR_INVALID_ARGUMENT, "-1");
  EXPECT_CODE(inc_allreduce(out, out + 1, 4, INC_I32, INC_SUM, comm), INC_ERR_INVALID_ARGUMENT, "overlap");
  EXPECT_CODE(inc_iallreduce(in, out, 1, INC_I32, INC_SUM, comm, NULL), INC_ERR_INVALID_ARGUMENT, "req");
  EXPECT_CODE(inc_iallreduce(in, out, 1, INC_I32, INC_SUM, NULL, &r), INC_ERR_INVALID_ARGUMENT, "null");
  if (r != NULL) FAIL("a failed start left a request");
  EXPECT_CODE(inc_wait(NULL), INC_ERR_INVALID_ARGUMENT, "null");
  EXPECT_CODE(inc_request_bytes_resent(NULL, (uint64_t*)out), INC_ERR_INVALID_ARGUMENT, "req is null");
  EXPECT_CODE(inc_last_bytes_resent(comm, NULL), INC_ERR_INVALID_ARGUMENT, "out is null");
  EXPECT_CODE(inc_last_bytes_resent(NULL, (uint64_t*)out), INC_ERR_INVALID_ARGUMENT, "null");
  inc_call_t call;
  memset(&call, 0, sizeof call);
  call.coll = INC_BARRIER;
  call.algo = "fastest";
  EXPECT_CODE(inc_run(&call, comm), INC_ERR_INVALID_ARGUMENT, "fastest");
  call.coll = (inc_collective_t)17;
  call.algo = NULL;
  EXPECT_CODE(inc_start(&call, comm, &r), INC_ERR_INVALID_ARGUMENT, "collective");
  return 0;
}

/* Through a Core-INC switch (`c_abi switch`, under `inc launch --switch`): calls that name
 * "inc" run in the network, blocking and not (completed by inc_test), with their results and
 * reports; a type the switch cannot add (i64) runs on the hosts saying why; a bad call is
 * refused on this path as on the hosts. */
static int switch_path(inc_comm_t comm, int rank, int size) {
  static int in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = rank - i;
  inc_call_t call = allreduce_call(in, out, N, INC_I32, INC_SUM, "inc");
  CHECK(inc_run(&call, comm));
  for (int i = 0; i < N; ++i)
    if (out[i] != size * (size - 1) / 2 - size * i) FAIL("switch allreduce: element %d is %d", i, out[i]);
  inc_report_t rep;
  CHECK(inc_last_report(comm, &rep));
  if (!rep.in_network || strcmp(rep.algorithm, "inc") != 0 || rep.bytes_sent == 0)
    FAIL("switch allreduce report: algorithm '%s' in_network %d bytes %llu reason '%s'", rep.algorithm,
         rep.in_network, (unsigned long long)rep.bytes_sent, rep.reason);
  uint64_t resent = 0;
  CHECK(inc_last_bytes_resent(comm, &resent));
  if (resent >= rep.bytes_sent)
    FAIL("switch allreduce: bytes_resent %llu of %llu sent", (unsigned long long)resent,
         (unsigned long long)rep.bytes_sent);

  /* reduce_scatter (max) and allgather of f32 at once, non-blocking. */
  float rs_in[MAXR * 3], rs_out[3], ag_in[2] = {rank + 0.5f, (float)-rank}, ag_out[MAXR * 2];
  for (int r = 0; r < size; ++r)
    for (int k = 0; k < 3; ++k) rs_in[r * 3 + k] = (float)(rank * 7 + r * 3 + k);
  inc_request_t req[2];
  call.coll = INC_REDUCE_SCATTER;
  call.send = rs_in;
  call.recv = rs_out;
  call.count = 3;
  call.type = INC_F32;
  call.op = INC_MAX;
  CHECK(inc_start(&call, comm, &req[0]));
  call.coll = INC_ALLGATHER;
  call.send = ag_in;
  call.recv = ag_out;
  call.count = 2;
  CHECK(inc_start(&call, comm, &req[1]));
  for (int k = 1; k >= 0; --k) {
    int done = 0;
    while (!done) CHECK(inc_test(req[k], &done));
    CHECK(inc_request_report(req[k], &rep));
    if (!rep.in_network || strcmp(rep.algorithm, "inc") != 0)
      FAIL("switch %s: algorithm '%s' in_network %d reason '%s'", k ? "iallgather" : "ireduce_scatter",
           rep.algorithm, rep.in_network, rep.reason);
    CHECK(inc_request_free(req[k]));
  }
  for (int k = 0; k < 3; ++k)
    if (rs_out[k] != (float)((size - 1) * 7 + rank * 3 + k)) FAIL("switch reduce_scatter max: element %d is %g", k, rs_out[k]);
  for (int r = 0; r < size; ++r)
    if (ag_out[2 * r] != r + 0.5f || ag_out[2 * r + 1] != (float)-r)
      FAIL("switch allgather: block %d is %g %g", r, ag_out[2 * r], ag_out[2 * r + 1]);

  /* The switch adds i32 and f32 only: i64 runs on the hosts, and the report says why. */
  long long x = rank + 1, sum = 0;
  call.coll = INC_ALLREDUCE;
  call.send = &x;
  call.recv = &sum;
  call.count = 1;
  call.type = INC_I64;
  call.op = INC_SUM;
  CHECK(inc_run(&call, comm));
  CHECK(inc_last_report(comm, &rep));
  if (sum != (long long)size * (size + 1) / 2 || rep.in_network || strstr(rep.reason, "i64") == NULL)
    FAIL("switch i64 allreduce: %lld, in_network %d, reason '%s'", sum, rep.in_network, rep.reason);

  /* A reproducible f32 sum (inc_call_t.accumulate = 4) through the switch and the ring: the
   * same bits, and the report's policy, link bytes per element and window counts. */
  {
    static float f_in[N], f_sw[N], f_ring[N];
    for (int i = 0; i < N; ++i) f_in[i] = (float)((rank + 1) * 0.1 + i * 1e-3);
    call = allreduce_call(f_in, f_sw, N, INC_F32, INC_SUM, "inc");
    call.accumulate = 4;
    CHECK(inc_run(&call, comm));
    CHECK(inc_last_report(comm, &rep));
    if (!rep.in_network || rep.accumulate != 4 || rep.link_bytes_per_element != 8 || rep.inexact_blocks != 0 ||
        rep.nonfinite_blocks != 0)
      FAIL("reproducible switch report: in_network %d accumulate %d bytes/element %u inexact %llu nonfinite %llu",
           rep.in_network, rep.accumulate, rep.link_bytes_per_element, (unsigned long long)rep.inexact_blocks,
           (unsigned long long)rep.nonfinite_blocks);
    call.algo = "ring";
    call.recv = f_ring;
    CHECK(inc_run(&call, comm));
    CHECK(inc_last_report(comm, &rep));
    if (rep.in_network || rep.accumulate != 4 || memcmp(f_sw, f_ring, sizeof f_sw) != 0)
      FAIL("reproducible ring: in_network %d accumulate %d, same bits as the switch %d", rep.in_network,
           rep.accumulate, memcmp(f_sw, f_ring, sizeof f_sw) == 0);
    call.accumulate = 6; /* out of range */
    EXPECT_CODE(inc_run(&call, comm), INC_ERR_INVALID_ARGUMENT, "accumulate");
  }

  /* Refused before anything is sent, on this path too. */
  memset(&call, 0, sizeof call);
  call.coll = INC_ALLREDUCE;
  call.op = INC_SUM;
  call.algo = "inc";
  call.send = out;
  call.recv = out + 1;
  call.count = 4;
  call.type = INC_I32;
  EXPECT_CODE(inc_run(&call, comm), INC_ERR_INVALID_ARGUMENT, "overlap");
  return 0;
}

/* Through a switch while this rank loses some of its datagrams (`c_abi lossy`, under
 * INC_FAULT_LOSS): an in-network allreduce of 1 MiB is right, and part, not all, of what it
 * sent was sent again, the same count from the request and from the communicator. */
static int lossy(inc_comm_t comm, int rank, int size) {
  enum { M = 1 << 18 };
  static int in[M], out[M];
  for (int i = 0; i < M; ++i) in[i] = rank + i % 1000;
  inc_call_t call = allreduce_call(in, out, M, INC_I32, INC_SUM, "inc");
  inc_request_t r;
  CHECK(inc_start(&call, comm, &r));
  CHECK(inc_wait(r));
  for (int i = 0; i < M; ++i)
    if (out[i] != size * (size - 1) / 2 + size * (i % 1000)) FAIL("lossy allreduce: element %d is %d", i, out[i]);
  inc_report_t rep;
  uint64_t resent = 0, last = 0;
  CHECK(inc_request_report(r, &rep));
  CHECK(inc_request_bytes_resent(r, &resent));
  CHECK(inc_last_bytes_resent(comm, &last));
  if (report_ex_lossy(comm, r)) return 1;
  CHECK(inc_request_free(r));
  if (!rep.in_network || rep.retransmissions == 0)
    FAIL("lossy allreduce: in_network %d retransmissions %llu reason '%s'", rep.in_network,
         (unsigned long long)rep.retransmissions, rep.reason);
  if (resent == 0 || resent >= rep.bytes_sent || last != resent)
    FAIL("lossy allreduce: bytes_resent %llu (last report %llu) of %llu sent, %llu retransmissions",
         (unsigned long long)resent, (unsigned long long)last, (unsigned long long)rep.bytes_sent,
         (unsigned long long)rep.retransmissions);
  if (rank == 0)
    printf("c_abi lossy: %llu of %llu bytes sent again\n", (unsigned long long)resent,
           (unsigned long long)rep.bytes_sent);
  return 0;
}

static int mismatch_error(inc_result_t rc) {
  if (rc != INC_ERR_MISMATCH && rc != INC_ERR_PEER_FAILURE)
    FAIL("count mismatch gave %d: %s", (int)rc, inc_last_error());
  if (strstr(inc_last_error(), "2 x i32") == NULL || strstr(inc_last_error(), "3 x i32") == NULL)
    FAIL("mismatch does not name both counts: %s", inc_last_error());
  return 0;
}

/* A job of its own (`c_abi mismatch [ALGO]`, it ends the job's communication): ranks that
 * disagree on the count get a mismatch naming both counts, or the peer's abort carrying it. */
static int mismatch(inc_comm_t comm, int rank, int size, const char* algo) {
  if (size < 2) return 0;
  int v[3] = {1, 2, 3}, w[3];
  inc_call_t call = allreduce_call(v, w, rank == 0 ? 2 : 3, INC_I32, INC_SUM, algo);
  inc_result_t rc = inc_run(&call, comm);
  if (mismatch_error(rc)) return 1;
  CHECK(inc_comm_free(comm));
  return 0;
}

/* `c_abi config TEXT`: the environment is wrong; inc_init must fail with INC_ERR_CONFIG
 * naming it (TEXT), and leave no communicator. */
static int config_error(const char* text) {
  inc_comm_t comm = (inc_comm_t)&text;
  EXPECT_CODE(inc_init(&comm), INC_ERR_CONFIG, text);
  if (comm != NULL) FAIL("a failed inc_init left a communicator");
  return 0;
}

int main(int argc, char** argv) {
  inc_comm_t comm = NULL;
  int rank = -1, size = 0;
  if (argc > 2 && strcmp(argv[1], "config") == 0) return config_error(argv[2]);
  if (argc > 1 && strcmp(argv[1], "mismatch") == 0) {
    /* The rank that notices aborts the job at once; a slower rank may still be in start-up's
     * own collectives (the abort overtakes their last messages on another connection) and gets
     * the abort there: the same error, carrying the cause. */
    inc_result_t rc = inc_init(&comm);
    if (rc != INC_SUCCESS) return mismatch_error(rc);
  } else {
    CHECK(inc_init(&comm));
  }
  CHECK(inc_comm_rank(comm, &rank));
  CHECK(inc_comm_size(comm, &size));
  if (argc > 1 && strcmp(argv[1], "mismatch") == 0) return mismatch(comm, rank, size, argc > 2 ? argv[2] : NULL);
  if (size > MAXR) FAIL("at most %d ranks", MAXR);
  /* Jobs of their own for the extended report's tuning and Edge-INC fields (c_abi_report.c). */
  if (argc > 1 && strcmp(argv[1], "tuning") == 0) return report_ex_tuning(comm, rank, size) || inc_comm_free(comm);
  if (argc > 1 && strcmp(argv[1], "edge") == 0)
    return report_ex_edge(comm, rank, argc > 2 ? argv[2] : "") || inc_comm_free(comm);
  if (collectives(comm, rank, size) || nonblocking(comm, rank, size) || errors(comm, size)) return 1;
  if (report_ex_hosts(comm, rank, size)) return 1;
  if (argc > 1 && strcmp(argv[1], "switch") == 0 && (switch_path(comm, rank, size) || report_ex_switch(comm, rank, size)))
    return 1;
  if (argc > 1 && strcmp(argv[1], "lossy") == 0 && lossy(comm, rank, size)) return 1;

  inc_comm_t half = NULL;
  CHECK(inc_comm_split(comm, rank % 2, rank, &half));
  int hsize = 0, hrank = -1;
  CHECK(inc_comm_size(half, &hsize));
  CHECK(inc_comm_rank(half, &hrank));
  if (hsize != (size + 1 - rank % 2) / 2 || hrank != rank / 2)
    FAIL("split: size %d rank %d for world rank %d of %d", hsize, hrank, rank, size);
  int one = rank, total = 0, expect = 0;
  for (int r = rank % 2; r < size; r += 2) expect += r;
  CHECK(inc_allreduce(&one, &total, 1, INC_I32, INC_SUM, half));
  if (total != expect) FAIL("split allreduce: %d, expected %d", total, expect);
  inc_comm_t none = (inc_comm_t)&one;
  CHECK(inc_comm_split(comm, -1, 0, &none));
  if (none != NULL) FAIL("split with a negative color gave a communicator");
  inc_comm_t dup = NULL;
  CHECK(inc_comm_dup(comm, &dup));
  CHECK(inc_allreduce(&one, &total, 1, INC_I32, INC_SUM, dup));
  if (total != size * (size - 1) / 2) FAIL("dup allreduce: %d", total);
  CHECK(inc_comm_free(dup));
  CHECK(inc_barrier(half));
  CHECK(inc_comm_free(half));
  CHECK(inc_barrier(comm));
  CHECK(inc_comm_free(comm));
  if (rank == 0) printf("c_abi: %d ranks OK (%s)\n", size, inc_version());
  return 0;
}
