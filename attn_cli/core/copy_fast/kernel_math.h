/* Small dense helpers of the copy-task C kernel (kernel.c includes this file once):
   a float exp, sigmoid and tanh, a register-blocked gemm, transpose, column sums.

   The same bits from every vector width.  The kernel is built twice from this source, for
   AVX2 (8 floats per vector) and for AVX-512 (16), and both must give identical results.
   So the arithmetic of every output element is fixed here, whatever the width:
   - it is compiled with -ffp-contract=off: a multiply-add is fused only where fmaf() (or
     the vector fma below) says so, never by the compiler's choice;
   - vectors only ever run across independent output elements; every sum runs in one fixed
     scalar order (a dot product over k from k = 0, a softmax sum from t = 0), never split
     into lanes, so the width cannot reorder it;
   - exp, sigmoid and tanh are the polynomial below, not libm's (whose vector versions
     differ); division and square root are IEEE (exact in any width).
   The fmaf() calls sit exactly where GCC's -ffp-contract=fast put them in the kernel before
   the two variants existed, so the numbers are those of that kernel, bit for bit. */
#include <math.h>
#include <stdint.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* exp for float, branch-free so that loops over it vectorise (Cephes expf polynomial) */
static inline float fexp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float z = floorf(fmaf(x, 1.44269504088896341f, 0.5f));
  x = fmaf(z, 2.12194440e-4f, fmaf(-z, 0.693359375f, x));
  float p = 1.9875691500E-4f;
  p = fmaf(p, x, 1.3981999507E-3f);
  p = fmaf(p, x, 8.3334519073E-3f);
  p = fmaf(p, x, 4.1665795894E-2f);
  p = fmaf(p, x, 1.6666665459E-1f);
  p = fmaf(p, x, 5.0000001201E-1f);
  p = fmaf(p * x, x, x) + 1.0f;
  union { int32_t i; float f; } u;
  u.i = ((int32_t)z + 127) << 23;
  return p * u.f;
}
/* expf exactly as glibc (2.28 and later) computes it on a CPU with FMA (sysdeps/ieee754/flt-32/
   e_expf.c, the __expf_fma build that glibc's ifunc picks on every x86-64 CPU these variants run
   on): in double, 2^(k/32) from a 32-entry table times a cubic in r, fused where that build fuses,
   then rounded to float.  The kernel's cross-entropy called libm's expf; this gives its bits
   (equal to glibc 2.36's on every float <= 0, checked once in full; tests/test_kernel_expf.py
   checks a dense sample) without a call per element, branch-free so that its loop vectorises,
   and without depending on which libm the host has (the loss's log, once per row, still does).
   Arguments here are <= 0 (logit minus the row's maximum): below log(0x1p-149) libm returns
   0x1p-149 (its errno path) or, below log(0x1p-150), 0. */
