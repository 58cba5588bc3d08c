/* MPI_Allreduce (float sum) latency and bandwidth, written against the MPI standard only, so
 * that the same binary runs with and without the PMPI library (bench/mpi/compare.sh).
 * usage: allreduce_bench [min_bytes max_bytes]   (defaults 8 and 4 MiB, x4 steps)
 * Each size: a warm-up, then 7 repetitions of a batch (about 64 MiB or 200 calls), each
 * repetition's time the slowest rank's; prints the median per call and the algorithm bandwidth
 * (bytes / time), and checks the result of the last call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long lo = argc > 2 ? atol(argv[1]) : 8, hi = argc > 2 ? atol(argv[2]) : 4L << 20;
  float* s = malloc((size_t)hi);
  float* r = malloc((size_t)hi);
  if (!s || !r) MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank == 0) printf("%12s %12s %12s\n", "bytes", "us", "GB/s");
  for (long bytes = lo; bytes <= hi; bytes *= 4) {
    int n = (int)(bytes / 4);
    for (int i = 0; i < n; ++i) s[i] = (float)(rank + i % 7);
    int iters = (int)((64L << 20) / bytes);
    if (iters > 200) iters = 200;
    if (iters < 3) iters = 3;
    MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t[7];
    for (int k = 0; k < 7; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int it = 0; it < iters; ++it) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / iters, slowest;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t[k] = slowest;
    }
    qsort(t, 7, sizeof t[0], cmp);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      float e = (float)(size * (size - 1) / 2 + size * (i % 7));
      if (r[i] != e) bad = 1;
    }
    int anybad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad) {
      if (rank == 0) fprintf(stderr, "allreduce_bench: wrong result at %ld bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) printf("%12ld %12.2f %12.3f\n", bytes, t[3] * 1e6, bytes / t[3] / 1e9);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
