/* The extended, versioned report (inc_report_ex_t, inc_request_report_ex, inc_last_report_ex)
 * from C, called by c_abi.c on each path it runs: its fields against what the call implies
 * (the ring's messages, the switch operations of a given size, the tuning file's candidates,
 * the Edge-INC engine and its handler), its prefix against inc_report_t, the versioning
 * (a first-version struct_size leaves the bytes past it as they were; a struct larger than the
 * library's gets the library's fields and its own size back) and its bad calls. */
#include <stddef.h>

#include "c_abi_check.h"

enum { CANARY = 0xA5, RING_N = 1001 };

/* ex's first version (`report`) is what inc_last_report gives for the same collective. */
static int same_as_base(const inc_report_t* a, const inc_report_t* b, const char* what) {
  if (a->coll != b->coll || a->seq != b->seq || strcmp(a->algorithm, b->algorithm) != 0 ||
      a->in_network != b->in_network || strcmp(a->reason, b->reason) != 0 || a->bytes_sent != b->bytes_sent ||
      a->bytes_received != b->bytes_received || a->retransmissions != b->retransmissions ||
      a->overflow != b->overflow || a->seconds != b->seconds || a->accumulate != b->accumulate ||
      a->link_bytes_per_element != b->link_bytes_per_element || a->inexact_blocks != b->inexact_blocks ||
      a->nonfinite_blocks != b->nonfinite_blocks || a->overflow_events != b->overflow_events ||
      a->events_counted != b->events_counted || a->nonfinite_inputs != b->nonfinite_inputs)
    FAIL("%s: report differs from inc_report_t's: seq %llu/%llu algorithm '%s'/'%s' bytes %llu/%llu", what,
         (unsigned long long)a->seq, (unsigned long long)b->seq, a->algorithm, b->algorithm,
         (unsigned long long)a->bytes_sent, (unsigned long long)b->bytes_sent);
  return 0;
}

static int untouched(const unsigned char* p, size_t from, size_t to, const char* what) {
  for (size_t i = from; i < to; ++i)
    if (p[i] != CANARY) FAIL("%s: byte %zu (of %zu..%zu) written: 0x%02x", what, i, from, to, p[i]);
  return 0;
}

/* The communicator's last collective through both report calls, compared. */
static int last_both(inc_comm_t comm, inc_report_ex_t* ex, const char* what) {
  inc_report_t rep;
  uint64_t resent = ~(uint64_t)0;
  *ex = inc_report_ex_init();
  CHECK(inc_last_report_ex(comm, ex));
  CHECK(inc_last_report(comm, &rep));
  CHECK(inc_last_bytes_resent(comm, &resent));
  if (ex->struct_size != sizeof *ex) FAIL("%s: struct_size %u back, expected %zu", what, ex->struct_size, sizeof *ex);
  if (ex->bytes_resent != resent)
    FAIL("%s: bytes_resent %llu, inc_last_bytes_resent %llu", what, (unsigned long long)ex->bytes_resent,
         (unsigned long long)resent);
  return same_as_base(&ex->report, &rep, what);
}

/* Versions and bad calls, on whatever the communicator ran last. */
static int versions_and_errors(inc_comm_t comm, const inc_report_ex_t* full) {
  struct {
    inc_report_ex_t ex;
    unsigned char later[64]; /* fields of a later header than the library's */
  } big;
  const unsigned char* bytes = (const unsigned char*)&big;
  inc_report_t rep;
  CHECK(inc_last_report(comm, &rep));

  /* A program built against the first version: its prefix, nothing past it. */
  memset(&big, CANARY, sizeof big);
  big.ex.struct_size = INC_REPORT_EX_V1_SIZE;
  CHECK(inc_last_report_ex(comm, &big.ex));
  if (big.ex.struct_size != INC_REPORT_EX_V1_SIZE) FAIL("first version: struct_size %u back", big.ex.struct_size);
  if (same_as_base(&big.ex.report, &rep, "first version") ||
      untouched(bytes, INC_REPORT_EX_V1_SIZE, sizeof big, "first version"))
    return 1;

  /* A program built against a later header: this library's fields, its own size back. */
  memset(&big, CANARY, sizeof big);
  big.ex.struct_size = (uint32_t)sizeof big;
  CHECK(inc_last_report_ex(comm, &big.ex));
  if (big.ex.struct_size != sizeof big.ex) FAIL("later header: struct_size %u back, expected %zu", big.ex.struct_size, sizeof big.ex);
  if (big.ex.messages_sent != full->messages_sent || big.ex.hop_count != full->hop_count ||
      strcmp(big.ex.hops[0].carries, full->hops[0].carries) != 0)
    FAIL("later header: messages_sent %llu hops %u '%s', expected %llu %u '%s'", (unsigned long long)big.ex.messages_sent,
         big.ex.hop_count, big.ex.hops[0].carries, (unsigned long long)full->messages_sent, full->hop_count,
         full->hops[0].carries);
  if (untouched(bytes, sizeof big.ex, sizeof big, "later header")) return 1;

  /* Too small (below the first version) or no struct: refused, nothing written. */
  memset(&big, CANARY, sizeof big);
  big.ex.struct_size = INC_REPORT_EX_V1_SIZE - 1;
  EXPECT_CODE(inc_last_report_ex(comm, &big.ex), INC_ERR_INVALID_ARGUMENT, "struct_size");
  if (untouched(bytes, sizeof big.ex.struct_size, sizeof big, "too small")) return 1;
  big.ex.struct_size = 0;
  EXPECT_CODE(inc_last_report_ex(comm, &big.ex), INC_ERR_INVALID_ARGUMENT, "is 0, below the first version");
  EXPECT_CODE(inc_last_report_ex(comm, NULL), INC_ERR_INVALID_ARGUMENT, "inc_last_report_ex: out is null");
  big.ex.struct_size = (uint32_t)sizeof big.ex;
  EXPECT_CODE(inc_last_report_ex(NULL, &big.ex), INC_ERR_INVALID_ARGUMENT, "communicator handle is null");
  EXPECT_CODE(inc_request_report_ex(NULL, &big.ex), INC_ERR_INVALID_ARGUMENT, "inc_request_report_ex: req is null");
  return 0;
}

