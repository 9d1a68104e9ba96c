//! Asynchronous copies of A/B tiles into shared stages (cp.async, sm_80+; a plain copy on the CPU).
//! snippet copy template nonl
//! --- the copy snippets ----------------------------------------------------------------------------------

    // Copy the ROWS x COLS region of `src` at (r0, c0) into rows [d0, d0 + ROWS), columns [0, COLS)
    // of the shared tile `dst` (row stride DLD elements); every element outside src is written as zero.
    // Assumes: src 2-D, unit column stride, each row's address a multiple of CH bytes, c0 a multiple
    // of CH / ITEM; dst rows a multiple of CH bytes apart (padded tiles keep 16). A region wholly inside
    // src takes _COPY_FAST where the family's tile allows it (FASTPATH below). Called by every
    // thread of the block; thread t copies chunks t, t + block_dim, ... . CUDA: cp.async (CH 16/8/4),
    // completion through commit/wait snippets; CH 2 or the CPU: a synchronous copy.
    const int nr = src.shape[0];
    const int nc = src.shape[1];
    const char* base = (const char*)src.data;
    const size_t ld = (size_t)src.strides[0];
    char* sbase = (char*)dst.data.ptr + (size_t)d0 * (${DLD} * ${ITEM});
${FASTPATH}${CHECK}    for (int c = WP_TILE_THREAD_IDX; c < ${TOTAL}; c += WP_TILE_BLOCK_DIM) {
        const int r = c / ${CPR};
        const int cc = (c - r * ${CPR}) * ${E};
        const int gr = r0 + r;
        const int gc = c0 + cc;
        int valid = nc - gc;
        valid = gr >= nr ? 0 : (valid < 0 ? 0 : (valid > ${E} ? ${E} : valid));
        const char* g = valid ? base + (size_t)gr * ld + (size_t)gc * ${ITEM} : base;
        char* s = sbase + ${DST};
#if defined(__CUDA_ARCH__) && ${ASYNC}
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
        asm volatile("cp.async.${CG}.shared.global [%0], [%1], ${CH}, %2;\n" :: "r"(sa), "l"(g), "r"(valid * ${ITEM}));
#elif defined(__CUDA_ARCH__)
        *(unsigned short*)s = valid ? *(const unsigned short*)g : (unsigned short)0;
#else
        for (int b = 0; b < ${CH}; ++b) s[b] = b < valid * ${ITEM} ? g[b] : (char)0;
#endif
    }
${FALLBACK}
//! snippet copy_fast template

    if (r0 + ${ROWS} <= nr && c0 + ${COLS} <= nc) {
        // The whole region inside src (most tiles): every chunk whole, the thread's chunks ${PER} rows apart,
        // one address computed, no bounds arithmetic per chunk. (The CPU runs it with several fibers per block,
        // wp.config.enable_cpu_blocks, as a synchronous copy.)
        const int t = WP_TILE_THREAD_IDX;
        const int r = t / ${CPR};
        const int cc = (t - r * ${CPR}) * ${E};
        const char* g = base + (size_t)(r0 + r) * ld + (size_t)(c0 + cc) * ${ITEM};
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(sbase + ${DST});
#pragma unroll
        for (int q = 0; q < ${NQ}; ++q)
            asm volatile("cp.async.${CG}.shared.global [%0], [%1], ${CH};\n" :: "r"(sa + q * (${QOFF})),
                         "l"(g + (size_t)q * ${PER} * ld));
#else
        char* s = sbase + ${DST};
        for (int q = 0; q < ${NQ}; ++q)
            memcpy(s + (size_t)q * (${QOFF}), g + (size_t)q * ${PER} * ld, ${CH});
#endif
        return;
    }${EDGE}
//! snippet copy_edge template
//! The fast path's chunks for a region that crosses src's last row or column (spec.edge_copy), in place of the chunk
//! loop of _COPY with its per-chunk division and bounds arithmetic. In a one-wave grid the edge tiles' blocks set
//! the kernel's time: float64 128x64x32 tiles of 8 warps ran 1000^3 in 74.1 us against 52.8 at 1024^3 (H100).

    {
        // A region crossing src's edge: the interior path's chunks, each with its source size in bytes (0: the
        // chunk is zero-filled) from one column test per thread and one row test per chunk. CPU: synchronous.
        const int t = WP_TILE_THREAD_IDX;
        const int r = t / ${CPR};
        const int cc = (t - r * ${CPR}) * ${E};
        const int gc = c0 + cc;
        const int vc = nc - gc;
        const int vb = (vc <= 0 ? 0 : (vc >= ${E} ? ${E} : vc)) * ${ITEM};
        const char* g = base + (size_t)(r0 + r) * ld + (size_t)gc * ${ITEM};
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(sbase + ${DST});
#pragma unroll
        for (int q = 0; q < ${NQ}; ++q) {
            const int n = r0 + r + q * ${PER} < nr ? vb : 0;
            const char* gq = n ? g + (size_t)q * ${PER} * ld : base;
            asm volatile("cp.async.${CG}.shared.global [%0], [%1], ${CH}, %2;\n" :: "r"(sa + q * (${QOFF})), "l"(gq),
                         "r"(n));
        }
#else
        char* s = sbase + ${DST};
        for (int q = 0; q < ${NQ}; ++q) {
            const int n = r0 + r + q * ${PER} < nr ? vb : 0;
            for (int b = 0; b < ${CH}; ++b)
                s[(size_t)q * (${QOFF}) + b] = b < n ? g[(size_t)q * ${PER} * ld + b] : (char)0;
        }
#endif
        return;
    }
//! snippet commit

    // Close the cp.async group of this pipeline stage (a group may be empty). CPU: nothing to do.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
