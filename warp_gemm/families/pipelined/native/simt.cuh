//! Exact float32 products on CUDA cores: 8x8 or 16x8 outputs per thread from the shared stages.
//! snippet simt_geometry template

        const int v = WP_TILE_THREAD_IDX * (${VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the ${VT} the tile needs
        const int w = v / 32;
        const int l = v % 32;
        const int row0 = (w / ${WN}) * ${WR} + (l / 8) * 4;
        const int col0 = (w % ${WN}) * 64 + (l % 8) * 4;
//! snippet simt_mma template

    // acc += A x B over k ${K0} .. ${K1} - 1 of stage s of the K-major shared buffers ba (${TK} x TM, row stride
    // ${ALD}) and bb (${TK} x TN, row stride ${BLD}), in float32 FMAs. The tile's ${VT} threads (CUDA: the block; the
    // CPU runs them one after another) keep ${TR} x 8 outputs each in acc.data (q: the CPU's ${VT} / block_dim of them
    // per real thread): thread v of warp w = v / 32, lane l holds output i * 8 + j at row row0 + (i % 4) + 16 (i / 4)
    // and column col0 + (j % 4) + 32 (j / 4), i < ${TR}, j < 8, row0 = (w / ${WN}) * ${WR} + (l / 8) * 4, col0 =
    // (w % ${WN}) * 64 + (l % 8) * 4; per k it reads its ${TR} values of A and 8 of B with ${NLD} 16-byte loads. No
    // barrier: the caller syncs before it refills a stage.
    const float* As = (const float*)ba.data.ptr + (size_t)s * ${SA};
    const float* Bs = (const float*)bb.data.ptr + (size_t)s * ${SB};
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        const float* pa = As + row0;
        const float* pb = Bs + col0;
        float* d = acc.data + q * ${PER};
#pragma unroll
        for (int k = ${K0}; k < ${K1}; ++k) {
            alignas(16) float a[${TR}];
            alignas(16) float b[8];
#if defined(__CUDA_ARCH__)
${ALOADS}            *(float4*)b = *(const float4*)(pb + ${BLD} * k);
            *(float4*)(b + 4) = *(const float4*)(pb + ${BLD} * k + 32);
#else
            for (int i = 0; i < ${TR}; ++i) a[i] = pa[${ALD} * k + (i % 4) + 16 * (i / 4)];
            for (int j = 0; j < 8; ++j) b[j] = pb[${BLD} * k + (j % 4) + 32 * (j / 4)];
#endif
#pragma unroll
            for (int i = 0; i < ${TR}; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) d[i * 8 + j] += a[i] * b[j];
        }
    }
