/* The copy-task C kernel: whole training steps of one run per call (see kernel.py).

   Forward, backward through time, per-run gradient clipping and Adam for a chunk of steps of
   one run, in plain C loops: the same equations as attn_cli/core/copy_fast/backward.py,
   checked against it and against autograd in tests/test_copy_fast.py.  Parameters are one
   float32 row in the model's order, at the offsets Python passes; tokens are int64.
   Compiled on first use by attn_cli/core/copy_fast/kernel.py; no PyTorch headers.

   One source, every vector width (kernel_math.h): built for AVX2 and for AVX-512, with the same
   bits.  Where the time goes, and what each layout change gained or not: benchmarks/RESULTS.md,
   section `copy_task_fast.py`. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define NV 12   /* vocabulary */
#define NE 32   /* embedding width */
#define BOS 10

typedef struct {
  int B, T, H, att, G, D, R;
  long P, o_emb, o_ewih, o_ewhh, o_ebih, o_ebhh, o_dwih, o_dwhh, o_dbih, o_dbhh, o_ow, o_ob;
} Dims;

/* the parameter layout comes from Python (attn_cli/core/copy_fast/forward.py, derived from the
   model): off[0..10] the first element of each role, in forward.ROLES order, off[11] = P */
enum { EMB, E_WIH, E_WHH, E_BIH, E_BHH, D_WIH, D_WHH, D_BIH, D_BHH, O_W, O_B, NROLES };

static void dims_init(Dims* d, int B, int T, int H, int att, const int64_t* off) {
  d->B = B; d->T = T; d->H = H; d->att = att; d->G = 3 * H;
  d->D = att ? NE + H : NE;       /* decoder cell input width */
  d->R = att ? 2 * H : H;         /* readout input width */
  d->o_emb = off[EMB]; d->o_ewih = off[E_WIH]; d->o_ewhh = off[E_WHH]; d->o_ebih = off[E_BIH];
  d->o_ebhh = off[E_BHH]; d->o_dwih = off[D_WIH]; d->o_dwhh = off[D_WHH]; d->o_dbih = off[D_BIH];
  d->o_dbhh = off[D_BHH]; d->o_ow = off[O_W]; d->o_ob = off[O_B];
  d->P = off[NROLES];
}

/* the variant this library was built as (kernel_math.h): "avx512", "avx2" or "baseline" */
const char* kernel_isa(void) { return KERNEL_ISA; }

/* the number of elements this code assumes for each role (checked against the layout) */
void role_sizes(int H, int att, int64_t* out) {
  const long G = 3 * H, D = att ? NE + H : NE, R = att ? 2 * H : H;
  const long sizes[NROLES] = {NV * NE, G * NE, G * H, G, G, G * D, G * H, G, G, NV * R, NV};
  for (int i = 0; i < NROLES; i++) out[i] = sizes[i];
}

long param_count(int H, int att) {
  int64_t s[NROLES]; long P = 0;
  role_sizes(H, att, s);
  for (int i = 0; i < NROLES; i++) P += s[i];
  return P;
}

typedef struct {
  float *tab_e, *tab_d, *wT, *ewhhT, *dwhhT, *dwicT, *owT;
  float *eh, *e_rz, *e_n, *e_ghn, *encB, *encBT;
  float *hs, *cs, *as, *d_rz, *d_n, *d_ghn;
  float *gh, *gi, *logits, *dread, *dgi_d, *dgh_d, *dgi_e, *dgh_e, *d_encB;
  float *dh, *dc, *dhn, *dcn, *dtab_e, *dtab_d, *scratch, *da;
  float *dcs, *coefs;  /* per decoder step j: dc (B,H) and the score gradients (B,T), for d_encB */
  float* qs;  /* the queries times 1/sqrt(h) (B,H) */
  float* tin;  /* B int64 tokens (2 B floats) */
  void* block;
} Work;

static long work_sizes(const Dims* d, long* sizes);

/* floats of the work space of one run (saved activations and scratch), for benchmarks */
long work_floats(int B, int T, int H, int att) {
  const int64_t off[NROLES + 1] = {0};
  Dims d; dims_init(&d, B, T, H, att, off);
  long sizes[64];
  return work_sizes(&d, sizes);
}

