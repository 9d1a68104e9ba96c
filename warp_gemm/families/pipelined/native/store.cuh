//! Epilogues: zero the accumulator, store it (alpha, beta*C, cast), staged 16-byte stores.
//! snippet zero_acc template
//! The shared accumulator's zero fill and the "scale" epilogue's stores, as snippets: Warp's tile_zeros and
//! tile_store compute an index per element and store 4 / 2 bytes at a time; at 128x128 tiles Warp's zero fill
//! (with a fill of the stage buffers) took ~45% and its stores ~19% of the instructions of a one-K-step block
//! (ncu, H100).

    // Zero the whole shared accumulator (every row with its padding: ${N16} 16-byte words; Warp aligns
    // shared tiles to 16 bytes), then a block barrier. CPU: the same, byte by byte.
    char* p = (char*)acc.data.ptr;
    for (int i = WP_TILE_THREAD_IDX; i < ${N16}; i += WP_TILE_BLOCK_DIM) {
#if defined(__CUDA_ARCH__)
        ((::uint4*)p)[i] = make_uint4(0u, 0u, 0u, 0u);
#else
        for (int b = 0; b < 16; ++b) p[(size_t)i * 16 + b] = 0;
#endif
    }
    WP_TILE_SYNC();
//! snippet store template

    // dst[m0 + r, n0 + c] = ${OT}(alpha * acc[r, c]) for the block's ${TM} x ${TN} tile (acc: row stride ${TNC});
    // rows and columns past dst's extent are dropped. Each thread takes ${E} consecutive accumulator
    // elements (one 16-byte shared load on CUDA) and stores them with one ${VW}-byte store where dst's
    // rows allow it (unit column stride, base and row stride multiples of ${VW} bytes), else one by one.
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == ${OI} && (size_t)base % ${VW} == 0 && (nr <= 1 || ld % ${VW} == 0);
    const ${AT}* a = (const ${AT}*)acc.data.ptr;
    for (int c = WP_TILE_THREAD_IDX; c < ${TOTAL}; c += WP_TILE_BLOCK_DIM) {
        const int r = c / ${CPR};
        const int cc = (c - r * ${CPR}) * ${E};
        const int gr = m0 + r;
        const int gc = n0 + cc;
        if (gr >= nr || gc >= nc)
            continue;
        alignas(16) ${AT} x[${E}];
#if defined(__CUDA_ARCH__)
        *(::uint4*)x = *(const ::uint4*)(a + (size_t)r * ${TNC} + cc);
#else
        for (int e = 0; e < ${E}; ++e) x[e] = a[(size_t)r * ${TNC} + cc + e];
#endif
        char* g = base + (size_t)gr * ld + (size_t)gc * cs;
        if (vec && gc + ${E} <= nc) {
            alignas(16) ${OT} v[${E}];
            for (int e = 0; e < ${E}; ++e) v[e] = ${OT}(alpha * x[e]);
#if defined(__CUDA_ARCH__)
            *(${VT}*)g = *(const ${VT}*)v;
#else
            for (int b = 0; b < ${VW}; ++b) g[b] = ((const char*)v)[b];
#endif
        } else {
            for (int e = 0; e < ${E} && gc + e < nc; ++e) *(${OT}*)(g + (size_t)e * cs) = ${OT}(alpha * x[e]);
        }
    }
//! snippet own_store template

    // dst[m0 + r, n0 + c] = ${OT}(alpha * acc[r, c]${AXPBY_DOC}) for this thread's ${PER} outputs, held in acc.data in
    // ${ORDER}'s order (output o at tile row ${ROW}, column ${COL}); rows and columns past dst's extent are dropped.
    // Outputs o .. o + ${V} - 1 (o a multiple of ${V}) are ${V} consecutive columns of one row, stored with one
    // ${VB}-byte store where dst's rows allow it (unit column stride, base and row stride multiples of ${VB} bytes).
    // src: C ("axpby"; dst's shape) or unread.
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == sizeof(${OT}) && (size_t)base % ${VB} == 0 && (nr <= 1 || ld % ${VB} == 0);
    const char* cbase = (const char*)src.data;
    const size_t cld = (size_t)src.strides[0];
    const size_t ccs = (size_t)src.strides[1];
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        const ${AT}* d = acc.data + q * ${PER};
#pragma unroll
        for (int o = 0; o < ${PER}; o += ${V}) {
            const int gr = m0 + ${ROW};
            const int gc = n0 + ${COL};
            if (gr >= nr || gc >= nc)
                continue;
            alignas(${VB}) ${OT} y[${V}];
#pragma unroll
            for (int e = 0; e < ${V}; ++e) {
                ${AT} x = alpha * d[o + e];
${AXPBY}                y[e] = ${OT}(x);
            }
            char* g = base + (size_t)gr * ld + (size_t)gc * cs;
            if (vec && gc + ${V} <= nc) {
#if defined(__CUDA_ARCH__)
                *(${VTYPE}*)g = *(const ${VTYPE}*)y;
#else
                for (int b = 0; b < ${VB}; ++b) g[b] = ((const char*)y)[b];
#endif
            } else {
                for (int e = 0; e < ${V} && gc + e < nc; ++e) *(${OT}*)(g + (size_t)e * cs) = y[e];
            }
        }
    }
