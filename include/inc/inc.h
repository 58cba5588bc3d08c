/* INC: the C ABI over inc::Communicator, for C programs and other languages' bindings.
 * Every function returns INC_SUCCESS (0) or an error code; inc_last_error() gives the message
 * of the calling thread's last failure. Handles are opaque; free them with the *_free calls. */
#ifndef INC_INC_H
#define INC_INC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct inc_comm_s* inc_comm_t;
typedef struct inc_request_s* inc_request_t;

typedef enum {
  INC_F64 = 0, INC_F32, INC_F16, INC_BF16, INC_I8, INC_U8, INC_I32, INC_U32, INC_I64, INC_U64
} inc_datatype_t;

typedef enum { INC_SUM = 0, INC_PROD, INC_MIN, INC_MAX, INC_AVG } inc_op_t;

typedef enum {
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
 * Slurm or torchrun variables). */
inc_result_t inc_init(inc_comm_t* comm);
inc_result_t inc_comm_free(inc_comm_t comm);
inc_result_t inc_comm_rank(inc_comm_t comm, int* rank);
inc_result_t inc_comm_size(inc_comm_t comm, int* size);
/* color < 0: this rank joins no new communicator and *out is set to NULL. */
inc_result_t inc_comm_split(inc_comm_t comm, int color, int key, inc_comm_t* out);

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

/* Non-blocking variants: buffers must stay valid until inc_wait returns or inc_test sets
 * *done to 1. A request is freed by inc_wait, or by inc_test when it completes. */
inc_result_t inc_iallreduce(const void* send, void* recv, size_t count, inc_datatype_t type,
                            inc_op_t op, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_iallgather(const void* send, void* recv, size_t send_count,
                            inc_datatype_t type, inc_comm_t comm, inc_request_t* req);
inc_result_t inc_wait(inc_request_t req);
inc_result_t inc_test(inc_request_t req, int* done);

/* The last collective's algorithm name and whether it ran in the network (1) or on hosts. */
inc_result_t inc_last_algorithm(inc_comm_t comm, char* buf, size_t buf_len, int* in_network);

const char* inc_last_error(void);
const char* inc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* INC_INC_H */