/* the work space at p (work_floats floats, 64-byte aligned: from the caller, kept across calls),
   or a fresh allocation freed at the end of the call (p NULL); -1 if that fails */
static int work_alloc(Work* w, const Dims* d, float* p) {
  long sizes[64];
  const long total = work_sizes(d, sizes);
  w->block = NULL;
  if (!p || (uintptr_t)p % 64) {
    p = (float*)aligned_alloc(64, (size_t)total * sizeof(float));
    if (!p) return -1;
    w->block = p;
  }
  float** slots[] = {
    &w->tab_e, &w->tab_d, &w->wT, &w->ewhhT, &w->dwhhT, &w->dwicT, &w->owT,
    &w->eh, &w->e_rz, &w->e_n, &w->e_ghn, &w->encB, &w->encBT,
    &w->hs, &w->cs, &w->as, &w->d_rz, &w->d_n, &w->d_ghn,
    &w->gh, &w->gi, &w->logits, &w->dread, &w->dgi_d, &w->dgh_d, &w->dgi_e, &w->dgh_e, &w->d_encB,
    &w->dh, &w->dc, &w->dhn, &w->dcn, &w->dtab_e, &w->dtab_d, &w->scratch, &w->da, &w->tin, &w->dcs, &w->coefs, &w->qs };
  const int n = sizeof(slots) / sizeof(slots[0]);
  for (int i = 0; i < n; i++) { *slots[i] = p; p += (sizes[i] + 15) / 16 * 16; }
  return 0;
}

/* the sizes of the work arrays (floats, in Work's order) and their total, each rounded up to 16 */
static long work_sizes(const Dims* d, long* sizes) {
  long B = d->B, T = d->T, H = d->H, G = d->G, R = d->R;
  const long list[] = {
    NV * G, NV * G, G * (NE > H ? NE : H) + G * H, H * G, H * G, H * G, R * NV,
    (T + 1) * B * H, T * B * 2 * H, T * B * H, T * B * H, B * T * H, B * H * T,
    (T + 1) * B * H, (T + 1) * B * H, (T + 1) * B * T, T * B * 2 * H, T * B * H, T * B * H,
    B * G, B * G, T * B * NV, T * B * R, T * B * G, T * B * G, B * G, T * B * G, B * T * H,
    B * H, B * H, B * H, B * H, NV * G, NV * G, G * T * B + G * NV + NV * T * B, B * T, 2 * B,
    (T + 1) * B * H, (T + 1) * B * T, B * H };
  const int n = sizeof(list) / sizeof(list[0]);
  long total = 0;
  for (int i = 0; i < n; i++) { sizes[i] = list[i]; total += (list[i] + 15) / 16 * 16; }
  return total;
}

/* one GRU update for a batch: gi (B,G) input projection incl. b_ih; gh (B,G) = h W_hh^T
   without bias; saves rz (B,2H), n (B,H), ghn (B,H) = W_hn h + b_hn */
static inline __attribute__((always_inline)) void gru_fwd_h(int B, int H, const float* restrict gi, const float* restrict gh,
                    const float* restrict bhh, const float* restrict hprev, float* restrict hnew,
                    float* restrict rz, float* restrict nn, float* restrict ghn) {
  const int G = 3 * H;
  for (int b = 0; b < B; b++) {
    const float* gib = gi + (long)b * G; const float* ghb = gh + (long)b * G;
    float* rzb = rz + (long)b * 2 * H; float* nb = nn + (long)b * H; float* gnb = ghn + (long)b * H;
    const float* hp = hprev + (long)b * H; float* hb = hnew + (long)b * H;
    for (int k = 0; k < 2 * H; k++) rzb[k] = fsigmoid(gib[k] + ghb[k] + bhh[k]);
    for (int k = 0; k < H; k++) gnb[k] = ghb[2 * H + k] + bhh[2 * H + k];
    for (int k = 0; k < H; k++) nb[k] = ftanh(fmaf(rzb[k], gnb[k], gib[2 * H + k]));
    for (int k = 0; k < H; k++) hb[k] = fmaf(rzb[H + k], hp[k] - nb[k], nb[k]);
  }
}