//! snippet own_axpby template
//! beta * C for output o + e (its column may lie past dst's extent: then the value is never stored, and C not read)
                if (gc + e < nc) x += beta * (${AT})(*(const ${OT}*)(cbase + (size_t)gr * cld + (size_t)(gc + e) * ccs));
//! snippet staged_store template
//! The mma.sync and SIMT kernels' epilogue through shared memory (:func:`staged_store`). Nsight Compute on
//! fp16 64 x 256^3 (128x128x64 s3 mma.sync) put 45% of the kernel's stall samples
//! and 55% of its instructions in _OWN_STORE: 64 stores of 4 bytes per thread, each with its own bounds check and
//! 64-bit address, half of every 32-byte sector wasted (38% excess sectors) and the stores' registers reused at once
//! (long-scoreboard stalls). Here each thread writes its outputs, converted, into the stage buffer of A (free once
//! the K loop's last wait has passed its barrier), and the block then stores the tile row by row in 16-byte chunks.
//! H100, cold L2, staged against not (benchmarks/results/tuning/staged_epilogue_stages_2026-11-23.txt): 64 x 256^3
//! with 128x128x32 s4 o2 18.8 us (the same tile unstaged 26.3; graph replay 12.9 against 19.9), 4096^3 443.7 against 457.7, 1536^3 40.2
//! against 42.4, 512x1024x1024 14.5 against 15.4, 1000^3 and 256x2048x2048 within noise; 1023x1025x1027 (rows not
//! 16-byte aligned) stores element by element, consecutive threads taking consecutive elements of a row.

    // dst[m0 + r, n0 + c] = ${OT}(alpha * acc[r, c]) through shared memory: each thread writes its ${PER} outputs
    // (${ORDER}'s order, as in _OWN_STORE: output o at tile row ${ROW}, column ${COL}), converted, into `stage` (the
    // free A stage buffer, viewed as ${TM} rows of ${RS} bytes), ${V} columns per write; then the block stores the tile
    // in ${CH}-element (16-byte) chunks, consecutive threads taking consecutive chunks of a row, where dst's rows allow
    // 16-byte stores (unit column stride, base and row stride multiples of 16 bytes), else element by element,
    // consecutive threads taking consecutive elements of a row; rows and columns past dst's extent are dropped and
    // a chunk that crosses the last column is stored element by element. Every thread of the block calls this (two
    // barriers).
    char* sm = (char*)stage.data.ptr;
    WP_TILE_SYNC();
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        const ${AT}* d = acc.data + q * ${PER};
#pragma unroll
        for (int o = 0; o < ${PER}; o += ${V}) {
            alignas(${VB}) ${OT} y[${V}];
#pragma unroll
            for (int e = 0; e < ${V}; ++e) y[e] = ${OT}(alpha * d[o + e]);
            char* p = sm + (${ROW}) * ${RS} + (${COL}) * ${IT};
#if defined(__CUDA_ARCH__)
            *(${VTYPE}*)p = *(const ${VTYPE}*)y;
#else
            for (int b = 0; b < ${VB}; ++b) p[b] = ((const char*)y)[b];
#endif
        }
    }
    WP_TILE_SYNC();
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == ${IT} && (size_t)base % 16 == 0 && (nr <= 1 || ld % 16 == 0);
    if (!vec) {
        for (int x = WP_TILE_THREAD_IDX; x < ${TM} * ${TN}; x += WP_TILE_BLOCK_DIM) {
            const int r = x / ${TN};
            const int c = x % ${TN};
            if (m0 + r < nr && n0 + c < nc)
                *(${OT}*)(base + (size_t)(m0 + r) * ld + (size_t)(n0 + c) * cs) =
                    *(const ${OT}*)(sm + r * ${RS} + c * ${IT});
        }
        return;
    }
    for (int x = WP_TILE_THREAD_IDX; x < ${TM} * ${CPR}; x += WP_TILE_BLOCK_DIM) {
        const int r = x / ${CPR};
        const int c = (x % ${CPR}) * ${CH};
        const int gr = m0 + r;
        const int gc = n0 + c;
        if (gr >= nr || gc >= nc)
            continue;
        const char* t = sm + r * ${RS} + c * ${IT};
        char* g = base + (size_t)gr * ld + (size_t)gc * cs;
        if (gc + ${CH} <= nc) {
#if defined(__CUDA_ARCH__)
            *(::uint4*)g = *(const ::uint4*)t;
#else
            for (int b = 0; b < 16; ++b) g[b] = t[b];
#endif
        } else {
            for (int e = 0; e < ${CH} && gc + e < nc; ++e) *(${OT}*)(g + (size_t)e * cs) = *(const ${OT}*)(t + e * ${IT});
        }
    }
