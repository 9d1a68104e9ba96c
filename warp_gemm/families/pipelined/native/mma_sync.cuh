//! Tensor-core products with ldmatrix + mma.sync (f16/bf16 m16n8k16, tf32 m16n8k8), sm_80+.
//! snippet mma_geometry template
//! --- 16-bit and tf32 inputs on tensor cores through mma.sync (spec.mma; H100: 303.8 / 125.7 TFLOP/s at 4096^3) ---
//! tile_matmul's 16-bit GEMM (MathDx) reads its fragments with plain 32-bit shared loads and byte permutes (PRMT),
//! never ldmatrix (SASS of the fp16 default), and measured 234-261 TFLOP/s with its
//! operands already in shared memory (a copy-free ceiling, 4096^3): the kernel's ~190 sits under that. _MMA_SYNC replaces
//! the K step's tile_matmul by the warp-level MMA of CUTLASS's sm80 GEMMs: ldmatrix x4 fragment loads (.trans for
//! the operands stored with k across rows: A of layout T, B of layout N), mma.sync.m16n8k16 with float32
//! accumulators in the register tile's own storage (acc.data), one barrier per K step as in the SIMT kernel. The
//! stages are the tile_matmul kernel's (as copied, 16-byte cp.async, rows padded by 16 bytes): an ldmatrix reads 8
//! rows of 16 bytes, and with an odd number of 16-byte words per row (tk, tm, tn multiples of 16 and 8 elements of
//! padding) they fall in 8 different bank groups. The epilogue is _OWN_STORE.

        const int v = WP_TILE_THREAD_IDX * (${VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the ${VT} the tile needs
        const int w = v / 32;
        const int l = v % 32;
        const int wr = (w / ${WN}) * ${WTM};  // the first row and column of warp w's outputs in the tile
        const int wc = (w % ${WN}) * ${WTN};
//! snippet mma_sync template

    // acc += A x B over stage s of the shared buffers ba (A's ${AR} x ${AC} stage, row stride ${ALD}) and bb (${BR} x
    // ${BC}, row stride ${BLD}) on tensor cores: mma.sync ${SHAPE}, ${T} products, float32 sums. The tile's ${VT} threads
    // are ${NW} warps (${WM} x ${WN}) of ${WTM} x ${WTN} outputs: ${MI} x ${NJ} MMA tiles of 16 x 8 whose 4 outputs per
    // thread are acc.data[4 (mi ${NJ} + nj) + c]: row wr + 16 mi + l / 4 + 8 (c / 2), column wc + 8 nj + 2 (l % 4) +
    // c % 2 (l: the lane). Fragments come from ldmatrix x4 loads of 8 x 16-byte matrices (${P} element(s) per 32-bit
    // register): lane l gives the address of row l % 8 of matrix l / 8; A's matrix j is rows + 8 (j % 2), k + ${KH}
    // (j / 2) of a 16 x ${KSTEP} (the a0..a3 of the PTX fragment), B's columns + 8 (j / 2), k + ${KH} (j % 2) of a 16 x
    // ${KSTEP} (b0, b1 of MMA tiles 2 nb and 2 nb + 1).${SCALAR_DOC}${CVT_DOC} No barrier: the caller syncs before it
    // refills a stage.
#if defined(__CUDA_ARCH__)
    const int q = 0;
${GEOM}    const int j = l / 8;
    const int i = l % 8;
    const unsigned sa = (unsigned)__cvta_generic_to_shared(ba.data.ptr) + (unsigned)(s * ${SA} * ${ITEM});
    const unsigned sb = (unsigned)__cvta_generic_to_shared(bb.data.ptr) + (unsigned)(s * ${SB} * ${ITEM});
    float* d = acc.data;
#pragma unroll
    for (int kk = 0; kk < ${KS}; ++kk) {
        const int cb = ${KSTEP} * kk;
        unsigned af[${MI}][4];
        unsigned bf[${NB}][4];
#pragma unroll
        for (int mi = 0; mi < ${MI}; ++mi) {
            const int rb = wr + 16 * mi;
${A_LOAD}${CVT_A}        }
#pragma unroll
        for (int nb = 0; nb < ${NB}; ++nb) {
            const int rb = wc + 16 * nb;
${B_LOAD}${CVT_B}        }
#pragma unroll
        for (int mi = 0; mi < ${MI}; ++mi)
#pragma unroll
            for (int nj = 0; nj < ${NJ}; ++nj) {
                float* c = d + 4 * (mi * ${NJ} + nj);
                asm volatile("mma.sync.aligned.${SHAPE}.row.col.f32.${T}.${T}.f32 {%0, %1, %2, %3}, "
                             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                             : "r"(af[mi][0]), "r"(af[mi][1]), "r"(af[mi][2]), "r"(af[mi][3]),
                               "r"(bf[nj / 2][2 * (nj % 2)]), "r"(bf[nj / 2][2 * (nj % 2) + 1]));
            }
    }
#else
    // The CPU runs the tile's threads one after another. Each output sums, over k, the A and B values that the
    // lanes holding them in the PTX fragment layouts would have received from the ldmatrix addresses above (the
    // same expressions), so the CPU checks the addressing.
    const ${IT}* As = (const ${IT}*)ba.data.ptr + (size_t)s * ${SA};
    const ${IT}* Bs = (const ${IT}*)bb.data.ptr + (size_t)s * ${SB};
${CPU_CVT}    // element e of register j of lane L of an x4 ldmatrix at (rb, cb): row L / 4, b16 columns 2 (L % 4), + 1
    // of matrix j (.trans: of its transpose), whose row i starts where lane 8 j + i points (scalar fragments: the
    // word that lane L loads for register j)
    auto lda = [&](int rb, int cb, int L, int j, int e) -> float {
        const int i = ${A_I};
        return ${RND}((float)As[(${A_OFF_CPU}) + ${A_C}]);
    };
    auto ldb = [&](int rb, int cb, int L, int j, int e) -> float {
        const int i = ${B_I};
        return ${RND}((float)Bs[(${B_OFF_CPU}) + ${B_C}]);
    };
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        float* d = acc.data + q * ${PER};
        for (int kk = 0; kk < ${KS}; ++kk)
            for (int mi = 0; mi < ${MI}; ++mi)
                for (int nj = 0; nj < ${NJ}; ++nj)
                    for (int c = 0; c < 4; ++c) {
                        const int row = l / 4 + 8 * (c / 2);  // in the 16 x 8 MMA tile
                        const int col = 2 * (l % 4) + c % 2;
                        float x = 0.0f;
                        // A (row, k): lane 4 (row % 8) + (k % ${KH}) / ${P}, register row / 8 + 2 (k / ${KH}), element
                        // k % ${P}; B (k, col): lane 4 col + (k % ${KH}) / ${P}, register k / ${KH} of MMA tile nj (2 (nj %
                        // 2) + k / ${KH} of the x4)
                        for (int k = 0; k < ${KSTEP}; ++k)
                            x += lda(wr + 16 * mi, ${KSTEP} * kk, 4 * (row % 8) + (k % ${KH}) / ${P},
                                     row / 8 + 2 * (k / ${KH}), k % ${P}) *
                                 ldb(wc + 16 * (nj / 2), ${KSTEP} * kk, 4 * col + (k % ${KH}) / ${P},
                                     2 * (nj % 2) + k / ${KH}, k % ${P});
                        d[4 * (mi * ${NJ} + nj) + c] += x;
                    }
    }
#endif
//! snippet mma_cvt template
//! tf32: each fragment register rounded to tf32 (to nearest, ties away from zero) rather than left to the tensor
//! core, which ignores the low 13 bits (truncation: a bias of up to one tf32 unit instead of half).
            for (int r = 0; r < 4; ++r)
                asm("cvt.rna.tf32.f32 %0, %1;\n"
                    : "=r"(${F}[${X}][r]) : "f"(__uint_as_float(${F}[${X}][r])));
//! snippet mma_cpu_cvt template
    // tf32 rounding as cvt.rna.tf32.f32: to nearest, ties away from zero, on the 19 upper bits;
    // infinities and NaN unchanged
    auto tf32 = [](float x) -> float {
        unsigned u;
        memcpy(&u, &x, 4);
        if ((u & 0x7f800000u) != 0x7f800000u)
            u = (u + 0x1000u) & 0xffffe000u;
        memcpy(&x, &u, 4);
        return x;
    };
//! snippet ldsm_x4 template
            asm volatile("ldmatrix.sync.aligned.m8n8.x4${TR}.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(${F}[${X}][0]), "=r"(${F}[${X}][1]), "=r"(${F}[${X}][2]), "=r"(${F}[${X}][3])
                         : "r"(${BASE} + ${ITEM} * (${OFF})));
//! snippet lds_32 template
            asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(${F}[${X}][${R}])
                         : "r"(${BASE} + ${ITEM} * (${OFF})));