/* gru_fwd_h, built once more for the default hidden size (32): the same operations, with the
   loops' lengths known to the compiler (no remainder loops, no per-row set-up) */
static void gru_fwd(int B, int H, const float* restrict gi, const float* restrict gh,
                    const float* restrict bhh, const float* restrict hprev, float* restrict hnew,
                    float* restrict rz, float* restrict nn, float* restrict ghn) {
  if (H == 32) gru_fwd_h(B, 32, gi, gh, bhh, hprev, hnew, rz, nn, ghn);
  else gru_fwd_h(B, H, gi, gh, bhh, hprev, hnew, rz, nn, ghn);
}

/* gi (B,G) [+]= rows tok[b * stride] of tab (V,G) */
static void add_rows(int B, int G, const float* tab, const int64_t* toks, long stride, float* gi, int acc) {
  for (int b = 0; b < B; b++) {
    const float* te = tab + toks[b * stride] * G; float* g = gi + (long)b * G;
    if (acc) for (int k = 0; k < G; k++) g[k] += te[k];
    else for (int k = 0; k < G; k++) g[k] = te[k];
  }
}

/* backward of gru_fwd: dh (B,H) in; dgi, dgh (B,G) out; dhn (B,H) = dh * z (the matmul part
   is added by the caller) */
static inline __attribute__((always_inline)) void gru_bwd_h(int B, int H, const float* restrict dh, const float* restrict hprev,
                    const float* restrict rz, const float* restrict nn, const float* restrict ghn,
                    float* restrict dgi, float* restrict dgh, float* restrict dhn) {
  int G = 3 * H;
  for (int b = 0; b < B; b++) {
    const float* restrict d = dh + (long)b * H; const float* restrict hp = hprev + (long)b * H;
    const float* restrict rb = rz + (long)b * 2 * H; const float* restrict zb = rb + H;
    const float* restrict nb = nn + (long)b * H; const float* restrict gnb = ghn + (long)b * H;
    float* restrict gir = dgi + (long)b * G; float* restrict giz = gir + H; float* restrict gin = giz + H;
    float* restrict ggr = dgh + (long)b * G; float* restrict ggz = ggr + H; float* restrict ggn = ggz + H;
    float* restrict o = dhn + (long)b * H;
    for (int k = 0; k < H; k++) {
      float r = rb[k], z = zb[k], n = nb[k], dv = d[k];
      float dpre_n = dv * (1.0f - z) * fmaf(-n, n, 1.0f);
      float dr = dpre_n * gnb[k] * r * (1.0f - r);
      float dz = dv * (hp[k] - n) * z * (1.0f - z);
      gir[k] = dr; giz[k] = dz; gin[k] = dpre_n;
      ggr[k] = dr; ggz[k] = dz; ggn[k] = dpre_n * r;
      o[k] = dv * z;
    }
  }
}

#define SROWS 8  /* rows whose sums run side by side */

static void gru_bwd(int B, int H, const float* restrict dh, const float* restrict hprev,
                    const float* restrict rz, const float* restrict nn, const float* restrict ghn,
                    float* restrict dgi, float* restrict dgh, float* restrict dhn) {
  if (H == 32) gru_bwd_h(B, 32, dh, hprev, rz, nn, ghn, dgi, dgh, dhn);
  else gru_bwd_h(B, H, dh, hprev, rz, nn, ghn, dgi, dgh, dhn);
}

