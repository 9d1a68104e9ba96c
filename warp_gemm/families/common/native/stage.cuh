//! Staging: operands copied into rows that start on 16-byte boundaries.
//! snippet stage template
//! One thread per 16-byte chunk of a destination row: elements read one by one (the source rows are only
//! element-aligned), packed, stored with one 16-byte store; zeros past the source row's end (padding).
//! Any architecture; the CPU twin stores with memcpy.

    // dst: (nb, r, cp) rows 16-byte aligned, cp a multiple of ${E}; src: (nb, r, c) with any strides.
    // t: the chunk's index in dst, row-major over (nb, r, cp / ${E}).
    const int per_row = dst.shape[2] / ${E};
    const int j = (t % per_row) * ${E};
    const int i = (t / per_row) % dst.shape[1];
    const int b = t / (per_row * dst.shape[1]);
    const int nc = src.shape[2];
    const char* s = (const char*)src.data + (size_t)b * src.strides[0] + (size_t)i * src.strides[1];
    char* d = (char*)dst.data + (size_t)b * dst.strides[0] + (size_t)i * dst.strides[1] + (size_t)j * ${ITEM};
#if defined(__CUDA_ARCH__)
    __align__(16) ${BITS} v[${E}];
#else
    ${BITS} v[${E}];
#endif
    for (int e = 0; e < ${E}; ++e)
        v[e] = j + e < nc ? *(const ${BITS}*)(s + (size_t)(j + e) * src.strides[2]) : (${BITS})0;
#if defined(__CUDA_ARCH__)
    *(uint4*)d = *(const uint4*)v;
#else
    memcpy(d, v, 16);
#endif
