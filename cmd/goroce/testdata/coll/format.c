/* Writes format.golden: nccl-tests' output lines for fixed inputs, made by C's
 * printf with the format strings nccl-tests 2.19.6 documents in its output
 * (src/util.cu), so that TestCollFormatGolden compares goroce coll's Go
 * formatting with the C library's, byte for byte.
 *
 *   cc -o /tmp/format format.c && /tmp/format > format.golden
 */
#include <stdio.h>
#include <string.h>

/* The float cell: two decimals, or one, or none, or exponent form. */
static void cell(double v, int width, char *out) {
  if (snprintf(out, width + 1, "%*.2f", width, v) <= width) return;
  if (snprintf(out, width + 1, "%*.1f", width, v) <= width) return;
  if (snprintf(out, width + 1, "%*.0f", width, v) <= width) return;
  snprintf(out, width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

int main(void) {
  double vals[] = {0, 0.001, 0.004999, 0.005, 1.5, 12.345, 99.999, 123.456, 1234.5678, 9999.99,
                   12345.6, 99999.4, 123456.7, 999999.5, 1234567.0, 98765432.1, 1e9, 3e12};
  int n = sizeof(vals) / sizeof(vals[0]);
  char s[32];
  for (int i = 0; i < n; i++) {
    cell(vals[i], 7, s);
    printf("cell7 [%s]\n", s);
    cell(vals[i], 6, s);
    printf("cell6 [%s]\n", s);
  }
  double gs[] = {0, 1, 7, 123456, 999999, 1000000, 1234567, 0.5, 0.123456789, 0.0001, 0.00001234,
                 1.23456789, 42.0, 0.199999, 3.14159265, 1e-7, 5e20, 2.5};
  n = sizeof(gs) / sizeof(gs[0]);
  for (int i = 0; i < n; i++) printf("g [%g]\n", gs[i]);

  char root[16];
  snprintf(root, sizeof root, "%6i", -1);
  printf("%12li  %12li  %8s  %6s  %6s", 67108864L, 16777216L, "float", "sum", root);
  cell(2048.5, 7, s); char a[8]; cell(0.5, 6, a); char b[8]; cell(0.75, 6, b);
  printf("  %7s  %6s  %6s  %6g", s, a, b, (double)0);
  printf("  %7s  %6s  %6s    N/A", s, a, b);
  printf("\n");
  snprintf(root, sizeof root, "%6i", 3);
  printf("%12li  %12li  %8s  %6s  %6s", 0L, 0L, "bfloat16", "none", root);
  cell(12.25, 7, s); cell(0, 6, a); cell(0, 6, b);
  printf("  %7s  %6s  %6s  %6g\n", s, a, b, (double)1234567);

  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop", "root",
         "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, "");

  printf("# %-20s : %d %s\n", "Out of bounds values", 0, "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", 0.548123456, "");
  printf("#\n");
  printf("# Collective test concluded: %s\n", "all_reduce_perf");
  printf("#\n");
  printf("\n");
  printf("# %-20s : %d %s\n", "Out of bounds values", 2, "FAILED");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", 1.5, "FAILED");
  printf("#\n");
  printf("# Collective test concluded: %s\n", "sendrecv_perf");
  printf("#\n");
  printf("# error: %s\n", "boom");
  return 0;
}
