/* An MPI program written against the MPI standard (no INC in it): every collective the PMPI
 * library intercepts, blocking and not, in place and not, every predefined type and op, on
 * MPI_COMM_WORLD, a dup, a split with reversed keys, a create, split_type, SELF and an
 * intercommunicator; many outstanding requests mixed with point-to-point ones, completed by
 * Waitall/Waitany/Waitsome/Testall/Testany/Test in rank-dependent orders. Every result is
 * checked against values computed here; rank 0 prints a digest of every result byte, so runs
 * with and without the library can be compared (tests/mpi/run_check.sh).
 * usage: mpi_check            (exit 0 when every check passed)
 *        mpi_check sample     (every type x op on a sample, not the full product, on the world too)
 *        mpi_check mismatch   (an erroneous program: ranks disagree on a count; with the library
 *                              the communicator's error handler must get an INC error) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize;
static long checks, failures;
static uint64_t digest = 1469598103934665603ULL;

static void mix(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) digest = (digest ^ b[i]) * 1099511628211ULL;
}

#define CHECK(cond, ...)                                        \
  do {                                                          \
    ++checks;                                                   \
    if (!(cond)) {                                              \
      if (++failures <= 20) {                                   \
        fprintf(stderr, "mpi_check: rank %d: FAIL: ", wrank);  \
        fprintf(stderr, __VA_ARGS__);                           \
        fprintf(stderr, "\n");                                  \
      }                                                         \
    }                                                           \
  } while (0)

/* ---- element types: kind 'i' signed, 'u' unsigned, 'f' floating, 'c' complex double */
typedef struct {
  MPI_Datatype t;
  const char* name;
  char kind;
  int size;
} Type;

