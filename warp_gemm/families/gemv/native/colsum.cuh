//! GEMV, vector times matrix columns: column groups of lanes, 16-byte loads, row groups per block.
//! snippet colsum_scalar template

    // column i + lane (lane < COLS) of the strip at i: sum_k vec[bv, k] * Mat[bm, k, i + lane], k in [k0, k1);
    // other lanes return 0. Scalar loads: the CPU twin (one thread per column), and the CPU build of a
    // CUDA spec (its threads run one at a time: thread j < COLS of each strip takes column j).
    const int R = Mat.shape[2];
    ${ACC} out = ${ACC}(0);
    if (lane < ${COLS} && i + lane < R) {
        const char* p = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)(i + lane) * ${ITEM};
        const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
        for (int k = k0; k < k1; ++k)
            out += ${ACC}(*(const ${T}*)(v + (size_t)k * vec.strides[1]))
                   * ${ACC}(*(const ${T}*)(p + (size_t)k * Mat.strides[1]));
    }
    return out;
//! snippet colsum template

    // sum_k vec[bv, k] * Mat[bm, k, i + j] for the COLS columns j of the strip at i, k in [k0, k1), by the
    // block's ${BLOCK} threads (lane: the thread's index in the block; every thread of the block calls
    // this: there is a __syncthreads). Thread lane reads 16-byte chunk cl = lane % ${CL} of the rows
    // k0 + g, k0 + g + ${RG}, ... (row group g = lane / ${CL}), ${U} rows in flight; the sums of one chunk's
    // columns meet over the warp's row groups (xor shuffles), then over the block's ${NW} warps (shared
    // memory). Thread j < COLS returns column i + j, the others 0. Vector loads where the chunk is whole
    // and its start and the row stride are 16-byte aligned; else scalar, bounds-checked loads.
#if defined(__CUDA_ARCH__)
    const int R = Mat.shape[2];
    const size_t rs = (size_t)Mat.strides[1];
    const int cl = lane % ${CL};
    const int c = i + cl * ${E};
    const char* base = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)c * ${ITEM};
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
    ${ACC} acc[${E}];
#pragma unroll
    for (int e = 0; e < ${E}; ++e) acc[e] = ${ACC}(0);
    int k = k0 + lane / ${CL};
    if (c + ${E} <= R && ((size_t)base | rs) % 16 == 0) {
        for (; k + (${U} - 1) * ${RG} < k1; k += ${U} * ${RG}) {
            uint4 q[${U}];
            ${ACC} x[${U}];
#pragma unroll
            for (int u = 0; u < ${U}; ++u) {
                q[u] = __ldg((const uint4*)(base + (size_t)(k + u * ${RG}) * rs));
                x[u] = ${ACC}(*(const ${T}*)(v + (size_t)(k + u * ${RG}) * vs));
            }
#pragma unroll
            for (int u = 0; u < ${U}; ++u)
#pragma unroll
                for (int e = 0; e < ${E}; ++e) acc[e] += x[u] * ${ACC}(((const ${T}*)&q[u])[e]);
        }
    }
    for (; k < k1; k += ${RG}) {
        const ${ACC} x = ${ACC}(*(const ${T}*)(v + (size_t)k * vs));
        const char* p = base + (size_t)k * rs;
        for (int e = 0; e < ${E} && c + e < R; ++e) acc[e] += x * ${ACC}(*(const ${T}*)(p + (size_t)e * ${ITEM}));
    }
    __shared__ ${ACC} red[${NW}][${COLS}];
#pragma unroll
    for (int e = 0; e < ${E}; ++e)
        for (int o = ${CL}; o < 32; o <<= 1) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
    if (lane % 32 < ${CL})
        for (int e = 0; e < ${E}; ++e) red[lane / 32][cl * ${E} + e] = acc[e];
    __syncthreads();
    ${ACC} out = ${ACC}(0);
    if (lane < ${COLS})
        for (int w = 0; w < ${NW}; ++w) out += red[w][lane];
    return out;
#else

    // column i + lane (lane < COLS) of the strip at i: sum_k vec[bv, k] * Mat[bm, k, i + lane], k in [k0, k1);
    // other lanes return 0. Scalar loads: the CPU twin (one thread per column), and the CPU build of a
    // CUDA spec (its threads run one at a time: thread j < COLS of each strip takes column j).
    const int R = Mat.shape[2];
    ${ACC} out = ${ACC}(0);
    if (lane < ${COLS} && i + lane < R) {
        const char* p = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)(i + lane) * ${ITEM};
        const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
        for (int k = k0; k < k1; ++k)
            out += ${ACC}(*(const ${T}*)(v + (size_t)k * vec.strides[1]))
                   * ${ACC}(*(const ${T}*)(p + (size_t)k * Mat.strides[1]));
    }
    return out;
#endif