static const uint64_t EXPF_TAB[32] = {
  0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
  0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
  0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
  0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
  0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
  0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
  0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
  0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
static inline float expf_libm(float x) {
  const double xd = (double)x;
  const double kds = fma(0x1.71547652b82fep+5, xd, 0x1.8p+52);  /* x 32/ln2 + shift */
  union { double d; uint64_t u; } ki = {kds}, t;
  const double kd = kds - 0x1.8p+52;
  const double r = fma(0x1.71547652b82fep+5, xd, -kd);
  t.u = EXPF_TAB[ki.u % 32] + (ki.u << 47);
  const double z = fma(0x1.c6af84b912394p-20, r, 0x1.ebfce50fac4f3p-13);
  const double r2 = r * r;
  double y = fma(0x1.62e42ff0c52d6p-6, r, 1.0);
  y = fma(z, r2, y);
  const float f = (float)(y * t.d);
  return x < -0x1.9d1d9ep6f ? (x < -0x1.9fe368p6f ? 0.0f : 0x1p-149f) : f;
}

static inline float fsigmoid(float x) { return 1.0f / (1.0f + fexp(-x)); }
static inline float ftanh(float x) { return 2.0f / (1.0f + fexp(-2.0f * x)) - 1.0f; }

/* one vector of VW floats: the only place the width appears */
#if defined(__AVX512F__)
#define VW 16
typedef __m512 vf;
#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps((p), (v))
#define vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define vadd(a, b) _mm512_add_ps((a), (b))
#define vmul(a, b) _mm512_mul_ps((a), (b))
#define vset1(x) _mm512_set1_ps(x)
#define vzero() _mm512_setzero_ps()
#define KERNEL_ISA "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define VW 8
typedef __m256 vf;
#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps((p), (v))
#define vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define vadd(a, b) _mm256_add_ps((a), (b))
#define vmul(a, b) _mm256_mul_ps((a), (b))
#define vset1(x) _mm256_set1_ps(x)
#define vzero() _mm256_setzero_ps()
#define KERNEL_ISA "avx2"
#else
#define VW 1
typedef float vf;
#define vload(p) (*(p))
#define vstore(p, v) (*(p) = (v))
#define vfma(a, b, c) fmaf((a), (b), (c))
#define vadd(a, b) ((a) + (b))
#define vmul(a, b) ((a) * (b))
#define vset1(x) (x)
#define vzero() 0.0f
#define KERNEL_ISA "baseline"
#endif

/* C (m x n, ldc) = [C +] op(A) @ Bm, Bm (k x n, ldb), row-major; op(A)[i][p] = A[i*as_i + p*as_p]
   (A itself: as_i = lda, as_p = 1; A transposed: as_i = 1, as_p = lda).

   What each element computes (the same in every build): for i < m4 = m - m % 4 and
   j < n16 = n - n % 16 (the "block" part), s = 0, s = fma(a_p, b_p, s) for p = 0 .. k-1,
   then C = s (+ C when acc); elsewhere (the tails) s starts at C (acc) or 0 and takes the
   same fmas.  How the block part is cut into register tiles (4 rows x NB columns, NB a
   multiple of 16 that suits the width) changes no number. */
#define MR 4
#define NQ 16  /* the block part's column quantum */

/* one tile: rows 0..mr-1 (mr = 4 or 8), columns 0..nv*VW-1 of A, Bm, C (all inside the block
   part): mr x nv accumulators in registers while p runs over k */
static inline __attribute__((always_inline)) void tile(const int mr, const int nv, int k, const float* restrict A,
                                                       long as_i, long as_p, const float* restrict Bm, int ldb,
                                                       float* restrict C, int ldc, int acc) {
  vf c[8][3];
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
    for (int v = 0; v < nv; v++) c[r][v] = vzero();
  const float* ar[8];  /* row pointers, moved along p (A transposed: 8 consecutive floats) */
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++) ar[r] = A + r * as_i;
  const float* bp = Bm;
  for (int p = 0; p < k; p++, bp += ldb) {
    vf b[3];
#pragma GCC unroll 3
    for (int v = 0; v < nv; v++) b[v] = vload(bp + v * VW);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      const vf x = vset1(*ar[r]); ar[r] += as_p;
#pragma GCC unroll 3
      for (int v = 0; v < nv; v++) c[r][v] = vfma(x, b[v], c[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++) {
    float* cr = C + (long)r * ldc;
#pragma GCC unroll 3
    for (int v = 0; v < nv; v++) vstore(cr + v * VW, acc ? vadd(c[r][v], vload(cr + v * VW)) : c[r][v]);
  }
}

#if VW > 1
/* the column tail of 4 rows (nt < 16 columns) with the tails' rule (s starts at C or 0, then the
   fmas in p order), kept in registers across p: masked loads and stores past column nt */
#if VW == 16
typedef __mmask16 vmask;
static inline vmask tail_mask(int nt) { return (vmask)((1u << nt) - 1u); }
#define vload_m(p, m) _mm512_maskz_loadu_ps((m), (p))
#define vstore_m(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#else
typedef __m256i vmask;
static inline vmask tail_mask(int nt) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(nt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define vload_m(p, m) _mm256_maskload_ps((p), (m))
#define vstore_m(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#endif
static void tail_tile(int nt, int k, const float* restrict A, long as_i, long as_p, const float* restrict Bm,
                      int ldb, float* restrict C, int ldc, int acc) {
  for (int j = 0; j < nt; j += VW) {  /* VW columns at a time, the last ones masked */
    const vmask m = tail_mask(nt - j < VW ? nt - j : VW);
    float* c0 = C + j; float* c1 = c0 + ldc; float* c2 = c1 + ldc; float* c3 = c2 + ldc;
    vf s0 = acc ? vload_m(c0, m) : vzero(), s1 = acc ? vload_m(c1, m) : vzero();
    vf s2 = acc ? vload_m(c2, m) : vzero(), s3 = acc ? vload_m(c3, m) : vzero();
    const float* a0 = A; const float* a1 = A + as_i; const float* a2 = A + 2 * as_i; const float* a3 = A + 3 * as_i;
    for (int p = 0; p < k; p++) {
      const vf b = vload_m(Bm + (long)p * ldb + j, m);
      const long o = (long)p * as_p;
      s0 = vfma(vset1(a0[o]), b, s0); s1 = vfma(vset1(a1[o]), b, s1);
      s2 = vfma(vset1(a2[o]), b, s2); s3 = vfma(vset1(a3[o]), b, s3);
    }
    vstore_m(c0, m, s0); vstore_m(c1, m, s1); vstore_m(c2, m, s2); vstore_m(c3, m, s3);
  }
}
#endif

static void gemm(int m, int n, int k, const float* restrict A, long as_i, long as_p,
                 const float* restrict Bm, int ldb, float* restrict C, int ldc, int acc) {
  const int m4 = m - m % MR, n16 = n - n % NQ;
  for (int i = 0; i < m4;) {
    const float* Ai = A + (long)i * as_i; float* Ci = C + (long)i * ldc;
    int j = 0, rows = MR;
#if VW == 16
    /* AVX-512 (32 registers): 8 rows x 48, 32 or 16 columns where 8 rows remain, else 4 x 16 */
    if (i + 2 * MR <= m4) {
      rows = 2 * MR;
      for (; j + 48 <= n16; j += 48) tile(8, 3, k, Ai, as_i, as_p, Bm + j, ldb, Ci + j, ldc, acc);
      for (; j + 32 <= n16; j += 32) tile(8, 2, k, Ai, as_i, as_p, Bm + j, ldb, Ci + j, ldc, acc);
      for (; j + 16 <= n16; j += 16) tile(8, 1, k, Ai, as_i, as_p, Bm + j, ldb, Ci + j, ldc, acc);
    }
    for (; j + 16 <= n16; j += 16) tile(4, 1, k, Ai, as_i, as_p, Bm + j, ldb, Ci + j, ldc, acc);
#elif VW == 8
    /* AVX2 (16 registers): 4 rows x 16 columns, 8 accumulators */
    for (; j + 16 <= n16; j += 16) tile(4, 2, k, Ai, as_i, as_p, Bm + j, ldb, Ci + j, ldc, acc);
#else
    for (; j < n16; j++) {  /* no vectors (baseline build): the block part's rule, one column at a time */
      for (int r = 0; r < MR; r++) {
        float s = 0.0f;
        for (int p = 0; p < k; p++) s = fmaf(Ai[(long)r * as_i + (long)p * as_p], Bm[(long)p * ldb + j], s);
        Ci[(long)r * ldc + j] = acc ? s + Ci[(long)r * ldc + j] : s;
      }
    }
#endif
    for (int h = 0; h < rows && j < n; h += MR) {  /* column tail, 4 rows at a time */
#if VW > 1
      tail_tile(n - j, k, Ai + (long)h * as_i, as_i, as_p, Bm + j, ldb, Ci + (long)h * ldc + j, ldc, acc);
#else
      for (int r = h; r < h + MR; r++) {
        float* restrict cr = Ci + (long)r * ldc;
        if (!acc) for (int q = j; q < n; q++) cr[q] = 0.0f;
        for (int p = 0; p < k; p++) {
          const float av = Ai[(long)r * as_i + (long)p * as_p];
          const float* restrict b = Bm + (long)p * ldb;
          for (int q = j; q < n; q++) cr[q] = fmaf(av, b[q], cr[q]);
        }
      }
#endif
    }
    i += rows;
  }
  for (int i = m4; i < m; i++) {  /* row tail */
    float* restrict cr = C + (long)i * ldc;
    if (!acc) for (int q = 0; q < n; q++) cr[q] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float av = A[(long)i * as_i + (long)p * as_p];
      const float* restrict b = Bm + (long)p * ldb;
      for (int q = 0; q < n; q++) cr[q] = fmaf(av, b[q], cr[q]);
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

/* out[j] (j < n) = s_j with s_j = (acc ? out[j] : 0), then s_j = fma(x[p], M[p*ldm + j], s_j)
   for p = 0 .. k-1: a row vector times a matrix, each element's sum in p order (as a loop that
   updates out[] in memory for each p), kept in registers across p. */
static void vecmat(int n, int k, const float* restrict x, const float* restrict M, long ldm,
                   float* restrict out, int acc) {
  int j = 0;
#if VW > 1
  for (; j + 2 * VW <= n; j += 2 * VW) {
    vf s0 = acc ? vload(out + j) : vzero(), s1 = acc ? vload(out + j + VW) : vzero();
    const float* mp = M + j;
    for (int p = 0; p < k; p++, mp += ldm) {
      const vf xp = vset1(x[p]);
      s0 = vfma(xp, vload(mp), s0); s1 = vfma(xp, vload(mp + VW), s1);
    }
    vstore(out + j, s0); vstore(out + j + VW, s1);
  }
  for (; j + VW <= n; j += VW) {
    vf s0 = acc ? vload(out + j) : vzero();
    const float* mp = M + j;
    for (int p = 0; p < k; p++, mp += ldm) s0 = vfma(vset1(x[p]), vload(mp), s0);
    vstore(out + j, s0);
  }
  if (j < n) {  /* the last n - j < VW columns: masked, the same fmas */
    const vmask m = tail_mask(n - j);
    vf s0 = acc ? vload_m(out + j, m) : vzero();
    const float* mp = M + j;
    for (int p = 0; p < k; p++, mp += ldm) s0 = vfma(vset1(x[p]), vload_m(mp, m), s0);
    vstore_m(out + j, m, s0);
    j = n;
  }
#endif
  if (j < n) {
    if (!acc) for (int q = j; q < n; q++) out[q] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float xp = x[p]; const float* restrict mp = M + (long)p * ldm;
      for (int q = j; q < n; q++) out[q] = fmaf(xp, mp[q], out[q]);
    }
  }
}

/* vecmat for nb independent rows at once: row b takes x + b*xs, M + b*ms, out + b*os.  Four
   rows share each pass over the columns (8 accumulators in flight instead of 2): the same
   fmas per element as vecmat, in the same order. */
static void vecmat_rows(int nb, int n, int k, const float* restrict x, long xs,
                        const float* restrict M, long ms, long ldm, float* restrict out, long os, int acc) {
  int b = 0;
#if VW > 1
  for (; b + 4 <= nb; b += 4) {
    const float* x0 = x + b * xs; const float* x1 = x0 + xs; const float* x2 = x1 + xs; const float* x3 = x2 + xs;
    const float* m0 = M + b * ms; float* o0 = out + b * os;
    int j = 0;
    for (; j + 2 * VW <= n; j += 2 * VW) {
      vf s[4][2];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        s[r][0] = acc ? vload(o0 + r * os + j) : vzero();
        s[r][1] = acc ? vload(o0 + r * os + j + VW) : vzero();
      }
      const float* mp = m0 + j;
      for (int p = 0; p < k; p++, mp += ldm) {
        const vf a0 = vset1(x0[p]), a1 = vset1(x1[p]), a2 = vset1(x2[p]), a3 = vset1(x3[p]);
        s[0][0] = vfma(a0, vload(mp), s[0][0]);          s[0][1] = vfma(a0, vload(mp + VW), s[0][1]);
        s[1][0] = vfma(a1, vload(mp + ms), s[1][0]);     s[1][1] = vfma(a1, vload(mp + ms + VW), s[1][1]);
        s[2][0] = vfma(a2, vload(mp + 2 * ms), s[2][0]); s[2][1] = vfma(a2, vload(mp + 2 * ms + VW), s[2][1]);
        s[3][0] = vfma(a3, vload(mp + 3 * ms), s[3][0]); s[3][1] = vfma(a3, vload(mp + 3 * ms + VW), s[3][1]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) { vstore(o0 + r * os + j, s[r][0]); vstore(o0 + r * os + j + VW, s[r][1]); }
    }
    for (; j < n; j += VW) {  /* the rest, one vector per row (the last one masked): the same fmas */
      const vmask m = tail_mask(n - j < VW ? n - j : VW);
      vf s[4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) s[r] = acc ? vload_m(o0 + r * os + j, m) : vzero();
      const float* mp = m0 + j;
      for (int p = 0; p < k; p++, mp += ldm) {
        s[0] = vfma(vset1(x0[p]), vload_m(mp, m), s[0]);
        s[1] = vfma(vset1(x1[p]), vload_m(mp + ms, m), s[1]);
        s[2] = vfma(vset1(x2[p]), vload_m(mp + 2 * ms, m), s[2]);
        s[3] = vfma(vset1(x3[p]), vload_m(mp + 3 * ms, m), s[3]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) vstore_m(o0 + r * os + j, m, s[r]);
    }
  }
#endif
  for (; b < nb; b++) vecmat(n, k, x + b * xs, M + b * ms, ldm, out + b * os, acc);
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