static Type types[32];
static int ntypes;
static void add_type(MPI_Datatype t, const char* name, char kind) {
  int s;
  MPI_Type_size(t, &s);
  types[ntypes].t = t;
  types[ntypes].name = name;
  types[ntypes].kind = kind;
  types[ntypes].size = s;
  ++ntypes;
}
static void init_types(void) {
  add_type(MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 'i');
  add_type(MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 'u');
  add_type(MPI_SHORT, "MPI_SHORT", 'i');
  add_type(MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 'u');
  add_type(MPI_INT, "MPI_INT", 'i');
  add_type(MPI_UNSIGNED, "MPI_UNSIGNED", 'u');
  add_type(MPI_LONG, "MPI_LONG", 'i');
  add_type(MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 'u');
  add_type(MPI_LONG_LONG, "MPI_LONG_LONG", 'i');
  add_type(MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 'u');
  add_type(MPI_INT8_T, "MPI_INT8_T", 'i');
  add_type(MPI_INT16_T, "MPI_INT16_T", 'i');
  add_type(MPI_INT32_T, "MPI_INT32_T", 'i');
  add_type(MPI_INT64_T, "MPI_INT64_T", 'i');
  add_type(MPI_UINT8_T, "MPI_UINT8_T", 'u');
  add_type(MPI_UINT16_T, "MPI_UINT16_T", 'u');
  add_type(MPI_UINT32_T, "MPI_UINT32_T", 'u');
  add_type(MPI_UINT64_T, "MPI_UINT64_T", 'u');
  add_type(MPI_AINT, "MPI_AINT", 'i');
  /* Non-negative values only: OpenMPI 4.1 reduces MPI_OFFSET's minimum of negative values
   * wrongly (its own result, with or without the library). */
  add_type(MPI_OFFSET, "MPI_OFFSET", 'u');
  add_type(MPI_COUNT, "MPI_COUNT", 'i');
  add_type(MPI_FLOAT, "MPI_FLOAT", 'f');
  add_type(MPI_DOUBLE, "MPI_DOUBLE", 'f');
  add_type(MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", 'f');
  add_type(MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 'c');
}

static void put(const Type* ty, void* buf, int i, long long v) {
  char* p = (char*)buf + (size_t)i * (size_t)ty->size;
  if (ty->kind == 'f') {
    if (ty->size == 4) { float x = (float)v; memcpy(p, &x, 4); }
    else if (ty->size == 8) { double x = (double)v; memcpy(p, &x, 8); }
    else { long double x = (long double)v; memset(p, 0, (size_t)ty->size); memcpy(p, &x, sizeof x < (size_t)ty->size ? sizeof x : (size_t)ty->size); }
  } else if (ty->kind == 'c') {
    double x[2] = {(double)v, 0.0}; /* real: products stay exact and comparable */
    memcpy(p, x, 16);
  } else {
    switch (ty->size) {
      case 1: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
      case 2: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
      case 4: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
      default: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    }
  }
}
static long long get(const Type* ty, const void* buf, int i) {
  const char* p = (const char*)buf + (size_t)i * (size_t)ty->size;
  if (ty->kind == 'f') {
    if (ty->size == 4) { float x; memcpy(&x, p, 4); return (long long)x; }
    if (ty->size == 8) { double x; memcpy(&x, p, 8); return (long long)x; }
    { long double x; memcpy(&x, p, sizeof x); return (long long)x; }
  }
  if (ty->kind == 'c') { double x[2]; memcpy(x, p, 16); return (long long)x[0]; }
  if (ty->kind == 'u') {
    switch (ty->size) {
      case 1: { uint8_t x; memcpy(&x, p, 1); return x; }
      case 2: { uint16_t x; memcpy(&x, p, 2); return x; }
      case 4: { uint32_t x; memcpy(&x, p, 4); return x; }
      default: { uint64_t x; memcpy(&x, p, 8); return (long long)x; }
    }
  }
  switch (ty->size) {
    case 1: { int8_t x; memcpy(&x, p, 1); return x; }
    case 2: { int16_t x; memcpy(&x, p, 2); return x; }
    case 4: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
  }
}

/* ---- ops */
typedef struct {
  MPI_Op op;
  const char* name;
  int arith; /* 1: SUM PROD MIN MAX (every type); 2: logical; 3: bitwise (integers only) */
} Op;
static Op ops[10];
static int nops;
static void init_ops(void) {
  Op o[] = {{MPI_SUM, "MPI_SUM", 1},   {MPI_PROD, "MPI_PROD", 1}, {MPI_MIN, "MPI_MIN", 1},
            {MPI_MAX, "MPI_MAX", 1},   {MPI_LAND, "MPI_LAND", 2}, {MPI_LOR, "MPI_LOR", 2},
            {MPI_LXOR, "MPI_LXOR", 2}, {MPI_BAND, "MPI_BAND", 3}, {MPI_BOR, "MPI_BOR", 3},
            {MPI_BXOR, "MPI_BXOR", 3}};
  nops = 10;
  memcpy(ops, o, sizeof o);
}
static int op_applies(const Op* op, const Type* ty) {
  if (ty->kind == 'c') return op->op == MPI_SUM || op->op == MPI_PROD;
  if (ty->kind == 'f') return op->arith == 1;
  return 1;
}

/* The value rank r contributes at element i: small, so that sums and products of up to 8
 * ranks fit every type exactly (products of 1s and 2s). */
static long long value(const Op* op, const Type* ty, int r, int i) {
  if (op->op == MPI_PROD) return 1 + (r + i) % 2;
  if (op->arith == 2) return (r * 3 + i) % 4 == 0 ? 0 : (r + i) % 3 + 1;
  if (op->arith == 3) return (r * 5 + i * 7) & 0x3f;
  long long v = (r * 7 + i * 3) % 11;
  return (ty->kind == 'u' ? v : v - 5);
}
static long long expected(const Op* op, const Type* ty, int p, const int* ranks, int i) {
  long long acc = value(op, ty, ranks ? ranks[0] : 0, i);
  for (int k = 1; k < p; ++k) {
    long long v = value(op, ty, ranks ? ranks[k] : k, i);
    if (op->op == MPI_SUM) acc += v;
    else if (op->op == MPI_PROD) acc *= v;
    else if (op->op == MPI_MIN) acc = v < acc ? v : acc;
    else if (op->op == MPI_MAX) acc = v > acc ? v : acc;
    else if (op->op == MPI_LAND) acc = acc && v;
    else if (op->op == MPI_LOR) acc = acc || v;
    else if (op->op == MPI_LXOR) acc = !acc != !v;
    else if (op->op == MPI_BAND) acc &= v;
    else if (op->op == MPI_BOR) acc |= v;
    else if (op->op == MPI_BXOR) acc ^= v;
  }
  if (op->arith == 2 && p > 1) acc = acc != 0; /* one process: its value, unreduced */
  return acc;
}

/* ---- one communicator's checks */
typedef struct {
  MPI_Comm comm;
  const char* name;
  int rank, size;
  int full; /* every type x op, else a sample */
} Comm;

static void* xmalloc(size_t n) { void* p = malloc(n ? n : 1); if (!p) abort(); return p; }

static void check_allreduce(const Comm* c, const Type* ty, const Op* op, int n, int in_place) {
  size_t b = (size_t)n * (size_t)ty->size;
  char* s = xmalloc(b);
  char* r = xmalloc(b);
  for (int i = 0; i < n; ++i) put(ty, in_place ? r : s, i, value(op, ty, c->rank, i));
  MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, n, ty->t, op->op, c->comm);
  for (int i = 0; i < n; ++i) {
    long long e = expected(op, ty, c->size, NULL, i), g = get(ty, r, i);
    if (ty->kind == 'u') e &= (ty->size == 8 ? -1LL : (1LL << (8 * ty->size)) - 1);
    CHECK(g == e, "%s allreduce %s %s n=%d%s [%d]: %lld, expected %lld", c->name, ty->name, op->name, n,
          in_place ? " in place" : "", i, g, e);
    mix(&g, sizeof g); /* the value, not the bytes: long double has padding */
  }
  free(s);
  free(r);
}