/* attention of queries h (B,H) over encB (B,T,H) / encBT (B,H,T): weights a (B,T), context c (B,H) */
static void attend(int B, int T, int H, float scale, const float* restrict h, const float* restrict encB,
                   const float* restrict encBT, float* restrict a, float* restrict c, float* restrict qs) {
  for (long i = 0; i < (long)B * H; i++) qs[i] = h[i] * scale;  /* (B,H) scratch */
  vecmat_rows(B, T, H, qs, H, encBT, (long)H * T, T, a, T, 0);  /* s_t = sum_k (q_k scale) K_kt */
  /* softmax of each row, eight rows side by side: each row's max and sum run in t order as
     before, but the eight chains of dependent adds overlap instead of waiting on each other */
  for (int b = 0; b < B; b += SROWS) {
    const int nr = B - b < SROWS ? B - b : SROWS;
    float* restrict s0 = a + (long)b * T;
    float mx[SROWS], sum[SROWS];
    for (int r = 0; r < nr; r++) mx[r] = s0[(long)r * T];
    for (int t = 1; t < T; t++)
      for (int r = 0; r < nr; r++) { const float v = s0[(long)r * T + t]; mx[r] = v > mx[r] ? v : mx[r]; }
    for (int r = 0; r < nr; r++) {
      float* restrict s = s0 + (long)r * T;
      for (int t = 0; t < T; t++) s[t] = fexp(s[t] - mx[r]);
      sum[r] = 0.0f;
    }
    for (int t = 0; t < T; t++)
      for (int r = 0; r < nr; r++) sum[r] += s0[(long)r * T + t];
    for (int r = 0; r < nr; r++) {
      float* restrict s = s0 + (long)r * T;
      const float inv = 1.0f / sum[r];
      for (int t = 0; t < T; t++) s[t] *= inv;
    }
  }
  vecmat_rows(B, H, T, a, T, encB, (long)T * H, H, c, H, 0);  /* c_k = sum_t a_t V_tk */
}

/* backward of attend for queries q (B,H) with weights a (B,T), given dc (B,H): adds to dh (B,H)
   (through the scores); leaves the score gradients a_t (da_t - sum_s a_s da_s) scale in
   da_all (B,T), from which d_enc_from_attention adds the encoder states' part afterwards */
static void attend_bwd(int B, int T, int H, float scale, const float* a_all, const float* dc_all,
                       const float* encB, const float* encBT, float* dh_all, float* da_all) {
  vecmat_rows(B, T, H, dc_all, H, encBT, (long)H * T, T, da_all, T, 0);  /* da_t = sum_k dc_k K_kt */
  /* sum_t a_t da_t in order from t = 0: products rounded, then added, except the last T % 4
     terms, fused (the first kernel's vectorised loop and its scalar remainder: its bits);
     eight rows side by side, as in attend */
  const int T4 = T - T % 4;
  for (int b = 0; b < B; b += SROWS) {
    const int nr = B - b < SROWS ? B - b : SROWS;
    const float* restrict a0 = a_all + (long)b * T;
    float* restrict da0 = da_all + (long)b * T;
    float sad[SROWS];
    for (int r = 0; r < nr; r++) sad[r] = 0.0f;
    for (int t = 0; t < T4; t++)
      for (int r = 0; r < nr; r++) sad[r] += a0[(long)r * T + t] * da0[(long)r * T + t];
    for (int t = T4; t < T; t++)
      for (int r = 0; r < nr; r++) sad[r] = fmaf(a0[(long)r * T + t], da0[(long)r * T + t], sad[r]);
    for (int r = 0; r < nr; r++) {
      const float* restrict a = a0 + (long)r * T; float* restrict da = da0 + (long)r * T;
      for (int t = 0; t < T; t++) da[t] = a[t] * (da[t] - sad[r]) * scale;  /* d score_t, now in da */
    }
  }
  vecmat_rows(B, H, T, da_all, T, encB, (long)T * H, H, dh_all, H, 1);  /* dh_k += sum_t dscore_t V_tk */
}

/* the encoder states' gradient through the attention (as keys and as values), all decoder steps:
   d_encB[t,b,:] (the encoder's order) = sum over j = T .. 0 (in that order, from 0) of fma(a_j[b,t], dc_j[b,:],
   coef_j[b,t] * q_j[b,:]); as (T+1,B,T) weights, coefs (T+1,B,T) score gradients, dcs (T+1,B,H)
   context gradients, hs (T+1,B,H) queries.  Once after the decoder's loop, four t in registers,
   instead of a read-modify-write of all of d_encB at every step: the same operations. */
