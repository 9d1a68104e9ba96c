//! GEMV over K bands: per-band partial sums into a workspace, the fused in-launch finish.
//! snippet bands template nonl

    // W[wrow, c + e] = sum_k vec[bv, k] * Mat[bm, k, c + e] for the thread's ${E} columns c + e < R (its 16-byte
    // chunk of each row), k in [k0, k1): one band's partial sums. CUDA: 16-byte loads, ${U} rows in flight,
    // where the chunk is whole and its start, the column stride and the row stride allow; the rest (and the
    // CPU) scalar and bounds-checked.
    const int R = Mat.shape[2];
    const size_t rs = (size_t)Mat.strides[1];
    const size_t cs = (size_t)Mat.strides[2];
    const char* base = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)c * cs;
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
#if defined(__CUDA_ARCH__)
    __align__(16) ${ACC} acc[${E}];
#else
    ${ACC} acc[${E}];
#endif
    for (int e = 0; e < ${E}; ++e) acc[e] = ${ACC}(0);
    int k = k0;
#if defined(__CUDA_ARCH__)
    if (c + ${E} <= R && cs == ${ITEM} && ((size_t)base | rs) % 16 == 0) {
        for (; k + ${U} <= k1; k += ${U}) {
            uint4 q[${U}];
            ${ACC} x[${U}];
#pragma unroll
            for (int u = 0; u < ${U}; ++u) {
                q[u] = __ldg((const uint4*)(base + (size_t)(k + u) * rs));
                x[u] = ${ACC}(*(const ${T}*)(v + (size_t)(k + u) * vs));
            }
#pragma unroll
            for (int u = 0; u < ${U}; ++u)
#pragma unroll
                for (int e = 0; e < ${E}; ++e) acc[e] += x[u] * ${ACC}(((const ${T}*)&q[u])[e]);
        }
    }
#endif
    for (; k < k1; ++k) {
        const ${ACC} x = ${ACC}(*(const ${T}*)(v + (size_t)k * vs));
        const char* p = base + (size_t)k * rs;
        for (int e = 0; e < ${E} && c + e < R; ++e) acc[e] += x * ${ACC}(*(const ${T}*)(p + (size_t)e * cs));
    }
${GROUPS}${STORE_OPEN}    char* w = (char*)W.data + (size_t)wrow * W.strides[0] + (size_t)c * W.strides[1];
#if defined(__CUDA_ARCH__)
    if (c + ${E} <= R && W.strides[1] == sizeof(${ACC}) && (size_t)w % 16 == 0) {  // 16-byte stores: coalesced
#pragma unroll
        for (int q = 0; q < ${E} * (int)sizeof(${ACC}) / 16; ++q) ((uint4*)w)[q] = ((const uint4*)acc)[q];
${VEC_DONE}#endif
    for (int e = 0; e < ${E} && c + e < R; ++e) *(${ACC}*)(w + (size_t)e * W.strides[1]) = acc[e];
${STORE_CLOSE}
//! snippet bands_groups template
//! bands with row groups (GemvSpec.band_groups > 1), between _BANDS' sums and its stores: the groups' partial sums of
//! one band meet. grp: this thread's row group; the thread's column c = (block column) + j * {E}. Two variants, by
//! {CUDA_LEAVE} and {CPU_LEAVE}: the two-launch kernel's later groups return once their sums are handed on (group 0
//! alone stores); before the fused finish (GemvSpec.fused) every thread goes on -- on CUDA the finish needs the whole
//! block, and group 0 alone stores (_BANDS_GROUP0_OPEN / _CLOSE); on the CPU (threads in index order) only the last
//! group, the band's last writer, goes on to count the band's arrival (_BANDS_GROUP0_CLOSE).

    // The block's ${RG} row groups meet. CUDA: groups 1.. leave their sums in shared memory, group 0 adds them in
    // group order and stores them below. CPU (threads one at a time, in index order): group 0 stores below, each
    // later group adds its sums to what is there.${THEN}
#if defined(__CUDA_ARCH__)
    {
        __shared__ ${ACC} red[${RG} - 1][${E}][${GT}];
        const int j = (c / ${E}) % ${GT};
        if (grp > 0)
            for (int e = 0; e < ${E}; ++e) red[grp - 1][e][j] = acc[e];
        __syncthreads();
        if (grp == 0)
            for (int h = 0; h < ${RG} - 1; ++h)
#pragma unroll
                for (int e = 0; e < ${E}; ++e) acc[e] += red[h][e][j];
    }
${CUDA_LEAVE}#else
    if (grp > 0) {
        char* wg = (char*)W.data + (size_t)wrow * W.strides[0] + (size_t)c * W.strides[1];
        for (int e = 0; e < ${E} && c + e < R; ++e) *(${ACC}*)(wg + (size_t)e * W.strides[1]) += acc[e];
${CPU_LEAVE}    }
#endif
//! snippet bands_group0_close template
    }
#if !defined(__CUDA_ARCH__)
    if (grp < ${RG} - 1)
        return;  // CPU: the band's last group counts its arrival