static void check_reduce_scatter(const Comm* c, const Type* ty, const Op* op, int n, int in_place, int block) {
  const int p = c->size;
  int* counts = xmalloc(sizeof(int) * (size_t)p);
  int total = 0, offset = 0;
  for (int k = 0; k < p; ++k) {
    counts[k] = block ? n : n + (k % 2);  /* block 0: unequal counts; 1: _block; 2: equal counts */
    if (k < c->rank) offset += counts[k];
    total += counts[k];
  }
  size_t sz = (size_t)ty->size;
  char* s = xmalloc((size_t)total * sz);
  char* r = xmalloc((size_t)total * sz);
  for (int i = 0; i < total; ++i) put(ty, in_place ? r : s, i, value(op, ty, c->rank, i));
  if (block == 1) MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s, r, n, ty->t, op->op, c->comm);
  else MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : s, r, counts, ty->t, op->op, c->comm);
  for (int i = 0; i < counts[c->rank]; ++i) {
    long long e = expected(op, ty, p, NULL, offset + i), g = get(ty, r, i);
    CHECK(g == e, "%s reduce_scatter%s %s %s n=%d%s [%d]: %lld, expected %lld", c->name, block == 1 ? "_block" : "",
          ty->name, op->name, n, in_place ? " in place" : "", i, g, e);
    mix(&g, sizeof g);
  }
  free(counts);
  free(s);
  free(r);
}

static int elem(int r, int i) { return r * 1000 + i; }

static void check_allgather(const Comm* c, int n, int in_place) {
  int* s = xmalloc(sizeof(int) * (size_t)n);
  int* r = xmalloc(sizeof(int) * (size_t)n * (size_t)c->size);
  for (int i = 0; i < n; ++i) (in_place ? r + (size_t)c->rank * n : s)[i] = elem(c->rank, i);
  MPI_Allgather(in_place ? MPI_IN_PLACE : s, n, MPI_INT, r, n, MPI_INT, c->comm);
  for (int k = 0; k < c->size; ++k)
    for (int i = 0; i < n; ++i)
      CHECK(r[k * n + i] == elem(k, i), "%s allgather n=%d%s: block %d [%d] = %d", c->name, n,
            in_place ? " in place" : "", k, i, r[k * n + i]);
  mix(r, sizeof(int) * (size_t)n * (size_t)c->size);
  free(s);
  free(r);
}

