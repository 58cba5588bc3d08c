/* INC: the C ABI over inc::Communicator, for C programs and other languages' bindings.
 * Every function returns INC_SUCCESS (0) or an error code; inc_last_error() gives the message
 * of the calling thread's last failure. Handles are opaque; free them with the *_free calls. */
#ifndef INC_INC_H
#define INC_INC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct inc_comm_s* inc_comm_t;
typedef struct inc_request_s* inc_request_t;

/* The enumerations are ints on both sides: in C++ (the library) with int as their fixed
 * underlying type, so that any int a caller passes is a value the library may read and then
 * refuse (INC_ERR_INVALID_ARGUMENT) rather than undefined behaviour. */
#ifdef __cplusplus
#define INC_ENUM_INT : int
#else
#define INC_ENUM_INT
#endif

typedef enum INC_ENUM_INT {
  INC_F64 = 0, INC_F32, INC_F16, INC_BF16, INC_I8, INC_U8, INC_I32, INC_U32, INC_I64, INC_U64,
  INC_E4M3, INC_E5M2, /* OCP 8-bit floats */
  INC_I4, /* signed 4-bit, two per byte, low nibble first; counts are elements, even */
  /* OCP Microscaling blocks of 32 elements (an E8M0 scale byte, then the codes: 33 B; mxfp6 four
   * codes per 3 bytes, 25 B; mxfp4 two per byte, low nibble first, 17 B); counts are elements,
   * a multiple of 32 (docs/NUMERICS.md "MX as a data type") */
  INC_MXFP8_E4M3, INC_MXFP8_E5M2, INC_MXINT8, INC_MXFP4, INC_MXFP6_E2M3, INC_MXFP6_E3M2
} inc_datatype_t;

typedef enum INC_ENUM_INT { INC_SUM = 0, INC_PROD, INC_MIN, INC_MAX, INC_AVG } inc_op_t;

typedef enum INC_ENUM_INT {
  INC_SUCCESS = 0,
  INC_ERR_INVALID_ARGUMENT = 1,
  INC_ERR_CONFIG = 2,
  INC_ERR_MISMATCH = 3,
  INC_ERR_TIMEOUT = 4,
  INC_ERR_PEER_FAILURE = 5,
  INC_ERR_NETWORK = 6,
  INC_ERR_INTERNAL = 7
} inc_result_t;

/* Join the job described by the environment (INC_RANK/INC_WORLD_SIZE/INC_STORE, mpirun,
 * Slurm or torchrun variables). A bad variable is INC_ERR_CONFIG naming it and its value.
 * inc_init, inc_comm_split and inc_comm_dup set *comm / *out to NULL when they fail. */
inc_result_t inc_init(inc_comm_t* comm);
inc_result_t inc_comm_free(inc_comm_t comm);
inc_result_t inc_comm_rank(inc_comm_t comm, int* rank);
inc_result_t inc_comm_size(inc_comm_t comm, int* size);
/* color < 0: this rank joins no new communicator and *out is set to NULL. */
inc_result_t inc_comm_split(inc_comm_t comm, int color, int key, inc_comm_t* out);
/* Same members and order, a new communicator whose collectives are independent. */
inc_result_t inc_comm_dup(inc_comm_t comm, inc_comm_t* out);

inc_result_t inc_allreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                           inc_op_t op, inc_comm_t comm);
inc_result_t inc_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                inc_datatype_t type, inc_op_t op, inc_comm_t comm);
inc_result_t inc_allgather(const void* send, void* recv, size_t send_count, inc_datatype_t type,
                           inc_comm_t comm);
inc_result_t inc_broadcast(const void* send, void* recv, size_t count, inc_datatype_t type,
                           int root, inc_comm_t comm);
inc_result_t inc_alltoall(const void* send, void* recv, size_t count, inc_datatype_t type,
                          inc_comm_t comm);
inc_result_t inc_barrier(inc_comm_t comm);

/* Non-blocking variants: buffers must stay valid until the request completes (inc_wait
 * returned INC_SUCCESS or inc_test set *done to 1). Completion is idempotent: inc_wait and
 * inc_test may be called again on a completed request (success again, *done = 1) and neither
 * frees it; free every request with inc_request_free once done with it (its report stays
 * readable until then). Freeing a request that has not completed lets the collective finish
 * in later progress of the communicator; its buffers must stay valid until then. */
