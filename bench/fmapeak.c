/* FP32 FMA throughput of this machine, the prefill roofline's numerator:
 * T threads each run 12 independent FMA chains on the widest vectors the
 * processor has (AVX-512, else AVX2), best of 5 passes. DESIGN section 5
 * keeps the oracle's activations in FP32, so an exact tier's matmuls are
 * FP32 multiply-adds and this is their ceiling. A measuring tool, not
 * engine code.
 *   cc -O2 -pthread bench/fmapeak.c -o build/fmapeak && build/fmapeak 2 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERS 40000000L /* x 12 FMAs per thread per pass */

typedef struct job {
    int wide; /* 1: AVX-512 (16 lanes), 0: AVX2 (8 lanes) */
    float out;
} job;

__attribute__((target("avx512f"))) static float chains512(void) {
    __m512 a[12], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(-1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < ITERS; n++) /* unrolled, so a[] stays in registers */
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static float chains256(void) {
    __m256 a[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(-1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < ITERS; n++)
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    float s = 0, lane[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(lane, a[i]);
        for (int j = 0; j < 8; j++) s += lane[j];
    }
    return s;
}

static void *run(void *arg) {
    job *j = arg;
    j->out = j->wide ? chains512() : chains256();
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 2;
    if (t < 1 || t > 64) t = 2;
    __builtin_cpu_init();
    int wide = __builtin_cpu_supports("avx512f");
    if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        printf("{\"threads\":%d,\"fp32_fma_gflops\":null}\n", t);
        return 0;
    }
    double best = 0;
    float check = 0;
    for (int pass = 0; pass < 5; pass++) {
        pthread_t th[64];
        job jobs[64];
        double t0 = now();
        for (int i = 0; i < t; i++) {
            jobs[i] = (job){wide, 0};
            pthread_create(&th[i], NULL, run, &jobs[i]);
        }
        for (int i = 0; i < t; i++) {
            pthread_join(th[i], NULL);
            check += jobs[i].out;
        }
        double flops = (double)t * ITERS * 12 * (wide ? 16 : 8) * 2;
        double g = flops / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("{\"threads\":%d,\"vector_bits\":%d,\"fp32_fma_gflops\":%.1f,\"check\":%d}\n", t,
           wide ? 512 : 256, best, check != 0);
    return 0;
}