static void check_alltoall(const Comm* c, int n, int in_place) {
  size_t all = (size_t)n * (size_t)c->size;
  double* s = xmalloc(sizeof(double) * all);
  double* r = xmalloc(sizeof(double) * all);
  for (int k = 0; k < c->size; ++k)
    for (int i = 0; i < n; ++i) (in_place ? r : s)[k * n + i] = elem(c->rank, k * 100 + i);
  MPI_Alltoall(in_place ? MPI_IN_PLACE : s, n, MPI_DOUBLE, r, n, MPI_DOUBLE, c->comm);
  for (int k = 0; k < c->size; ++k)
    for (int i = 0; i < n; ++i)
      CHECK(r[k * n + i] == elem(k, c->rank * 100 + i), "%s alltoall n=%d%s: from %d [%d] = %g", c->name, n,
            in_place ? " in place" : "", k, i, r[k * n + i]);
  mix(r, sizeof(double) * all);
  free(s);
  free(r);
}

static void check_bcast(const Comm* c, const Type* ty, int n, int root) {
  size_t b = (size_t)n * (size_t)ty->size;
  char* buf = xmalloc(b);
  Op sum = {MPI_SUM, "MPI_SUM", 1};
  for (int i = 0; i < n; ++i) put(ty, buf, i, c->rank == root ? value(&sum, ty, root, i) : 99);
  MPI_Bcast(buf, n, ty->t, root, c->comm);
  for (int i = 0; i < n; ++i) {
    long long g = get(ty, buf, i);
    CHECK(g == value(&sum, ty, root, i), "%s bcast %s n=%d root %d [%d] = %lld", c->name, ty->name, n, root, i, g);
    mix(&g, sizeof g);
  }
  free(buf);
}

/* Pair types (MAXLOC/MINLOC), a user-defined op, a derived datatype: all legal MPI. */
static void my_sum(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}
static void my_first(void* in, void* inout, int* len, MPI_Datatype* t) { /* non-commutative: keeps the lower rank's */
  (void)t;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] = ((int*)in)[i];
}
static void check_special(const Comm* c) {
  struct { int v, r; } in[3], out[3];
  for (int i = 0; i < 3; ++i) in[i].v = (c->rank * 5 + i) % 7, in[i].r = c->rank;
  MPI_Allreduce(in, out, 3, MPI_2INT, MPI_MAXLOC, c->comm);
  for (int i = 0; i < 3; ++i) {
    int best = -1, who = 0;
    for (int k = 0; k < c->size; ++k)
      if ((k * 5 + i) % 7 > best) best = (k * 5 + i) % 7, who = k;
    CHECK(out[i].v == best && out[i].r == who, "%s maxloc [%d]: (%d,%d)", c->name, i, out[i].v, out[i].r);
  }
  mix(out, sizeof out);
  MPI_Op op;
  MPI_Op_create(my_sum, 1, &op);
  int a = c->rank + 1, s = 0;
  MPI_Allreduce(&a, &s, 1, MPI_INT, op, c->comm);
  CHECK(s == c->size * (c->size + 1) / 2, "%s user op sum: %d", c->name, s);
  MPI_Op_free(&op);
  MPI_Op_create(my_first, 0, &op);
  MPI_Allreduce(&a, &s, 1, MPI_INT, op, c->comm);
  CHECK(s == 1, "%s non-commutative op: %d", c->name, s);
  MPI_Op_free(&op);
  MPI_Datatype vec; /* every other int of 4: a type with gaps */
  MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int sv[4] = {c->rank, -1, c->rank + 10, -1};
  int* rv = xmalloc(sizeof(int) * 4 * (size_t)c->size);
  for (int i = 0; i < 4 * c->size; ++i) rv[i] = -7;
  MPI_Allgather(sv, 1, vec, rv, 1, vec, c->comm);
  /* The receive type's extent is 3 ints: block k starts at 3k, holds ints at 3k and 3k+2. */
  for (int k = 0; k < c->size; ++k)
    CHECK(rv[3 * k] == k && rv[3 * k + 2] == k + 10, "%s allgather of a vector type: block %d = %d %d", c->name, k,
          rv[3 * k], rv[3 * k + 2]);
  free(rv);
  MPI_Type_free(&vec);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  int pb[2] = {c->rank == 0 ? 42 : 0, c->rank == 0 ? 43 : 0};
  MPI_Bcast(pb, 1, pair, 0, c->comm);
  CHECK(pb[0] == 42 && pb[1] == 43, "%s bcast of a contiguous type: %d %d", c->name, pb[0], pb[1]);
  MPI_Type_free(&pair);
  int bools[2] = {0, 0};
  _Bool bi = c->rank % 2, bo = 0;
  MPI_Allreduce(&bi, &bo, 1, MPI_C_BOOL, MPI_LOR, c->comm);
  bools[0] = bo;
  CHECK(bo == (c->size > 1), "%s C_BOOL lor: %d", c->name, bo);
  mix(bools, sizeof bools);
}

