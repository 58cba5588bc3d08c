/* The checks of the C ABI's test programs (c_abi.c, c_abi_report.c): each returns 1 from the
 * calling function after printing what went wrong; and the call they build most. */
#ifndef INC_TESTS_C_ABI_CHECK_H
#define INC_TESTS_C_ABI_CHECK_H

#include <inc/inc.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    inc_result_t rc_ = (call);                                                   \
    if (rc_ != INC_SUCCESS) {                                                    \
      fprintf(stderr, "%s failed (%d): %s\n", #call, (int)rc_, inc_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

#define EXPECT_CODE(call, code, text)                                                       \
  do {                                                                                      \
    inc_result_t rc_ = (call);                                                              \
    if (rc_ != (code) || strstr(inc_last_error(), (text)) == NULL) {                        \
      fprintf(stderr, "%s gave %d (%s), expected %d mentioning '%s'\n", #call, (int)rc_,    \
              inc_last_error(), (int)(code), (text));                                       \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    return 1;                     \
  } while (0)

/* An allreduce as inc_start / inc_run take it, with a per-call algorithm (NULL: the
 * communicator's). */
static inline inc_call_t allreduce_call(const void* send, void* recv, size_t count, inc_datatype_t type, inc_op_t op,
                                        const char* algo) {
  inc_call_t call;
  memset(&call, 0, sizeof call);
  call.coll = INC_ALLREDUCE;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  call.op = op;
  call.algo = algo;
  return call;
}

/* c_abi_report.c: the extended report (inc_report_ex_t) on each path c_abi runs. */
int report_ex_hosts(inc_comm_t comm, int rank, int size);
int report_ex_switch(inc_comm_t comm, int rank, int size);
int report_ex_lossy(inc_comm_t comm, inc_request_t req);
int report_ex_tuning(inc_comm_t comm, int rank, int size);
int report_ex_edge(inc_comm_t comm, int rank, const char* handler);

#endif