static void d_enc_from_attention(int B, int T, int H, const float* restrict as, const float* restrict coefs,
                                 const float* restrict dcs, const float* restrict hs, float* restrict d_encB) {
  const long BT = (long)B * T, BH = (long)B * H;
  for (int b = 0; b < B; b++) {
    float* restrict de = d_encB + (long)b * H;  /* row t at de + t * BH */
    int t = 0;
#if VW > 1
    for (; t + 4 <= T; t += 4) {
      int k = 0;
      for (; k + VW <= H; k += VW) {
        vf s0 = vzero(), s1 = vzero(), s2 = vzero(), s3 = vzero();
        for (int j = T; j >= 0; j--) {
          const float* aj = as + j * BT + (long)b * T + t; const float* cj = coefs + j * BT + (long)b * T + t;
          const vf dc = vload(dcs + j * BH + (long)b * H + k), q = vload(hs + j * BH + (long)b * H + k);
          s0 = vadd(s0, vfma(vset1(aj[0]), dc, vmul(vset1(cj[0]), q)));
          s1 = vadd(s1, vfma(vset1(aj[1]), dc, vmul(vset1(cj[1]), q)));
          s2 = vadd(s2, vfma(vset1(aj[2]), dc, vmul(vset1(cj[2]), q)));
          s3 = vadd(s3, vfma(vset1(aj[3]), dc, vmul(vset1(cj[3]), q)));
        }
        vstore(de + t * BH + k, s0); vstore(de + (t + 1) * BH + k, s1);
        vstore(de + (t + 2) * BH + k, s2); vstore(de + (t + 3) * BH + k, s3);
      }
      for (; k < H; k++)
        for (int r = 0; r < 4; r++) {
          float acc = 0.0f;
          for (int j = T; j >= 0; j--)
            acc += fmaf(as[j * BT + (long)b * T + t + r], dcs[j * BH + (long)b * H + k],
                        coefs[j * BT + (long)b * T + t + r] * hs[j * BH + (long)b * H + k]);
          de[(t + r) * BH + k] = acc;
        }
    }
#endif
    for (; t < T; t++)
      for (int k = 0; k < H; k++) {
        float acc = 0.0f;
        for (int j = T; j >= 0; j--)
          acc += fmaf(as[j * BT + (long)b * T + t], dcs[j * BH + (long)b * H + k],
                      coefs[j * BT + (long)b * T + t] * hs[j * BH + (long)b * H + k]);
        de[t * BH + k] = acc;
      }
  }
}