/* Many outstanding non-blocking collectives and point-to-point requests in one array,
 * completed by `how` (0 Waitall, 1 Waitany, 2 Testall, 3 Waitsome, 4 Testany, 5 Test each,
 * 6 Wait each in reverse) in an order that differs by rank. */
enum { NB_OPS = 16 };
static void check_nonblocking(const Comm* c, int how, int round) {
  const int p = c->size, me = c->rank, n = 5 + round;
  int ar[NB_OPS][64], rs[NB_OPS][64], big[NB_OPS][64 * 8];
  MPI_Request req[NB_OPS + 2];
  int nreq = 0;
  int eq[64]; /* recvcounts stay valid until the calls complete */
  for (int r = 0; r < 64; ++r) eq[r] = 2;
  for (int k = 0; k < NB_OPS; ++k) {
    for (int i = 0; i < n * p && i < 64 * 8; ++i) big[k][i] = -1;
    for (int i = 0; i < 64; ++i) ar[k][i] = elem(me, i + k);
    switch (k % 8) {
      case 0: MPI_Iallreduce(k % 2 ? MPI_IN_PLACE : ar[k], k % 2 ? ar[k] : rs[k], n, MPI_INT, MPI_SUM, c->comm, &req[nreq++]); break;
      case 1: MPI_Ireduce_scatter_block(ar[k], rs[k], n / p + 1 > 64 / p ? 1 : n / p + 1, MPI_INT, MPI_MAX, c->comm, &req[nreq++]); break;
      case 2: MPI_Iallgather(ar[k], n, MPI_INT, big[k], n, MPI_INT, c->comm, &req[nreq++]); break;
      case 3: MPI_Ibcast(ar[k], n, MPI_INT, k % p, c->comm, &req[nreq++]); break;
      case 4: MPI_Ialltoall(ar[k], 1, MPI_INT, big[k], 1, MPI_INT, c->comm, &req[nreq++]); break;
      case 5: MPI_Ibarrier(c->comm, &req[nreq++]); break;
      case 6: MPI_Iallreduce(ar[k], rs[k], n, MPI_INT, MPI_BAND, c->comm, &req[nreq++]); break; /* passes to MPI */
      case 7: MPI_Ireduce_scatter(ar[k], rs[k], eq, MPI_INT, MPI_MIN, c->comm, &req[nreq++]); break;
    }
  }
  int token_out = me * 10 + round, token_in = -1;
  MPI_Irecv(&token_in, 1, MPI_INT, (me + p - 1) % p, 77, c->comm, &req[nreq++]);
  MPI_Isend(&token_out, 1, MPI_INT, (me + 1) % p, 77, c->comm, &req[nreq++]);
  /* a rank-dependent permutation for the per-request methods */
  int order[NB_OPS + 2];
  for (int i = 0; i < nreq; ++i) order[i] = i;
  for (int i = nreq - 1; i > 0; --i) {
    int j = (me * 31 + round * 17 + i * 7) % (i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  MPI_Status st[NB_OPS + 2];
  int done = 0, flag = 0, idx, out, ids[NB_OPS + 2];
  switch (how) {
    case 0: MPI_Waitall(nreq, req, st); break;
    case 1: for (int i = 0; i < nreq; ++i) MPI_Waitany(nreq, req, &idx, MPI_STATUS_IGNORE); break;
    case 2: while (!flag) MPI_Testall(nreq, req, &flag, st); break;
    case 3: while (done < nreq) { MPI_Waitsome(nreq, req, &out, ids, st); done += out; } break;
    case 4: while (done < nreq) { MPI_Testany(nreq, req, &idx, &flag, MPI_STATUS_IGNORE); if (flag && idx != MPI_UNDEFINED) ++done; } break;
    case 5: while (done < nreq) for (int i = 0; i < nreq; ++i) { int q = order[i]; if (req[q] == MPI_REQUEST_NULL) continue; MPI_Test(&req[q], &flag, MPI_STATUS_IGNORE); if (flag) ++done; } break;
    default: for (int i = 0; i < nreq; ++i) MPI_Wait(&req[order[i]], MPI_STATUS_IGNORE); break;
  }
  for (int i = 0; i < nreq; ++i) CHECK(req[i] == MPI_REQUEST_NULL, "%s nb how %d: request %d not freed", c->name, how, i);
  CHECK(token_in == ((me + p - 1) % p) * 10 + round, "%s nb how %d: token %d", c->name, how, token_in);
  for (int k = 0; k < NB_OPS; ++k) {
    int cnt = n / p + 1 > 64 / p ? 1 : n / p + 1;
    switch (k % 8) {
      case 0: {
        int* res = k % 2 ? ar[k] : rs[k];
        for (int i = 0; i < n; ++i) {
          long long e = 0;
          for (int r = 0; r < p; ++r) e += elem(r, i + k);
          CHECK(res[i] == e, "%s nb how %d: iallreduce %d [%d] = %d, expected %lld", c->name, how, k, i, res[i], e);
        }
        mix(res, sizeof(int) * (size_t)n);
        break;
      }
      case 1:
        for (int i = 0; i < cnt; ++i)
          CHECK(rs[k][i] == elem(p - 1, me * cnt + i + k), "%s nb how %d: ireduce_scatter_block %d [%d] = %d", c->name,
                how, k, i, rs[k][i]);
        mix(rs[k], sizeof(int) * (size_t)cnt);
        break;
      case 2:
        for (int r = 0; r < p; ++r)
          for (int i = 0; i < n; ++i)
            CHECK(big[k][r * n + i] == elem(r, i + k), "%s nb how %d: iallgather %d", c->name, how, k);
        mix(big[k], sizeof(int) * (size_t)(n * p));
        break;
      case 3:
        for (int i = 0; i < n; ++i)
          CHECK(ar[k][i] == elem(k % p, i + k), "%s nb how %d: ibcast %d [%d] = %d", c->name, how, k, i, ar[k][i]);
        mix(ar[k], sizeof(int) * (size_t)n);
        break;
      case 4:
        for (int r = 0; r < p; ++r)
          CHECK(big[k][r] == elem(r, me + k), "%s nb how %d: ialltoall %d from %d = %d", c->name, how, k, r, big[k][r]);
        mix(big[k], sizeof(int) * (size_t)p);
        break;
      case 6:
        for (int i = 0; i < n; ++i) {
          int e = elem(0, i + k);
          for (int r = 1; r < p; ++r) e &= elem(r, i + k);
          CHECK(rs[k][i] == e, "%s nb how %d: iallreduce band %d [%d]", c->name, how, k, i);
        }
        break;
      case 7:
        for (int i = 0; i < 2; ++i)
          CHECK(rs[k][i] == elem(0, me * 2 + i + k), "%s nb how %d: ireduce_scatter %d [%d] = %d", c->name, how, k, i,
                rs[k][i]);
        mix(rs[k], sizeof(int) * 2);
        break;
    }
  }
}

/* Every type x op on the full communicators (world): counts 1 and 300, in place and not, and
 * one reduce_scatter (block or not, in place or not, alternating); elsewhere every type with
 * one op, all four counts. Data movement (bcast, allgather, alltoall) on every communicator. */
/* Orders MPI allows that need progress of one kind of call inside the other's wait: every rank
 * starts X; rank 0 waits for X then calls Y, the others call Y then wait for X. X and Y each
 * either INC's kind (MPI_SUM) or one that passes to MPI (MPI_BAND). Then a rendezvous-size
 * Isend posted before a blocking collective while the peer waits for it in MPI_Recv. */
static void check_progress(const Comm* c) {
  for (int kind = 0; kind < 4; ++kind) {
    MPI_Op opx = kind & 1 ? MPI_BAND : MPI_SUM, opy = kind & 2 ? MPI_BAND : MPI_SUM;
    int x = c->rank + 1, rx = 0, y = c->rank + 3, ry = 0;
    MPI_Request req;
    MPI_Iallreduce(&x, &rx, 1, MPI_INT, opx, c->comm, &req);
    if (c->rank == 0) {
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      MPI_Allreduce(&y, &ry, 1, MPI_INT, opy, c->comm);
    } else {
      MPI_Allreduce(&y, &ry, 1, MPI_INT, opy, c->comm);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    int ex = 1, ey = 3;
    for (int r = 1; r < c->size; ++r) {
      ex = kind & 1 ? ex & (r + 1) : ex + r + 1;
      ey = kind & 2 ? ey & (r + 3) : ey + r + 3;
    }
    CHECK(rx == ex && ry == ey, "%s progress order %d: %d %d, expected %d %d", c->name, kind, rx, ry, ex, ey);
    mix(&rx, sizeof rx);
    mix(&ry, sizeof ry);
  }
  if (c->size < 2) return;
  enum { BIG = 1 << 20 }; /* beyond any eager limit */
  char* buf = xmalloc(BIG);
  int v = 1, s = 0;
  if (c->rank == 0) {
    memset(buf, 7, BIG);
    MPI_Request req;
    MPI_Isend(buf, BIG, MPI_CHAR, 1, 9, c->comm, &req);
    MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c->comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    if (c->rank == 1) MPI_Recv(buf, BIG, MPI_CHAR, 0, 9, c->comm, MPI_STATUS_IGNORE);
    MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c->comm);
    if (c->rank == 1) CHECK(buf[0] == 7 && buf[BIG - 1] == 7, "%s rendezvous Isend before a collective", c->name);
  }
  CHECK(s == c->size, "%s allreduce after a rendezvous Isend: %d", c->name, s);
  free(buf);
}

static void check_comm(const Comm* c) {
  static const int counts[] = {0, 1, 7, 300};
  int pair = 0;
  for (int t = 0; t < ntypes; ++t)
    for (int o = 0; o < nops; ++o) {
      const Type* ty = &types[t];
      const Op* op = &ops[o];
      if (!op_applies(op, ty)) continue;
      if (c->full) {
        ++pair;
        for (int ip = 0; ip < 2; ++ip) {
          check_allreduce(c, ty, op, 1, ip);
          check_allreduce(c, ty, op, 300, ip);
        }
        check_reduce_scatter(c, ty, op, 3, pair % 2, (pair / 2) % 3);
      } else if (o == t % nops || (ty->kind != 'i' && ty->kind != 'u' && o == 0)) {
        for (int k = 0; k < 4; ++k) check_allreduce(c, ty, op, counts[k], k % 2);
        for (int ip = 0; ip < 2; ++ip)
          for (int block = 0; block < 3; ++block) check_reduce_scatter(c, ty, op, 3, ip, block);
      }
    }
  for (int t = 0; t < ntypes; ++t)
    for (int root = 0; root < c->size; ++root)
      if (c->full || root == t % c->size) check_bcast(c, &types[t], t % 2 ? 33 : 0, root);
  for (int k = 0; k < 4; ++k)
    for (int ip = 0; ip < 2; ++ip) {
      check_allgather(c, counts[k], ip);
      check_alltoall(c, counts[k] > 7 ? 40 : counts[k], ip);
    }
  check_reduce_scatter(c, &types[4], &ops[0], 0, 0, 1);
  MPI_Barrier(c->comm);
  check_progress(c);
  check_special(c);
  for (int how = 0; how < 7; ++how)
    for (int round = 0; round < (c->full ? 3 : 1); ++round) check_nonblocking(c, how, round);
}

static int handler_calls;
static char handler_msg[MPI_MAX_ERROR_STRING];
static void on_error(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  int len = 0;
  MPI_Error_string(*code, handler_msg, &len);
  ++handler_calls;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (argc > 1 && strcmp(argv[1], "mismatch") == 0) {
    /* Erroneous on purpose: rank 0 reduces 4 ints, the others 3. The communicator's error
     * handler must be called with an error that says what happened. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(on_error, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    int v[4] = {1, 2, 3, 4}, r[4];
    int rc = MPI_Allreduce(v, r, wrank == 0 ? 4 : 3, MPI_INT, MPI_SUM, dup);
    printf("mpi_check: rank %d: mismatch rc=%d handler=%d msg=%s\n", wrank, rc != MPI_SUCCESS, handler_calls, handler_msg);
    fflush(stdout);
    int ok = rc != MPI_SUCCESS && handler_calls == 1;
    MPI_Finalize();
    return ok ? 0 : 1;
  }
  init_types();
  init_ops();
  Comm world = {MPI_COMM_WORLD, "world", wrank, wsize, !(argc > 1 && strcmp(argv[1], "sample") == 0)};
  check_comm(&world);
  MPI_Comm dup, split, created, shared;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  Comm cd = {dup, "dup", wrank, wsize, 0};
  check_comm(&cd);
  /* split by parity, keys reversed: ranks in the new communicator run backwards */
  MPI_Comm_split(dup, wrank % 2, wsize - wrank, &split);
  Comm cs = {split, "split", 0, 0, 0};
  MPI_Comm_rank(split, &cs.rank);
  MPI_Comm_size(split, &cs.size);
  check_comm(&cs);
  /* create: every rank but 0 (the whole world when alone) */
  MPI_Group wg, g;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int zero = 0;
  if (wsize > 1) MPI_Group_excl(wg, 1, &zero, &g);
  else g = wg;
  MPI_Comm_create(MPI_COMM_WORLD, g, &created);
  if (created != MPI_COMM_NULL) {
    Comm cc = {created, "create", 0, 0, 0};
    MPI_Comm_rank(created, &cc.rank);
    MPI_Comm_size(created, &cc.size);
    check_comm(&cc);
    MPI_Comm_free(&created);
  }
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  Comm csh = {shared, "shared", 0, 0, 0};
  MPI_Comm_rank(shared, &csh.rank);
  MPI_Comm_size(shared, &csh.size);
  check_comm(&csh);
  Comm self = {MPI_COMM_SELF, "self", 0, 1, 0};
  check_comm(&self);
  if (wsize > 1) { /* an intercommunicator between the parities: allreduce sums the other group */
    MPI_Comm inter;
    /* split's rank 0 is the highest world rank of its parity (keys reversed) */
    const int top = wsize - 1, top_even = top - top % 2, top_odd = top % 2 ? top : top - 1;
    MPI_Intercomm_create(split, 0, MPI_COMM_WORLD, wrank % 2 ? top_even : top_odd, 5, &inter);
    int v = wrank, s = 0, e = 0;
    MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, inter);
    for (int r = 0; r < wsize; ++r) if (r % 2 != wrank % 2) e += r;
    CHECK(s == e, "intercommunicator allreduce: %d, expected %d", s, e);
    MPI_Comm_free(&inter);
  }
  MPI_Comm_free(&split);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&dup);
  if (g != wg) MPI_Group_free(&g);
  MPI_Group_free(&wg);
  long total[2] = {checks, failures}, sum[2];
  MPI_Allreduce(total, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  uint64_t* all = xmalloc(sizeof(uint64_t) * (size_t)wsize);
  MPI_Gather(&digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (wrank == 0) {
    digest = 1469598103934665603ULL;
    mix(all, sizeof(uint64_t) * (size_t)wsize);
    printf("mpi_check: %d ranks: %ld checks, %ld failed, digest %016llx\n", wsize, sum[0], sum[1],
           (unsigned long long)digest);
  }
  free(all);
  MPI_Finalize();
  return sum[1] == 0 ? 0 : 1;
}