/* On the hosts (`c_abi`, every mode but the tuning and edge ones): a ring allreduce of 1001 i32
 * sends 2(p-1) messages per rank (each chunk far below the ring's 1 MiB segment), no switch
 * operation, one hop; a dissemination barrier ceil(log2 p) messages; an explicit algorithm
 * weighs nothing. */
int report_ex_hosts(inc_comm_t comm, int rank, int size) {
  static int in[RING_N], out[RING_N];
  for (int i = 0; i < RING_N; ++i) in[i] = rank * i;
  inc_call_t call = allreduce_call(in, out, RING_N, INC_I32, INC_SUM, "ring");
  CHECK(inc_run(&call, comm));
  for (int i = 0; i < RING_N; ++i)
    if (out[i] != i * (size * (size - 1) / 2)) FAIL("ex ring allreduce: element %d is %d", i, out[i]);
  inc_report_ex_t ex;
  if (last_both(comm, &ex, "ex ring")) return 1;
  if (strcmp(ex.report.algorithm, "ring") != 0 || ex.messages_sent != (uint64_t)(2 * (size - 1)) ||
      ex.switch_operations != 0 || ex.bytes_resent != 0)
    FAIL("ex ring: algorithm '%s' messages_sent %llu (expected %d) switch_operations %llu bytes_resent %llu",
         ex.report.algorithm, (unsigned long long)ex.messages_sent, 2 * (size - 1),
         (unsigned long long)ex.switch_operations, (unsigned long long)ex.bytes_resent);
  if (ex.offload[0] != '\0' || ex.wire_handler[0] != '\0' || ex.predicted_count != 0)
    FAIL("ex ring: offload '%s' wire_handler '%s' predicted_count %u", ex.offload, ex.wire_handler, ex.predicted_count);
  if (ex.hop_count != 1 || strcmp(ex.hops[0].hop, "host->host") != 0 || ex.hops[0].accumulator_bits != 32 ||
      ex.hops[0].bytes_per_element != 4 || strstr(ex.hops[0].carries, "i32") == NULL)
    FAIL("ex ring: %u hops, first '%s' %u bits %g B '%s'", ex.hop_count, ex.hops[0].hop, ex.hops[0].accumulator_bits,
         ex.hops[0].bytes_per_element, ex.hops[0].carries);
  if (versions_and_errors(comm, &ex)) return 1;

  /* A request's own report; before completion (a barrier waits for its peers, and nothing
   * progresses outside inc_wait/inc_test) the empty one. */
  inc_request_t req;
  memset(&call, 0, sizeof call);
  call.coll = INC_BARRIER;
  call.algo = "dissemination"; /* (with a switch the barrier's default is the switch) */
  CHECK(inc_start(&call, comm, &req));
  inc_report_ex_t mine = inc_report_ex_init();
  if (size > 1) {
    CHECK(inc_request_report_ex(req, &mine));
    if (mine.report.algorithm[0] != '\0' || mine.messages_sent != 0 || mine.struct_size != sizeof mine)
      FAIL("ex ibarrier before completion: algorithm '%s' messages_sent %llu struct_size %u", mine.report.algorithm,
           (unsigned long long)mine.messages_sent, mine.struct_size);
  }
  CHECK(inc_wait(req));
  CHECK(inc_request_report_ex(req, &mine));
  CHECK(inc_request_free(req));
  int rounds = 0;
  while ((1 << rounds) < size) ++rounds;
  if (mine.report.coll != INC_BARRIER || strcmp(mine.report.algorithm, "dissemination") != 0 ||
      mine.messages_sent != (uint64_t)rounds || mine.switch_operations != 0 || mine.hop_count != 0)
    FAIL("ex ibarrier: coll %d algorithm '%s' messages_sent %llu (expected %d) switch_operations %llu hops %u",
         (int)mine.report.coll, mine.report.algorithm, (unsigned long long)mine.messages_sent, rounds,
         (unsigned long long)mine.switch_operations, mine.hop_count);
  return 0;
}