inc_result_t inc_iallreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                            inc_op_t op, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_ireduce_scatter(const void* send, void* recv, size_t recv_count,
                                 inc_datatype_t type, inc_op_t op, inc_comm_t comm,
                                 inc_request_t* req);
inc_result_t inc_iallgather(const void* send, void* recv, size_t send_count,
                            inc_datatype_t type, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_ibroadcast(const void* send, void* recv, size_t count, inc_datatype_t type,
                            int root, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_ialltoall(const void* send, void* recv, size_t count, inc_datatype_t type,
                           inc_comm_t comm, inc_request_t* req);
inc_result_t inc_ibarrier(inc_comm_t comm, inc_request_t* req);
inc_result_t inc_wait(inc_request_t req);
inc_result_t inc_test(inc_request_t req, int* done);
inc_result_t inc_request_free(inc_request_t req);

/* Any collective with per-call options: fill an inc_call_t (zero it first; fields a
 * collective does not use are ignored) and start it (inc_start, non-blocking) or run it
 * (inc_run, blocking). `algo` overrides the communicator's algorithm for this call only:
 * "auto", "ring", "recursive_doubling", "rabenseifner", "binomial_tree", "pipelined_chain",
 * "pairwise", "dissemination", "inc"; NULL or "" keeps the communicator's. */
typedef enum INC_ENUM_INT {
  INC_ALLREDUCE = 0, INC_REDUCE_SCATTER, INC_ALLGATHER, INC_BROADCAST, INC_ALLTOALL, INC_BARRIER
} inc_collective_t;
#undef INC_ENUM_INT

typedef struct {
  inc_collective_t coll;
  const void* send;
  void* recv;
  size_t count; /* as the named call's count (recv_count, send_count, count) */
  inc_datatype_t type;
  inc_op_t op;  /* allreduce, reduce_scatter */
  int root;     /* broadcast */
  const char* algo;
  /* Where sums keep their accumulator (inc::Accumulate): 0 the communicator's default
   * (INC_ACCUMULATE), 1 narrow, 2 widen, 3 wide, 4 reproducible (the same bits on every path;
   * f32/f16/bf16), 5 fixed. */
  int accumulate;
} inc_call_t;

inc_result_t inc_start(const inc_call_t* call, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_run(const inc_call_t* call, inc_comm_t comm);

/* How a collective ran (inc::Report): strings are NUL-terminated and cut to fit. The layout is
 * fixed for programs built against earlier headers: inc::Report's other fields, and those it
 * gains later, are in inc_report_ex_t (below), the form to use for new fields. */
typedef struct {
  inc_collective_t coll;
  uint64_t seq;              /* per-communicator sequence number */
  char algorithm[32];        /* "ring", ..., "inc"; "" when nothing has completed */
  int in_network;            /* 1: a Core-INC switch aggregated the data */
  char reason[512];          /* why this algorithm / path was chosen */
  uint64_t bytes_sent;       /* payload bytes (in the network: datagrams, headers included) */
  uint64_t bytes_received;
  uint64_t retransmissions;  /* in-network packets this rank sent again */
  int overflow;              /* in-network i32 sums wrapped somewhere in the tree */
  double seconds;            /* start to completion on this rank */
  int accumulate;            /* the accumulator policy that ran (inc_call_t.accumulate; 0: n/a) */
  uint32_t link_bytes_per_element; /* on this rank's link to the switch (0: host path) */
  uint64_t inexact_blocks;   /* reproducible sums: blocks beyond the exact window (rounded) */
  uint64_t nonfinite_blocks; /* reproducible sums: blocks with NaN/inf (NaN results) */
  uint64_t overflow_events;  /* sums: elements of adds that wrapped / overflowed (inc::Report) */
  int events_counted;        /* 0: a path that ran could not count them */
  uint64_t nonfinite_inputs; /* this rank's input elements that were NaN or infinite */
} inc_report_t;

/* This request's own report (complete once the request completed). */
inc_result_t inc_request_report(inc_request_t req, inc_report_t* out);
/* The report of whichever collective of this communicator completed last on this rank. */
inc_result_t inc_last_report(inc_comm_t comm, inc_report_t* out);
/* The last collective's algorithm name and whether it ran in the network (1) or on hosts. */
inc_result_t inc_last_algorithm(inc_comm_t comm, char* buf, size_t buf_len, int* in_network);
/* Of a report's bytes_sent, the bytes that were not first transmissions (inc::Report::
 * bytes_resent: in the network, data sent again after a loss or a time-out, and header-only
 * probes; 0 on the hosts), so that bytes_sent - bytes_resent is what the protocol sends when
 * nothing is lost or late: of this request's report, and of the communicator's last one.
 * Accessors rather than a field, so that inc_report_t keeps the size that programs built
 * against earlier headers pass to inc_request_report and inc_last_report; equivalent to
 * inc_report_ex_t's bytes_resent (below), which new programs should read instead. */
inc_result_t inc_request_bytes_resent(inc_request_t req, uint64_t* out);
inc_result_t inc_last_bytes_resent(inc_comm_t comm, uint64_t* out);

/* The extended, versioned report: every field of inc::Report, the form to use for new fields.
 * The caller sets struct_size to sizeof(inc_report_ex_t) (inc_report_ex_init() does), and the
 * library fills the first min(struct_size, its own sizeof(inc_report_ex_t)) bytes and sets
 * struct_size to that count: fields are only ever appended, so a program built against an
 * earlier header gets the prefix it knows, and one built against a later header than the
 * library's gets the library's fields with its own later ones left as they were (zero them, as
 * inc_report_ex_init() does, and read struct_size back to see which were filled). A struct_size
 * below INC_REPORT_EX_V1_SIZE (the first version: struct_size and `report`) and a NULL out are
 * INC_ERR_INVALID_ARGUMENT with inc_last_error() naming the problem; nothing is written.
 * Lists are bounded: a count of all entries, and the first ones up to the array's length.
 * Strings are NUL-terminated and cut to fit, as in inc_report_t. */
#define INC_REPORT_PREDICTED_MAX 8
#define INC_REPORT_HOPS_MAX 8

typedef struct {
  char name[32];  /* a path automatic selection weighed: "inc", "ring", ... */
  double us;      /* its predicted time in microseconds */
} inc_report_prediction_t;

typedef struct {
  char hop[32];              /* "host->switch", "leaf->spine", "switch->hosts", "host->host", ... */
  uint32_t accumulator_bits; /* the width of what the hop carries: inputs, partial sums or result */
  double bytes_per_element;  /* payload bytes per element on the hop's links */
  char carries[96];          /* "f16 inputs", "f32 partial sums", "f16 result", ... */
} inc_report_hop_t;

typedef struct {
  uint32_t struct_size;  /* in: the caller's sizeof(inc_report_ex_t); out: the bytes filled */
  inc_report_t report;   /* what inc_request_report / inc_last_report give */
  /* Appended after the first version: */
  uint64_t bytes_resent;      /* as inc_request_bytes_resent / inc_last_bytes_resent */
  uint64_t messages_sent;     /* point-to-point messages this rank sent (the segmentation used) */
  uint64_t switch_operations; /* switch operations this rank took part in (0 on the hosts) */
  char offload[16];           /* "edge" when this host's Edge-INC engine ran the call, else "" */
  char wire_handler[32];      /* with offload "edge": the engine's conversion handler, "" for none */
  /* Automatic selection with a tuning file (INC_TUNING): how many paths it weighed, and the
   * first INC_REPORT_PREDICTED_MAX of them, cheapest (the chosen one) first; 0 when the
   * algorithm was given or no tuning applied. */
  uint32_t predicted_count;
  inc_report_prediction_t predicted[INC_REPORT_PREDICTED_MAX];
  /* Reductions: the numerics of each hop (docs/NUMERICS.md, "Per-hop numerics"): how many hops,
   * and the first INC_REPORT_HOPS_MAX of them; 0 for collectives that add nothing. */
  uint32_t hop_count;
  inc_report_hop_t hops[INC_REPORT_HOPS_MAX];
} inc_report_ex_t;

#define INC_REPORT_EX_V1_SIZE offsetof(inc_report_ex_t, bytes_resent)

/* inc_report_ex_t rep = inc_report_ex_init(); zeroed, struct_size set to this header's size. */
static inline inc_report_ex_t inc_report_ex_init(void) {
#ifdef __cplusplus
  inc_report_ex_t r{};
#else
  inc_report_ex_t r = {0};
#endif
  r.struct_size = (uint32_t)sizeof r;
  return r;
}

/* This request's own extended report, and the communicator's last one (as inc_request_report
 * and inc_last_report). */
inc_result_t inc_request_report_ex(inc_request_t req, inc_report_ex_t* out);
inc_result_t inc_last_report_ex(inc_comm_t comm, inc_report_ex_t* out);

const char* inc_last_error(void);
const char* inc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* INC_INC_H */