/* forward and backward of one step of one run: gradients into Gr (P floats), returns mean CE */
static double step_fb(const Dims* d, const float* P, float* Gr, const int64_t* src, Work* w) {
  const int B = d->B, T = d->T, H = d->H, G = d->G, D = d->D, R = d->R, att = d->att;
  const long BH = (long)B * H, BG = (long)B * G, TB = (long)T * B;
  const float scale = 1.0f / sqrtf((float)H);
  const float *emb = P + d->o_emb, *ewih = P + d->o_ewih, *ewhh = P + d->o_ewhh, *ebih = P + d->o_ebih,
              *ebhh = P + d->o_ebhh, *dwih = P + d->o_dwih, *dwhh = P + d->o_dwhh, *dbih = P + d->o_dbih,
              *dbhh = P + d->o_dbhh, *ow = P + d->o_ow, *ob = P + d->o_ob;
  memset(Gr, 0, sizeof(float) * d->P);
  float *g_emb = Gr + d->o_emb, *g_ewih = Gr + d->o_ewih, *g_ewhh = Gr + d->o_ewhh, *g_ebih = Gr + d->o_ebih,
        *g_ebhh = Gr + d->o_ebhh, *g_dwih = Gr + d->o_dwih, *g_dwhh = Gr + d->o_dwhh, *g_dbih = Gr + d->o_dbih,
        *g_dbhh = Gr + d->o_dbhh, *g_ow = Gr + d->o_ow, *g_ob = Gr + d->o_ob;

  /* token tables: emb @ W_ih^T + b_ih, (V, G) */
  transpose(ewih, G, NE, NE, w->wT);
  gemm_nn(NV, G, NE, emb, NE, w->wT, G, w->tab_e, G, 0);
  transpose(dwih, G, NE, D, w->wT);
  gemm_nn(NV, G, NE, emb, NE, w->wT, G, w->tab_d, G, 0);
  for (int v = 0; v < NV; v++) for (int k = 0; k < G; k++) { w->tab_e[v * G + k] += ebih[k]; w->tab_d[v * G + k] += dbih[k]; }
  transpose(ewhh, G, H, H, w->ewhhT);
  transpose(dwhh, G, H, H, w->dwhhT);
  if (att) transpose(dwih + NE, G, H, D, w->dwicT);

  /* encoder: eh[t+1] = GRU(x_t, eh[t]), eh[0] = 0 */
  memset(w->eh, 0, sizeof(float) * BH);
  for (int t = 0; t < T; t++) {
    float* hp = w->eh + t * BH;
    gemm_nn(B, G, H, hp, H, w->ewhhT, G, w->gh, G, 0);
    add_rows(B, G, w->tab_e, src + t, T, w->gi, 0);
    gru_fwd(B, H, w->gi, w->gh, ebhh, hp, hp + BH,
            w->e_rz + t * 2 * BH, w->e_n + t * BH, w->e_ghn + t * BH);
  }
  if (att) {
    for (int b = 0; b < B; b++) {  /* encB rows copied, then each (T,H) block transposed in L1 */
      float* restrict eb = w->encB + (long)b * T * H;
      for (int t = 0; t < T; t++) memcpy(eb + (long)t * H, w->eh + (t + 1) * BH + (long)b * H, sizeof(float) * H);
      transpose(eb, T, H, H, w->encBT + (long)b * H * T);
    }
  }

  /* decoder, teacher forced: hs[j] = GRU([e(tgt_in_j); cs[j-1]], hs[j-1]), cs[j] = attend(hs[j]) */
  memcpy(w->hs, w->eh + T * BH, sizeof(float) * BH);
  if (att) attend(B, T, H, scale, w->hs, w->encB, w->encBT, w->as, w->cs, w->qs);
  int64_t* tin = (int64_t*)w->tin;  /* no allocation in the step */
  for (int j = 1; j <= T; j++) {
    const float* hp = w->hs + (j - 1) * BH;
    for (int b = 0; b < B; b++) tin[b] = j == 1 ? BOS : src[(long)b * T + j - 2];
    gemm_nn(B, G, H, hp, H, w->dwhhT, G, w->gh, G, 0);
    if (att) gemm_nn(B, G, H, w->cs + (j - 1) * BH, H, w->dwicT, G, w->gi, G, 0);
    add_rows(B, G, w->tab_d, tin, 1, w->gi, att);
    gru_fwd(B, H, w->gi, w->gh, dbhh, hp, w->hs + j * BH,
            w->d_rz + (j - 1) * 2 * BH, w->d_n + (j - 1) * BH, w->d_ghn + (j - 1) * BH);
    if (att) attend(B, T, H, scale, w->hs + j * BH, w->encB, w->encBT, w->as + (long)j * B * T, w->cs + j * BH,
                    w->qs);
  }

  /* readout and cross-entropy; rows i = (j-1) B + b */
  transpose(ow, NV, R, R, w->owT);
  gemm_nn(TB, NV, H, w->hs + BH, H, w->owT, NV, w->logits, NV, 0);
  if (att) gemm_nn(TB, NV, H, w->cs + BH, H, w->owT + H * NV, NV, w->logits, NV, 1);
  double loss = 0.0;
  const float inv_n = 1.0f / (float)TB;
  for (long i = 0; i < TB; i++) {
    float* l = w->logits + i * NV;
    int b = (int)(i % B), j = (int)(i / B);
    int y = (int)src[(long)b * T + j];
    float mx = -INFINITY;
    for (int v = 0; v < NV; v++) { l[v] += ob[v]; mx = l[v] > mx ? l[v] : mx; }
    float sum = 0.0f;
    for (int v = 0; v < NV; v++) l[v] = expf_libm(l[v] - mx);
    for (int v = 0; v < NV; v++) sum += l[v];
    loss += -log((double)l[y] / sum);
    float inv = inv_n / sum;
    for (int v = 0; v < NV; v++) l[v] *= inv;   /* softmax / N */
    l[y] -= inv_n;                              /* - onehot / N: dlogits */
  }
  loss /= (double)TB;

  /* readout backward */
  gemm_tn(NV, H, TB, w->logits, NV, w->hs + BH, H, g_ow, R, 0, w->scratch);
  if (att) gemm_tn(NV, H, TB, w->logits, NV, w->cs + BH, H, g_ow + H, R, 0, w->scratch);
  colsum(w->logits, TB, NV, g_ob);
  gemm_nn(TB, R, NV, w->logits, NV, ow, R, w->dread, R, 0);

  /* decoder backward through time: j = T .. 0 */
  memset(w->dhn, 0, sizeof(float) * BH);
  memset(w->dcn, 0, sizeof(float) * BH);
  memset(w->dtab_d, 0, sizeof(float) * NV * G);
  memset(w->dtab_e, 0, sizeof(float) * NV * G);
  for (int j = T; j >= 0; j--) {
    {  /* dh = d readout (for j >= 1) + from step j+1; dc likewise */
      float* restrict dh = w->dh; float* restrict dc = w->dcs + j * BH;
      const float* restrict dhn = w->dhn; const float* restrict dcn = w->dcn;
      if (j >= 1) {
        const float* restrict dr = w->dread + (long)(j - 1) * B * R;
        for (int b = 0; b < B; b++) {
          for (int k = 0; k < H; k++) dh[(long)b * H + k] = dhn[(long)b * H + k] + dr[(long)b * R + k];
          if (att) for (int k = 0; k < H; k++) dc[(long)b * H + k] = dcn[(long)b * H + k] + dr[(long)b * R + H + k];
        }
      } else {
        memcpy(dh, dhn, sizeof(float) * BH);
        memcpy(dc, dcn, sizeof(float) * BH);
      }
    }
    if (att) attend_bwd(B, T, H, scale, w->as + (long)j * B * T, w->dcs + j * BH, w->encB, w->encBT, w->dh,
                        w->coefs + (long)j * B * T);
    if (j == 0) break;
    float* dgi = w->dgi_d + (j - 1) * BG;
    float* dgh = w->dgh_d + (j - 1) * BG;
    gru_bwd(B, H, w->dh, w->hs + (j - 1) * BH, w->d_rz + (j - 1) * 2 * BH, w->d_n + (j - 1) * BH,
            w->d_ghn + (j - 1) * BH, dgi, dgh, w->dhn);
    gemm_nn(B, H, G, dgh, G, dwhh, H, w->dhn, H, 1);
    if (att) gemm_nn(B, H, G, dgi, G, dwih + NE, D, w->dcn, H, 0);
    for (int b = 0; b < B; b++) {
      int64_t tok = j == 1 ? BOS : src[(long)b * T + j - 2];
      float* row = w->dtab_d + tok * G; const float* gr = dgi + (long)b * G;
      for (int k = 0; k < G; k++) row[k] += gr[k];
    }
  }
  if (att) d_enc_from_attention(B, T, H, w->as, w->coefs, w->dcs, w->hs, w->d_encB);
  /* decoder weight gradients, summed over all steps at once */
  gemm_tn(G, H, TB, w->dgh_d, G, w->hs, H, g_dwhh, H, 0, w->scratch);
  colsum(w->dgh_d, TB, G, g_dbhh);
  if (att) gemm_tn(G, H, TB, w->dgi_d, G, w->cs, H, g_dwih + NE, D, 0, w->scratch);
  gemm_tn(G, NE, NV, w->dtab_d, G, emb, NE, g_dwih, D, 0, w->scratch);
  colsum(w->dtab_d, NV, G, g_dbih);
  gemm_nn(NV, NE, G, w->dtab_d, G, dwih, D, g_emb, NE, 0);

  /* encoder backward through time: dh carries from the decoder's h_0 */
  for (int t = T - 1; t >= 0; t--) {
    {  /* dh of encoder state t (held in w->dc): from state t+1 (or the decoder) + attention */
      const float* restrict carry = t == T - 1 ? w->dh : w->dhn;
      float* restrict dh = w->dc;
      if (att) {
        const float* restrict de = w->d_encB + t * BH;  /* (T,B,H) */
        for (int b = 0; b < B; b++)
          for (int k = 0; k < H; k++) dh[(long)b * H + k] = carry[(long)b * H + k] + de[(long)b * H + k];
      } else {
        memcpy(dh, carry, sizeof(float) * BH);
      }
    }
    float* dgi = w->dgi_e;  /* used for the token rows at once: one (B,G) slot, kept in L1 */
    float* dgh = w->dgh_e + t * BG;
    gru_bwd(B, H, w->dc, w->eh + t * BH, w->e_rz + t * 2 * BH, w->e_n + t * BH, w->e_ghn + t * BH, dgi, dgh, w->dhn);
    gemm_nn(B, H, G, dgh, G, ewhh, H, w->dhn, H, 1);
    for (int b = 0; b < B; b++) {
      float* row = w->dtab_e + src[(long)b * T + t] * G; const float* gr = dgi + (long)b * G;
      for (int k = 0; k < G; k++) row[k] += gr[k];
    }
  }
  gemm_tn(G, H, TB, w->dgh_e, G, w->eh, H, g_ewhh, H, 0, w->scratch);
  colsum(w->dgh_e, TB, G, g_ebhh);
  gemm_tn(G, NE, NV, w->dtab_e, G, emb, NE, g_ewih, NE, 0, w->scratch);
  colsum(w->dtab_e, NV, G, g_ebih);
  gemm_nn(NV, NE, G, w->dtab_e, G, ewih, NE, g_emb, NE, 1);
  return loss;
}

