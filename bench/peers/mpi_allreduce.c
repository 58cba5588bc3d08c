/* Peer benchmark: MPI_Allreduce (f32 sum) with the same methodology and CSV columns as
 * `inc bench`, for scripts/compare-peers.sh (docs/PEERS.md). Run it under mpirun, e.g. Open MPI
 * over TCP on loopback:
 *
 *   mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self \
 *          --mca btl_tcp_if_include lo -np 8 inc_mpi_allreduce -b 8 -e 64M -f 4
 *
 * Per size: one verified run on a fresh input pattern (every rank checks every element; the
 * wrong-element counts are summed over ranks), -w untimed runs, a barrier, -i timed
 * back-to-back runs; time_us = the slowest rank's mean per run. Out of place, like `inc bench`.
 * The algorithm MPI_Allreduce picks is the library's own choice (Open MPI: coll/tuned decides
 * by communicator and message size unless told otherwise with --mca coll_tuned_*); the CSV
 * algo column is the label given with --label (default "ompi_tcp"). Rank 0 prints the CSV. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kUsage =
    "usage: inc_mpi_allreduce [options]   (under mpirun)\n"
    "  -b BYTES      smallest size (K, M, G suffixes = 2^10, 2^20, 2^30)  [8]\n"
    "  -e BYTES      largest size                                         [64M]\n"
    "  -f F          size factor                                          [2]\n"
    "  -i N          timed iterations per size                            [20]\n"
    "  -w N          untimed warm-up iterations per size                  [5]\n"
    "  --label NAME  CSV algo column                                      [ompi_tcp]\n"
    "  --no-header   do not print the CSV header\n";

static int g_rank = 0;

static void usage(const char* msg, const char* arg) {
  if (g_rank == 0) fprintf(stderr, "inc_mpi_allreduce: %s%s\n\n%s", msg, arg ? arg : "", kUsage);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static uint64_t parse_bytes(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  double mul = 1;
  if (strcmp(end, "K") == 0 || strcmp(end, "k") == 0)
    mul = 1024.0;
  else if (strcmp(end, "M") == 0 || strcmp(end, "m") == 0)
    mul = 1024.0 * 1024;
  else if (strcmp(end, "G") == 0 || strcmp(end, "g") == 0)
    mul = 1024.0 * 1024 * 1024;
  else if (*end != '\0' && strcmp(end, "B") != 0)
    usage("bad size ", s);
  if (!(v >= 0) || v * mul > 4.0 * 1024 * 1024 * 1024) usage("bad size ", s);
  return (uint64_t)(v * mul);
}

static long parse_long(const char* s, long lo, long hi) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) usage("bad number ", s);
  return v;
}

/* Same input pattern as `inc bench` (tools/bench_core.cpp): small integers, exact in f32. */
static float pattern(int rank, uint64_t i) {
  return 1.0f + (float)(((uint64_t)rank * 7 + i * 3) % 4);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  uint64_t min_b = 8, max_b = 64ull << 20;
  double factor = 2;
  int iters = 20, warmup = 5, header = 1;
  const char* label = "ompi_tcp";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      if (g_rank == 0) fputs(kUsage, stdout);
      MPI_Finalize();
      return 0;
    }
    if (strcmp(a, "--no-header") == 0) {
      header = 0;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for ", a);
    const char* v = argv[++i];
    if (strcmp(a, "-b") == 0)
      min_b = parse_bytes(v);
    else if (strcmp(a, "-e") == 0)
      max_b = parse_bytes(v);
    else if (strcmp(a, "-f") == 0) {
      factor = strtod(v, NULL);
      if (!(factor > 1)) usage("-f must be > 1: ", v);
    } else if (strcmp(a, "-i") == 0)
      iters = (int)parse_long(v, 1, 1000000);
    else if (strcmp(a, "-w") == 0)
      warmup = (int)parse_long(v, 0, 1000000);
    else if (strcmp(a, "--label") == 0)
      label = v;
    else
      usage("unknown option ", a);
  }
  if (max_b < min_b) usage("-e is smaller than -b", NULL);

  float expect[12];
  for (int k = 0; k < 12; ++k) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += pattern(r, (uint64_t)k);
    expect[k] = s;
  }
  if (g_rank == 0 && header)
    printf(
        "collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,"
        "correct\n");
  fflush(stdout);

  int failed = 0;
  for (uint64_t bytes = min_b; bytes <= max_b;) {
    uint64_t count = bytes / sizeof(float);
    if (count > 0) {
      float* in = malloc(count * sizeof(float));
      float* out = malloc(count * sizeof(float));
      if (!in || !out) usage("out of memory", NULL);
      for (uint64_t i = 0; i < count; ++i) in[i] = pattern(g_rank, i);
      memset(out, 0, count * sizeof(float));
      /* count fits in int for every size this tool accepts (<= 4 GiB of f32 = 2^30 elements). */
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      unsigned long long wrong = 0, total_wrong = 0;
      for (uint64_t i = 0; i < count; ++i)
        if (out[i] != expect[i % 12]) ++wrong;
      MPI_Allreduce(&wrong, &total_wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

      for (int i = 0; i < warmup; ++i)
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i)
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double local_us = (MPI_Wtime() - t0) * 1e6 / iters, us = 0;
      MPI_Allreduce(&local_us, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      double used = (double)(count * sizeof(float));
      double algbw = us > 0 ? used / (us * 1e-6) / 1e9 : 0;
      double busbw = algbw * 2.0 * (n - 1) / n;
      if (g_rank == 0) {
        printf("allreduce,%llu,%llu,f32,sum,%s,0,%d,%.3f,%.4f,%.4f,%d\n",
               (unsigned long long)(count * sizeof(float)), (unsigned long long)count, label, n, us,
               algbw, busbw, total_wrong == 0 ? 1 : 0);
        fflush(stdout);
        if (total_wrong)
          fprintf(stderr, "inc_mpi_allreduce: %llu bytes: %llu wrong elements\n",
                  (unsigned long long)bytes, total_wrong);
      }
      if (total_wrong) failed = 1;
      free(in);
      free(out);
    }
    uint64_t next = (uint64_t)llround((double)bytes * factor);
    bytes = next > bytes ? next : bytes + 1;
  }
  MPI_Finalize();
  return failed;
}