//! snippet sync

    // A block barrier (CPU: threads run one at a time; the macro is a no-op there).
    WP_TILE_SYNC();
//! snippet wait template

    // Wait until at most ${N} cp.async groups of this thread are pending, then make every thread's
    // copies visible to the block. CPU: copies were synchronous; only the block barrier.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group ${N};\n" ::);
#endif
    WP_TILE_SYNC();
//! snippet copy_t template

    // Copy the ROWS x COLS region of `src` at (r0, c0), 4-byte elements, transposed into the shared tile `dst`:
    // element (r, c) to row d0 + c, column r (row stride DLD elements); elements outside src are written as zero.
    // Assumes: unit column stride of src. A region wholly inside src takes the fast path below where the tile
    // allows it; otherwise thread t takes elements t, t + block_dim, ... in src's row-major order. CUDA: one
    // cp.async.ca of 4 bytes each (source size 0 past the edges), completion through commit/wait snippets; the
    // CPU: synchronous.
    const int nr = src.shape[0];
    const int nc = src.shape[1];
    const char* base = (const char*)src.data;
    const size_t ld = (size_t)src.strides[0];
    char* sbase = (char*)dst.data.ptr + (size_t)d0 * (${DLD} * 4);
    if (${FAST} && r0 + ${ROWS} <= nr && c0 + ${COLS} <= nc) {
        // The whole region inside src: a warp copies blocks of 4 rows x 8 columns (lane: row lane % 4, column
        // lane / 4), so its 32 shared stores hit 32 different banks (DLD is 4 modulo 8: column c's 4 rows start
        // at bank 4 (c DLD / 4 mod 8)) and its loads read 4 rows of 32 bytes. Warp w starts at row ${RW}, column
        // ${CW}; then ${Q1} steps of ${RSTEP} rows x ${Q2} of ${CSTEP} columns (one address, constant offsets). (The CPU
        // runs it with several fibers per block, wp.config.enable_cpu_blocks, synchronously.)
        const int t = WP_TILE_THREAD_IDX;
        const int w = t / 32;
        const int r = ${RW} + (t % 32) % 4;
        const int c = ${CW} + (t % 32) / 4;
        const char* g = base + (size_t)(r0 + r) * ld + (size_t)(c0 + c) * 4;
        char* s = sbase + ((size_t)c * ${DLD} + r) * 4;
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
#endif
#pragma unroll
        for (int q1 = 0; q1 < ${Q1}; ++q1)
#pragma unroll
            for (int q2 = 0; q2 < ${Q2}; ++q2) {
                const size_t so = ((size_t)(q2 * ${CSTEP}) * ${DLD} + q1 * ${RSTEP}) * 4;
                const char* gq = g + (size_t)(q1 * ${RSTEP}) * ld + (size_t)(q2 * ${CSTEP}) * 4;
#if defined(__CUDA_ARCH__)
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(sa + (unsigned)so), "l"(gq));
#else
                memcpy(s + so, gq, 4);
#endif
            }
        return;
    }
    for (int e = WP_TILE_THREAD_IDX; e < ${ROWS} * ${COLS}; e += WP_TILE_BLOCK_DIM) {
        const int r = e / ${COLS};
        const int c = e - r * ${COLS};
        const bool ok = r0 + r < nr && c0 + c < nc;
        const char* g = ok ? base + (size_t)(r0 + r) * ld + (size_t)(c0 + c) * 4 : base;
        char* s = sbase + ((size_t)c * ${DLD} + r) * 4;
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 4 : 0));
#else
        for (int b = 0; b < 4; ++b) s[b] = ok ? g[b] : (char)0;
#endif
    }
//! snippet wait_proxy template

    // Wait until at most ${N} cp.async groups of this thread are pending, make its copies visible to the async
    // proxy (wgmma reads shared memory through it), then to the block. CPU: only the block barrier.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group ${N};\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
    WP_TILE_SYNC();
//! snippet copy_check template
//! --- the checked copy (tile_gemm_func) -----------------------------------------------------------------
//! Defined after the kernel factory so that the family's generated source (which quotes line numbers)
//! stays byte-identical.
//! The run-time alignment check of ``_copy_snippet(..., checked=True)`` (tile_gemm_func: users pass any
//! 2-D array): the chunk loop of _COPY runs only where every row start is a multiple of CH bytes (base
//! address and row stride), the column stride is one element and c0 starts a chunk; otherwise, and on
//! CUDA before sm_80 (no cp.async), the element copy of _COPY_ELEMENTS does the same copy synchronously.
    // Chunks only where each row start is CH-aligned, columns are contiguous and c0 starts a chunk
    // (checked once per call); else the element copy below. Before sm_80: always the element copy.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    const bool chunked = false;
#else
    const bool chunked = (size_t)base % ${CH} == 0 && (nr <= 1 || ld % ${CH} == 0) &&
                         (size_t)src.strides[1] == ${ITEM} && c0 % ${E} == 0;
#endif
    if (chunked)
//! snippet copy_elements template
    else {
        // One element per step with both strides, synchronous on every device; the same zero-fill.
        const size_t cs = (size_t)src.strides[1];
        for (int c = WP_TILE_THREAD_IDX; c < ${ELEMS}; c += WP_TILE_BLOCK_DIM) {
            const int r = c / ${COLS};
            const int cc = c - r * ${COLS};
            const int gr = r0 + r;
            const int gc = c0 + cc;
            ${UT}* s = (${UT}*)(sbase + ((size_t)r * ${DLD} + cc) * ${ITEM});
            const bool in = gr < nr && gc < nc;
            *s = in ? *(const ${UT}*)(base + (size_t)gr * ld + (size_t)gc * cs) : (${UT})0;
        }
    }