/* for tests: out_k[i] = the kernel's expf_libm(x[i]), out_m[i] = this host's libm expf(x[i]) */
void expf_pair(const float* x, float* out_k, float* out_m, long n) {
  for (long i = 0; i < n; i++) out_k[i] = expf_libm(x[i]);
  for (long i = 0; i < n; i++) out_m[i] = expf(x[i]);
}

/* loss and gradients of one step (for tests) */
double loss_and_grad(const float* params, float* grad, const int64_t* src, int B, int T, int H, int att,
                     const int64_t* off) {
  Dims d; dims_init(&d, B, T, H, att, off);
  Work w; if (work_alloc(&w, &d, NULL)) return NAN;
  double loss = step_fb(&d, params, grad, src, &w);
  free(w.block);
  return loss;
}

/* nsteps training steps of one run: per step forward, backward, clip_grad_norm_(clip), Adam.
   src (nsteps, B, T) int64; step0 = Adam steps already taken; losses (nsteps) out */
int train_steps_in(float* params, float* grad, float* m1, float* m2, long step0, const int64_t* src,
                   int nsteps, int B, int T, int H, int att, double lr, double clip, float* losses,
                   const int64_t* off, float* work) {
  Dims d; dims_init(&d, B, T, H, att, off);
  Work w; if (work_alloc(&w, &d, work)) return -1;
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (int s = 0; s < nsteps; s++) {
    losses[s] = (float)step_fb(&d, params, grad, src + (long)s * B * T, &w);
    double sq = 0.0;
    for (long i = 0; i < d.P; i++) sq = fma((double)grad[i], (double)grad[i], sq);
    double coef = clip / (sqrt(sq) + 1e-6);
    if (coef < 1.0) { float c = (float)coef; for (long i = 0; i < d.P; i++) grad[i] *= c; }
    long step = step0 + s + 1;
    double bc1 = 1.0 - pow(b1, (double)step), bc2s = sqrt(1.0 - pow(b2, (double)step));
    float step_size = (float)(lr / bc1), inv_bc2s = (float)(1.0 / bc2s);
    float fb1 = (float)(1.0 - b1), fb2 = (float)b2, fb2c = (float)(1.0 - b2), feps = (float)eps;
    for (long i = 0; i < d.P; i++) {
      float g = grad[i];
      m1[i] = fmaf(g - m1[i], fb1, m1[i]);
      m2[i] = fmaf(m2[i], fb2, fb2c * g * g);
      params[i] -= step_size * m1[i] / fmaf(sqrtf(m2[i]), inv_bc2s, feps);
    }
  }
  free(w.block);
  return 0;
}

/* train_steps_in with a work space of its own (allocated and freed in this call) */
int train_steps(float* params, float* grad, float* m1, float* m2, long step0, const int64_t* src,
                int nsteps, int B, int T, int H, int att, double lr, double clip, float* losses,
                const int64_t* off) {
  return train_steps_in(params, grad, m1, m2, step0, src, nsteps, B, T, H, att, lr, clip, losses, off, NULL);
}