#endif
//! snippet bands_sum template

    // sum over the S bands of column i + lane % 32 of batch entry b: W[s * batch + b, i + lane % 32], in a fixed
    // order. CUDA (a block of ${NW} warps per 32 columns): warp w sums bands w, w + ${NW}, ..., the warps' sums
    // meet in shared memory in warp order, thread lane < 32 returns its column's total (the others 0; every
    // thread of the block calls this: there is a __syncthreads). CPU: thread lane < 32 sums every band in order.
    const int R = W.shape[1];
    const size_t s0 = (size_t)W.strides[0] * batch;
    const char* col = (const char*)W.data + (size_t)b * W.strides[0] + (size_t)(i + lane % 32) * W.strides[1];
#if defined(__CUDA_ARCH__)
    ${ACC} acc = ${ACC}(0);
    if (i + lane % 32 < R) {
#pragma unroll ${FU}
        for (int s = lane / 32; s < S; s += ${NW}) acc += *(const ${ACC}*)(col + (size_t)s * s0);
    }
    __shared__ ${ACC} red[${NW}][32];
    red[lane / 32][lane % 32] = acc;
    __syncthreads();
    ${ACC} out = ${ACC}(0);
    if (lane < 32)
        for (int w = 0; w < ${NW}; ++w) out += red[w][lane];
    return out;
#else
    ${ACC} out = ${ACC}(0);
    if (lane < 32 && i + lane < R)
        for (int s = 0; s < S; ++s) out += *(const ${ACC}*)(col + (size_t)s * s0);
    return out;
#endif
//! snippet bands_fused_tail template
//! bands, fused (GemvSpec.fused): after _BANDS' partial sums, the finish in the same launch. cnt: the counters (two ints
//! per column block of each batch entry on CUDA, per thread on the CPU), zero between launches; the launch's threads
//! per (batch entry, band) (nthr), a whole number of blocks, so a CUDA block is one column block of one band; nfin: the
//! finishers per column block.

    // The finish (fused): the last nfin of the S bands to arrive at this column block sum its columns over the bands,
    // in band order, and apply the epilogue: D[b, col] = ${OT}(alpha * sum${AXPBY_DOC}).
#if defined(__CUDA_ARCH__)
    const int tb = t % ${BLOCK};  // this thread in its block (nthr is a whole number of blocks)
    const int blk = t / ${BLOCK};
    int* ctr = (int*)cnt.data + 2 * ((size_t)b * (nthr / ${BLOCK}) + blk);
    __shared__ int wg_rank;
    __threadfence();  // this thread's partial sums are visible device-wide before the block arrives
    __syncthreads();
    if (tb == 0)
        wg_rank = atomicAdd(ctr, 1);
    __syncthreads();
    const int rank = wg_rank;
    if (rank < S - nfin)
        return;  // not a finisher (the whole block)
    if (tb == 0) {
        while (*(volatile int*)ctr < S) {
#if __CUDA_ARCH__ >= 700
            __nanosleep(64);
#endif
        }
        __threadfence();
    }
    __syncthreads();
    const int lane = tb % 32;
    const int wq = tb / 32;  // this thread's warp
    const int per_f = ((${COLS} / 32 + nfin - 1) / nfin) * 32;  // columns per finisher, whole groups of 32
    const int c0 = blk * ${COLS} + (rank - (S - nfin)) * per_f;
    const int cend = (blk + 1) * ${COLS} < R ? (blk + 1) * ${COLS} : R;
    const int c1 = c0 + per_f < cend ? c0 + per_f : cend;
    __shared__ ${ACC} red[${NW}][32];
    for (int g = c0; g < c1; g += 32) {
        const int col = g + lane;
        ${ACC} a = ${ACC}(0);
        if (col < c1) {
            const char* src = (const char*)W.data + (size_t)b * W.strides[0] + (size_t)col * W.strides[1];
            const size_t s0 = (size_t)W.strides[0] * batch;
#pragma unroll ${FU}
            for (int q = wq; q < S; q += ${NW}) a += __ldcg((const ${ACC}*)(src + (size_t)q * s0));
        }
        red[wq][lane] = a;
        __syncthreads();
        if (wq == 0 && col < c1) {
            ${ACC} sum = ${ACC}(0);
            for (int q = 0; q < ${NW}; ++q) sum += red[q][lane];
${STORE}        }
        __syncthreads();
    }
    if (tb == 0 && atomicAdd(ctr + 1, 1) == nfin - 1) {  // the last finisher to leave: counters back to zero
        ctr[0] = 0;
        ctr[1] = 0;
    }
#else
    // CPU (threads one at a time): this thread's own counter; the last of its S bands sums them in band order.
    int* ctr = (int*)cnt.data + 2 * ((size_t)b * nthr + t);
    if (++ctr[0] < S)
        return;
    ctr[0] = 0;
    for (int e = 0; e < ${E} && c + e < R; ++e) {
        const int col = c + e;
        ${ACC} sum = ${ACC}(0);
        for (int q = 0; q < S; ++q)
            sum += *(const ${ACC}*)((const char*)W.data + (size_t)(q * batch + b) * W.strides[0] +
                                   (size_t)col * W.strides[1]);
${STORE}    }
#endif
//! snippet bands_fused_store template
            {
                ${ACC} y = alpha * sum;
${AXPBY}                *(${OT}*)((char*)D.data + (size_t)b * D.strides[0] + (size_t)col * D.strides[1]) = ${OT}(y);
            }
//! snippet bands_fused_axpby template
                y += beta * ${ACC}(*(const ${OT}*)((const char*)C.data + (size_t)(b < c_nb - 1 ? b : c_nb - 1) * C.strides[0] + (size_t)col * C.strides[1]));