/* Through a switch (`c_abi switch`): an in-network i32 sum of 49153 elements takes
 * ceil(196612 B / 64 KiB) = 4 switch operations (the default INC_SEGMENT_BYTES of `inc`) and
 * no point-to-point message, over the hops host->switch and switch->hosts; a barrier one; a
 * host algorithm on the same communicator none. */
int report_ex_switch(inc_comm_t comm, int rank, int size) {
  enum { M = 3 * 16384 + 1 };
  static int in[M], out[M];
  for (int i = 0; i < M; ++i) in[i] = rank + i % 7;
  inc_call_t call = allreduce_call(in, out, M, INC_I32, INC_SUM, "inc");
  inc_request_t req;
  CHECK(inc_start(&call, comm, &req));
  CHECK(inc_wait(req));
  inc_report_ex_t ex = inc_report_ex_init();
  CHECK(inc_request_report_ex(req, &ex));
  uint64_t resent = ~(uint64_t)0;
  CHECK(inc_request_bytes_resent(req, &resent));
  CHECK(inc_request_free(req));
  for (int i = 0; i < M; ++i)
    if (out[i] != size * (size - 1) / 2 + size * (i % 7)) FAIL("ex switch allreduce: element %d is %d", i, out[i]);
  if (!ex.report.in_network || ex.switch_operations != 4 || ex.messages_sent != 0 || ex.bytes_resent != resent ||
      ex.bytes_resent >= ex.report.bytes_sent)
    FAIL("ex switch: in_network %d switch_operations %llu (expected 4) messages_sent %llu bytes_resent %llu "
         "(accessor %llu) of %llu",
         ex.report.in_network, (unsigned long long)ex.switch_operations, (unsigned long long)ex.messages_sent,
         (unsigned long long)ex.bytes_resent, (unsigned long long)resent, (unsigned long long)ex.report.bytes_sent);
  if (ex.hop_count != 2 || strcmp(ex.hops[0].hop, "host->switch") != 0 || strcmp(ex.hops[1].hop, "switch->hosts") != 0 ||
      ex.hops[1].accumulator_bits != 32 || strcmp(ex.hops[1].carries, "i32 result") != 0)
    FAIL("ex switch: %u hops '%s' '%s' (%u bits, '%s')", ex.hop_count, ex.hops[0].hop, ex.hops[1].hop,
         ex.hops[1].accumulator_bits, ex.hops[1].carries);

  /* A barrier through the switch: one switch operation. */
  CHECK(inc_barrier(comm));
  if (last_both(comm, &ex, "ex switch barrier")) return 1;
  if (!ex.report.in_network || ex.switch_operations != 1 || ex.messages_sent != 0)
    FAIL("ex switch barrier: algorithm '%s' switch_operations %llu messages_sent %llu", ex.report.algorithm,
         (unsigned long long)ex.switch_operations, (unsigned long long)ex.messages_sent);

  /* The same sum on the hosts: messages, no switch operation. */
  call.algo = "ring";
  CHECK(inc_run(&call, comm));
  if (last_both(comm, &ex, "ex switch, ring")) return 1;
  if (ex.report.in_network || ex.switch_operations != 0 || ex.messages_sent == 0)
    FAIL("ex switch, ring: in_network %d switch_operations %llu messages_sent %llu", ex.report.in_network,
         (unsigned long long)ex.switch_operations, (unsigned long long)ex.messages_sent);
  return 0;
}

/* `c_abi lossy`: the 1 MiB in-network sum's request (complete): 16 switch operations of the
 * default 64 KiB, and the resent bytes the accessors give. */
