/* Small dense helpers of the copy-task C kernel (kernel.c includes this file once):
   a vectorisable float exp, sigmoid and tanh, a register-blocked gemm, transpose, column sums. */
#include <math.h>
#include <stdint.h>

/* exp for float, branch-free so that loops over it vectorise (Cephes expf polynomial) */
static inline float fexp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float z = floorf(x * 1.44269504088896341f + 0.5f);
  x = x - z * 0.693359375f + z * 2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * x + 1.3981999507E-3f;
  p = p * x + 8.3334519073E-3f;
  p = p * x + 4.1665795894E-2f;
  p = p * x + 1.6666665459E-1f;
  p = p * x + 5.0000001201E-1f;
  p = p * x * x + x + 1.0f;
  union { int32_t i; float f; } u;
  u.i = ((int32_t)z + 127) << 23;
  return p * u.f;
}
static inline float fsigmoid(float x) { return 1.0f / (1.0f + fexp(-x)); }
static inline float ftanh(float x) { return 2.0f / (1.0f + fexp(-2.0f * x)) - 1.0f; }

/* C (m x n, ldc) = [C +] op(A) @ Bm, Bm (k x n, ldb), row-major; op(A)[i][p] = A[i*as_i + p*as_p]
   (A itself: as_i = lda, as_p = 1; A transposed: as_i = 1, as_p = lda).  Register-blocked:
   4 rows x 16 columns of C stay in 8 AVX registers while p runs over k. */
#define MR 4
#define NR 16
typedef float v8 __attribute__((vector_size(32), aligned(4)));  /* 8 floats, unaligned access */
static void gemm(int m, int n, int k, const float* restrict A, long as_i, long as_p,
                 const float* restrict Bm, int ldb, float* restrict C, int ldc, int acc) {
  int i = 0;
  for (; i + MR <= m; i += MR) {
    int j = 0;
    for (; j + NR <= n; j += NR) {
      float* c0 = C + (long)i * ldc + j; float* c1 = c0 + ldc; float* c2 = c1 + ldc; float* c3 = c2 + ldc;
      v8 z = {0, 0, 0, 0, 0, 0, 0, 0};
      v8 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z;
      const float* a0 = A + (long)i * as_i; const float* a1 = a0 + as_i; const float* a2 = a1 + as_i;
      const float* a3 = a2 + as_i;
      const float* bp = Bm + j;
      for (int p = 0; p < k; p++, bp += ldb) {
        const v8 b0 = *(const v8*)bp, b1 = *(const v8*)(bp + 8);
        const long o = (long)p * as_p;
        const float x0 = a0[o], x1 = a1[o], x2 = a2[o], x3 = a3[o];
        c00 += x0 * b0; c01 += x0 * b1; c10 += x1 * b0; c11 += x1 * b1;
        c20 += x2 * b0; c21 += x2 * b1; c30 += x3 * b0; c31 += x3 * b1;
      }
      if (acc) {
        c00 += *(v8*)c0; c01 += *(v8*)(c0 + 8); c10 += *(v8*)c1; c11 += *(v8*)(c1 + 8);
        c20 += *(v8*)c2; c21 += *(v8*)(c2 + 8); c30 += *(v8*)c3; c31 += *(v8*)(c3 + 8);
      }
      *(v8*)c0 = c00; *(v8*)(c0 + 8) = c01; *(v8*)c1 = c10; *(v8*)(c1 + 8) = c11;
      *(v8*)c2 = c20; *(v8*)(c2 + 8) = c21; *(v8*)c3 = c30; *(v8*)(c3 + 8) = c31;
    }
    if (j < n) {  /* column tail */
      for (int r = 0; r < MR; r++) {
        float* restrict cr = C + (long)(i + r) * ldc;
        if (!acc) for (int q = j; q < n; q++) cr[q] = 0.0f;
        for (int p = 0; p < k; p++) {
          const float av = A[(long)(i + r) * as_i + (long)p * as_p];
          const float* restrict b = Bm + (long)p * ldb;
          for (int q = j; q < n; q++) cr[q] += av * b[q];
        }
      }
    }
  }
  for (; i < m; i++) {  /* row tail */
    float* restrict cr = C + (long)i * ldc;
    if (!acc) for (int q = 0; q < n; q++) cr[q] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float av = A[(long)i * as_i + (long)p * as_p];
      const float* restrict b = Bm + (long)p * ldb;
      for (int q = 0; q < n; q++) cr[q] += av * b[q];
    }
  }
}

static void gemm_nn(int m, int n, int k, const float* A, int lda, const float* Bm, int ldb, float* C,
                    int ldc, int acc) {
  gemm(m, n, k, A, lda, 1, Bm, ldb, C, ldc, acc);
}

/* C (m x n, ldc) = [C +] A^T @ Bm, A (k x m, lda), Bm (k x n, ldb) */
static void gemm_tn(int m, int n, int k, const float* A, int lda, const float* Bm, int ldb,
                    float* C, int ldc, int acc, float* scratch) {
  (void)scratch;
  gemm(m, n, k, A, 1, lda, Bm, ldb, C, ldc, acc);
}

/* out (n x m) = transpose of in (m x n, ldi) */
static void transpose(const float* in, int m, int n, int ldi, float* out) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) out[(long)j * m + i] = in[(long)i * ldi + j];
}

static void colsum(const float* A, int rows, int cols, float* out) {
  for (int j = 0; j < cols; j++) out[j] = 0.0f;
  for (int i = 0; i < rows; i++) for (int j = 0; j < cols; j++) out[j] += A[(long)i * cols + j];
}
