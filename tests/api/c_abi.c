/* The C ABI from a C program: run by `inc launch` (see CMakeLists.txt). Exits non-zero on
 * the first wrong result, printing what went wrong. */
#include <inc/inc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    inc_result_t rc_ = (call);                                                   \
    if (rc_ != INC_SUCCESS) {                                                    \
      fprintf(stderr, "%s failed (%d): %s\n", #call, (int)rc_, inc_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  inc_comm_t comm = NULL;
  int rank = -1, size = 0;
  CHECK(inc_init(&comm));
  CHECK(inc_comm_rank(comm, &rank));
  CHECK(inc_comm_size(comm, &size));

  enum { N = 1001 };
  int in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = rank + i;
  CHECK(inc_allreduce(in, out, N, INC_I32, INC_SUM, comm));
  for (int i = 0; i < N; ++i)
    if (out[i] != size * i + size * (size - 1) / 2) {
      fprintf(stderr, "allreduce: element %d is %d\n", i, out[i]);
      return 1;
    }

  double mine = rank, all[64];
  inc_request_t req;
  CHECK(inc_iallgather(&mine, all, 1, INC_F64, comm, &req));
  CHECK(inc_wait(req));
  for (int r = 0; r < size && r < 64; ++r)
    if (all[r] != r) {
      fprintf(stderr, "allgather: block %d is %g\n", r, all[r]);
      return 1;
    }

  char algo[64];
  int in_network = -1;
  CHECK(inc_last_algorithm(comm, algo, sizeof algo, &in_network));
  if (strlen(algo) == 0 || in_network != 0) {
    fprintf(stderr, "last algorithm '%s' in_network %d\n", algo, in_network);
    return 1;
  }

  /* Errors are codes plus a message, not crashes. */
  if (inc_allreduce(NULL, out, 4, INC_I32, INC_SUM, comm) != INC_ERR_INVALID_ARGUMENT ||
      strstr(inc_last_error(), "null") == NULL) {
    fprintf(stderr, "null buffer was not reported: %s\n", inc_last_error());
    return 1;
  }
  if (inc_broadcast(in, out, 1, INC_I32, size, comm) != INC_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "bad root was not reported\n");
    return 1;
  }

  inc_comm_t half = NULL;
  CHECK(inc_comm_split(comm, rank % 2, rank, &half));
  int hsize = 0;
  CHECK(inc_comm_size(half, &hsize));
  CHECK(inc_barrier(half));
  CHECK(inc_comm_free(half));
  CHECK(inc_barrier(comm));
  CHECK(inc_comm_free(comm));
  if (rank == 0) printf("c_abi: %d ranks OK (%s)\n", size, inc_version());
  return 0;
}
