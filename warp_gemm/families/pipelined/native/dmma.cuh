//! float64 products on the fp64 tensor cores (DMMA) through mma.sync, sm_80+.
//! snippet dmma template
//! --- float64 inputs through mma.sync .f64 (spec.mma with float64 inputs) ---
//! tile_matmul's fp64 GEMM (MathDx) ran at 25-31 TFLOP/s on H100 (cuBLAS 54.4 at 4096^3) and took 21-25 s to compile.
//! Here each warp multiplies its part of the tile from the shared stages with mma.sync .f64: m8n8k4 on sm_80
//! (issued in pairs, rows g and g + 8 of a 16 x 8 tile), on sm_90 m16n8k4 / k8 / k16 (spec.mma_k: the same fragments,
//! 1, 2 or 4 k4 slices per instruction; H100 4096^3: m8n8k4 pairs 29.2 TFLOP/s, k4 41.9, k16 46.3, k8 47.6). The float64 sums stay in the register tile's storage in the 16 x 8 order of the 16-bit mma.sync
//! kernel, so its epilogues (_OWN_STORE, _STAGED_STORE) and the persistent loop serve both. Fragments are single
//! 8-byte shared loads: lane l = 4 g + t holds A(row g (+ 8), k t) and B(k t, column g) of each k4 slice; with
//! stage rows of 4 (mod 16) doubles (pad 4) a half warp's 16 loads hit 32 distinct banks in every layout; so they do
//! in unpadded swizzled stages (spec.swizzle: element (row, col) at row * LD + (col ^ (4 (row % 4))), in A_OFF/B_OFF).

    // acc += A x B over k slices ${KS0} .. ${KS1} - 1 of stage s of the shared buffers ba (A's ${AR} x ${AC} stage,
    // row stride ${ALD}) and bb (${BR} x ${BC}, row stride ${BLD}) in float64 MMAs. The tile's ${VT} threads are
    // ${NW} warps (${WM} x ${WN}) of ${WTM} x ${WTN} outputs: ${MI} x ${NJ} MMA tiles of 16 x 8 whose 4 outputs per
    // thread are acc.data[4 (mi ${NJ} + nj) + c]: row wr + 16 mi + l / 4 + 8 (c / 2), column wc + 8 nj + 2 (l % 4) +
    // c % 2 (l: the lane). The K tile's ${TK} values of k are ${KS} slices of 4: slice kk's k of lane t is ${KMAP}.
    // A(r, k) is ba[${A_OFF}], B(k, n) is bb[${B_OFF}] (stage s). No barrier: the caller syncs before it refills a
    // stage.
    const double* As = (const double*)ba.data.ptr + (size_t)s * ${SA};
    const double* Bs = (const double*)bb.data.ptr + (size_t)s * ${SB};
#if defined(__CUDA_ARCH__)
    const int q = 0;
${GEOM}    const int g = l / 4;
    const int t = l % 4;
    double* d = acc.data;
#pragma unroll
    for (int kb = ${KS0}; kb < ${KS1}; kb += ${KI}) {
        double af[${KI}][${MI}][2];
        double bf[${KI}][${NJ}];
#pragma unroll
        for (int u = 0; u < ${KI}; ++u) {
            const int kk = kb + u;
            const int k = ${KMAP};
#pragma unroll
            for (int mi = 0; mi < ${MI}; ++mi) {
                const int r = wr + 16 * mi + g;
                af[u][mi][0] = As[${A_OFF}];
                af[u][mi][1] = As[${A_OFF8}];
            }
#pragma unroll
            for (int nj = 0; nj < ${NJ}; ++nj) {
                const int n = wc + 8 * nj + g;
                bf[u][nj] = Bs[${B_OFF}];
            }
        }
#pragma unroll
        for (int mi = 0; mi < ${MI}; ++mi)
#pragma unroll
            for (int nj = 0; nj < ${NJ}; ++nj) {
                double* c = d + 4 * (mi * ${NJ} + nj);
#if ${SM90_IF}
${SM90}#else
#pragma unroll
                for (int u = 0; u < ${KI}; ++u) {
                    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                                 : "+d"(c[0]), "+d"(c[1]) : "d"(af[u][mi][0]), "d"(bf[u][nj]));
                    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                                 : "+d"(c[2]), "+d"(c[3]) : "d"(af[u][mi][1]), "d"(bf[u][nj]));
                }
#endif
            }
    }
#else
    // The CPU runs the tile's threads one after another. Output c of lane l sums, over each slice's 4 k, the A and B
    // values that the lanes holding them in the PTX fragment layouts load (lane 4 g + t: A rows g and g + 8 of k t,
    // B column g of k t) from the addresses above (the same expressions), so the CPU checks the addressing.
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        auto lda = [&](int L, int mi, int kk, int h) -> double {
            const int g = L / 4, t = L % 4;
            const int k = ${KMAP};
            const int r = wr + 16 * mi + g;
            return h ? As[${A_OFF8}] : As[${A_OFF}];
        };
        auto ldb = [&](int L, int nj, int kk) -> double {
            const int g = L / 4, t = L % 4;
            const int k = ${KMAP};
            const int n = wc + 8 * nj + g;
            return Bs[${B_OFF}];
        };
        double* d = acc.data + q * ${PER};
        for (int kk = ${KS0}; kk < ${KS1}; ++kk)
            for (int mi = 0; mi < ${MI}; ++mi)
                for (int nj = 0; nj < ${NJ}; ++nj)
                    for (int c = 0; c < 4; ++c) {
                        const int row = l / 4 + 8 * (c / 2);  // in the 16 x 8 MMA tile
                        const int col = 2 * (l % 4) + c % 2;
                        double x = 0.0;
                        // A(row, k t) from lane 4 (row % 8) + t, register row / 8; B(k t, col) from lane 4 col + t
                        for (int t = 0; t < 4; ++t)
                            x += lda(4 * (row % 8) + t, mi, kk, row / 8) * ldb(4 * col + t, nj, kk);
                        d[4 * (mi * ${NJ} + nj) + c] += x;
                    }
    }
#endif
//! snippet dmma_sm90 template
//! One m16n8k${KI4} MMA (sm_90): A registers (row g, k t), (row g + 8, k t) of each of the ${KI} slices, B (k t, column g).
                asm volatile("mma.sync.aligned.m16n8k${KI4}.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {${AREGS}}, "
                             "{${BREGS}}, {%0, %1, %2, %3};\n"
                             : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                             : ${AIN}, ${BIN});