int report_ex_lossy(inc_comm_t comm, inc_request_t req) {
  inc_report_ex_t ex = inc_report_ex_init(), last = inc_report_ex_init();
  uint64_t resent = 0;
  CHECK(inc_request_report_ex(req, &ex));
  CHECK(inc_last_report_ex(comm, &last));
  CHECK(inc_request_bytes_resent(req, &resent));
  if (ex.switch_operations != 16 || ex.bytes_resent == 0 || ex.bytes_resent != resent ||
      last.bytes_resent != resent || last.switch_operations != 16)
    FAIL("ex lossy: switch_operations %llu/%llu (expected 16) bytes_resent %llu/%llu (accessor %llu)",
         (unsigned long long)ex.switch_operations, (unsigned long long)last.switch_operations,
         (unsigned long long)ex.bytes_resent, (unsigned long long)last.bytes_resent, (unsigned long long)resent);
  return 0;
}

/* `c_abi tuning` under INC_TUNING=tests/api/tuning-n4.json, 4 ranks and a switch (the fixture
 * of mp_tuning_n4): a 16-element f32 sum weighs inc, recursive_doubling, rabenseifner and ring
 * in that order, cheapest (the chosen switch) first, at the fixture's times; an explicit
 * algorithm weighs nothing. */
int report_ex_tuning(inc_comm_t comm, int rank, int size) {
  float in[16], out[16];
  for (int i = 0; i < 16; ++i) in[i] = (float)(rank + i);
  CHECK(inc_allreduce(in, out, 16, INC_F32, INC_SUM, comm));
  for (int i = 0; i < 16; ++i)
    if (out[i] != (float)(size * (size - 1) / 2 + size * i)) FAIL("ex tuning allreduce: element %d is %g", i, out[i]);
  inc_report_ex_t ex;
  if (last_both(comm, &ex, "ex tuning")) return 1;
  if (size != 4 || ex.predicted_count != 4 || strcmp(ex.predicted[0].name, ex.report.algorithm) != 0 ||
      strcmp(ex.report.algorithm, "inc") != 0)
    FAIL("ex tuning (%d ranks): algorithm '%s' predicted_count %u, first '%s' reason '%s'", size,
         ex.report.algorithm, ex.predicted_count, ex.predicted[0].name, ex.report.reason);
  /* The fixture's 8-byte times, cheapest first; at 64 B each prediction is within 1 us of its
   * path's (the table's slopes to 1 MiB are all below 0.01 us/B). */
  const char* names[] = {"inc", "recursive_doubling", "rabenseifner", "ring"};
  const double at8[] = {50, 200, 250, 300};
  for (unsigned k = 0; k < 4; ++k)
    if (strcmp(ex.predicted[k].name, names[k]) != 0 || !(ex.predicted[k].us >= at8[k] && ex.predicted[k].us < at8[k] + 1))
      FAIL("ex tuning: candidate %u is '%s' predicted %g us, expected '%s' at %g..%g", k, ex.predicted[k].name,
           ex.predicted[k].us, names[k], at8[k], at8[k] + 1);
  if (rank == 0)
    printf("c_abi tuning: %s predicted %.1f us, the first of %u\n", ex.predicted[0].name, ex.predicted[0].us,
           ex.predicted_count);
  inc_call_t call = allreduce_call(in, out, 16, INC_F32, INC_SUM, "ring");
  CHECK(inc_run(&call, comm));
  if (last_both(comm, &ex, "ex tuning, ring")) return 1;
  if (ex.predicted_count != 0) FAIL("ex tuning, ring given: predicted_count %u", ex.predicted_count);
  return 0;
}

/* `c_abi edge [HANDLER]` under `inc launch --edge` (and INC_EDGE_HANDLER=HANDLER): the Edge-INC
 * engine ran the collective, with that conversion handler on the wire. */
int report_ex_edge(inc_comm_t comm, int rank, const char* handler) {
  int in[64], out[64];
  for (int i = 0; i < 64; ++i) in[i] = i;
  CHECK(inc_allreduce(in, out, 64, INC_I32, INC_MAX, comm));
  inc_report_ex_t ex;
  if (last_both(comm, &ex, "ex edge")) return 1;
  if (strcmp(ex.offload, "edge") != 0 || strcmp(ex.wire_handler, handler) != 0 || ex.report.in_network)
    FAIL("ex edge: offload '%s' wire_handler '%s' (expected '%s') in_network %d reason '%s'", ex.offload,
         ex.wire_handler, handler, ex.report.in_network, ex.report.reason);
  for (int i = 0; i < 64; ++i)
    if (out[i] != i) FAIL("ex edge max: element %d is %d", i, out[i]);
  if (rank == 0) printf("c_abi edge: offload '%s', wire handler '%s'\n", ex.offload, ex.wire_handler);
  return 0;
}
