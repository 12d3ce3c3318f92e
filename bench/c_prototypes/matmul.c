// matmul prototype: C (M x N) = A (M x K) @ B (K x N), float32, row-major, M % MR == 0, N % NR == 0, K % KC == 0.
// The shape codegen should emit for a reduction over a product of two inputs with different strides:
//   for jc in N step NC:                  (NC columns of B: the packed B block stays in L2)
//     for pc in K step KC:                pack B[pc:pc+KC, jc:jc+NC] as NC/NR panels of KC x NR (threads share it)
//       parallel for ic in M step MR:     pack A[ic:ic+MR, pc:pc+KC] as one KC x MR panel (per thread, in L1)
//         for jr in NC step NR:           8 x 32 register tile: 16 vector accumulators, the k loop innermost
// Vector code through GCC vector types; fused multiply-add allowed in this file only (fp-contract=fast below).
#pragma GCC optimize("fp-contract=fast")
typedef float vf16 __attribute__((vector_size(64)));
#define MR 8
#define NR 32
#define KC 256
#define NC 512

static inline vf16 load16(const float* p) { vf16 v; __builtin_memcpy(&v, p, 64); return v; }
static inline void store16(float* p, vf16 v) { __builtin_memcpy(p, &v, 64); }

// acc[MR][NR] += Ap (KC x MR) @ Bp (KC x NR), both packed contiguous
static inline void micro_8x32(const float* restrict Ap, const float* restrict Bp, float* restrict C, long ldc, int first) {
  vf16 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
  if (first) { c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = (vf16){0}; }
  else {
    c00 = load16(C + 0 * ldc); c01 = load16(C + 0 * ldc + 16); c10 = load16(C + 1 * ldc); c11 = load16(C + 1 * ldc + 16);
    c20 = load16(C + 2 * ldc); c21 = load16(C + 2 * ldc + 16); c30 = load16(C + 3 * ldc); c31 = load16(C + 3 * ldc + 16);
    c40 = load16(C + 4 * ldc); c41 = load16(C + 4 * ldc + 16); c50 = load16(C + 5 * ldc); c51 = load16(C + 5 * ldc + 16);
    c60 = load16(C + 6 * ldc); c61 = load16(C + 6 * ldc + 16); c70 = load16(C + 7 * ldc); c71 = load16(C + 7 * ldc + 16);
  }
  for (int k = 0; k < KC; k++) {
    vf16 b0 = load16(Bp + k * NR), b1 = load16(Bp + k * NR + 16);
    const float* a = Ap + k * MR;
    c00 += a[0] * b0; c01 += a[0] * b1; c10 += a[1] * b0; c11 += a[1] * b1;
    c20 += a[2] * b0; c21 += a[2] * b1; c30 += a[3] * b0; c31 += a[3] * b1;
    c40 += a[4] * b0; c41 += a[4] * b1; c50 += a[5] * b0; c51 += a[5] * b1;
    c60 += a[6] * b0; c61 += a[6] * b1; c70 += a[7] * b0; c71 += a[7] * b1;
  }
  store16(C + 0 * ldc, c00); store16(C + 0 * ldc + 16, c01); store16(C + 1 * ldc, c10); store16(C + 1 * ldc + 16, c11);
  store16(C + 2 * ldc, c20); store16(C + 2 * ldc + 16, c21); store16(C + 3 * ldc, c30); store16(C + 3 * ldc + 16, c31);
  store16(C + 4 * ldc, c40); store16(C + 4 * ldc + 16, c41); store16(C + 5 * ldc, c50); store16(C + 5 * ldc + 16, c51);
  store16(C + 6 * ldc, c60); store16(C + 6 * ldc + 16, c61); store16(C + 7 * ldc, c70); store16(C + 7 * ldc + 16, c71);
}

// Bp: KC x NC of B as NC/NR panels, each KC rows of NR consecutive floats
static void pack_b(const float* restrict B, float* restrict Bp, long ldb, int nc) {
  for (int jr = 0; jr < nc; jr += NR)
    for (int k = 0; k < KC; k++)
      for (int j = 0; j < NR; j++) Bp[(long)jr * KC + k * NR + j] = B[(long)k * ldb + jr + j];
}

// Ap: MR rows of A, transposed to KC rows of MR floats
static void pack_a(const float* restrict A, float* restrict Ap, long lda) {
  for (int k = 0; k < KC; k++)
    for (int i = 0; i < MR; i++) Ap[k * MR + i] = A[(long)i * lda + k];
}

// work: KC * NC floats, 64-byte aligned (the packed B block the threads share)
void matmul(float* restrict C, const float* restrict A, const float* restrict B, float* restrict work, long M, long N, long K, int nthreads) {
  float* restrict bpack = work;
  #pragma omp parallel num_threads(nthreads)
  {
    float apack[KC * MR] __attribute__((aligned(64)));
    for (long jc = 0; jc < N; jc += NC) {
      int nc = N - jc < NC ? (int)(N - jc) : NC;
      for (long pc = 0; pc < K; pc += KC) {
        #pragma omp for schedule(static)
        for (int jr = 0; jr < nc; jr += NR) pack_b(B + pc * N + jc + jr, bpack + (long)jr * KC, N, NR);
        #pragma omp for schedule(static)
        for (long ic = 0; ic < M; ic += MR) {
          pack_a(A + ic * K + pc, apack, K);
          for (int jr = 0; jr < nc; jr += NR) micro_8x32(apack, bpack + (long)jr * KC, C + ic * N + jc + jr, N, pc == 0);
        }
      }
    }
  }
}
