//! GEMV, matrix rows dotted with the vector: one warp per output, 16-byte loads, shuffle sums.
//! snippet rowdot template
//! --- the native snippets --------------------------------------------------------------------------------

    // sum_k Mat[bm, r, k] * vec[bv, k], k in [k0, k1), r = i: this lane's 16-byte chunks k0 + (lane + n *
    // LANES) * E, then (CUDA) the sum over the warp: every lane returns the total. Mat rows: unit stride
    // along k; vec: any stride. Assumes k0 is a multiple of E and the warp's 32 lanes call it together.
    // CUDA: 16-byte loads, U chunks in flight, where the row is 16-byte aligned (vec's too where it is
    // contiguous and aligned, else scalar); the rest scalar and bounds-checked. CPU (LANES 1): scalar.
    const char* row = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)i * Mat.strides[1];
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
    const int step = ${LANES} * ${E};
    int k = k0 + lane * ${E};
    ${ACC} s = ${ACC}(0);
#if defined(__CUDA_ARCH__)
    const bool vv = vs == ${ITEM} && (size_t)(v + (size_t)k0 * ${ITEM}) % 16 == 0;
    if ((size_t)(row + (size_t)k0 * ${ITEM}) % 16 == 0) {
        for (; k + (${U} - 1) * step + ${E} <= k1; k += ${U} * step) {
            uint4 a[${U}], x[${U}];
#pragma unroll
            for (int u = 0; u < ${U}; ++u) {
                const int kk = k + u * step;
                a[u] = __ldg((const uint4*)(row + (size_t)kk * ${ITEM}));
                if (vv) x[u] = __ldg((const uint4*)(v + (size_t)kk * ${ITEM}));
                else for (int e = 0; e < ${E}; ++e)
                    ((${T}*)&x[u])[e] = *(const ${T}*)(v + (size_t)(kk + e) * vs);
            }
#pragma unroll
            for (int u = 0; u < ${U}; ++u)
#pragma unroll
                for (int e = 0; e < ${E}; ++e)
                    s += ${ACC}(((const ${T}*)&a[u])[e]) * ${ACC}(((const ${T}*)&x[u])[e]);
        }
    }
#endif
    for (; k < k1; k += step)
        for (int e = 0; e < ${E} && k + e < k1; ++e)
            s += ${ACC}(*(const ${T}*)(row + (size_t)(k + e) * ${ITEM}))
                 * ${ACC}(*(const ${T}*)(v + (size_t)(k + e) * vs));
#if defined(__CUDA_ARCH__)
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
#endif
    return s;
