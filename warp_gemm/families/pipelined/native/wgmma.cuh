//! Hopper warpgroup MMAs (wgmma.mma_async) from K-major core-matrix stages, sm_90a.
//! snippet wgmma_geometry template
//! --- 16-bit NT on sm_90a warpgroup MMAs (spec.wgmma; correct on an H100, ~200 TFLOP/s: not a default) -------------
//! mma.sync issues one 16x8x16 product per warp instruction; Hopper's wgmma.mma_async multiplies 64 x N x 16 per
//! warpgroup (4 warps) straight from shared memory, and is what cuBLAS's 690-760 TFLOP/s runs on. Warp 1.19 compiles
//! for sm_90a when wp.config.cuda_arch_suffix is "a" (the factory sets it while it loads such a module:
//! _load_arch_specific). The stages hold A (TM x TK) and B (TN x TK), both K-major (layouts N and T), as wgmma's
//! core matrices without swizzle (_core_offset: 8 rows x 16 bytes contiguous; along K 128 bytes apart (the
//! descriptor's LBO), along M/N TK / 8 core matrices apart (SBO)), written there by the same 16-byte cp.async copies.
//! Warpgroup g computes rows 64 g .. 64 g + 63 of the tile over all TN columns; each thread holds TN / 2 float32 sums
//! in the register tile's storage, in the order of wgmma's D fragment (_OWN_STORE). Per K step: the copies' wait,
//! fence.proxy.async (the copies are generic-proxy writes, wgmma reads through the async proxy), the block barrier,
//! then TK / 16 wgmma with one commit and a wait for all of them before the next barrier may let a stage be refilled.

        const int v = WP_TILE_THREAD_IDX * (${VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the ${VT} the tile needs
        const int l = v % 32;
        const int wr = 64 * (v / 128) + 16 * ((v % 128) / 32);  // the first of the 16 rows of this thread's warp
//! snippet wgmma template

    // acc += A x B over stage s of the shared buffers ba (A's ${TM} x ${TK} stage) and bb (B's ${TN} x ${TK}), both
    // K-major core matrices (LBO 128 bytes along K, SBO ${SBO} bytes along M / N). Warpgroup v / 128 multiplies its
    // 64 rows by all ${TN} columns, ${KS} wgmma.mma_async m64n${TN}k16 (${T}, float32 sums) per stage; thread v's
    // ${PER} sums are acc.data[4 i + c]: row wr + l / 4 + 8 (c / 2), column 8 i + 2 (l % 4) + c % 2. The shared matrix
    // descriptor: bits 0-13 start address / 16, 16-29 LBO / 16, 32-45 SBO / 16, swizzle bits 62-63 zero.
    auto desc = [](unsigned long long addr) -> unsigned long long {
        return ((addr & 0x3FFFFull) >> 4) | ((unsigned long long)(128 >> 4) << 16) |
               ((unsigned long long)(${SBO} >> 4) << 32);
    };
#if defined(__CUDA_ARCH__)
    const int q = 0;
${GEOM}    float* d = acc.data;
    const unsigned long long sa = (unsigned long long)__cvta_generic_to_shared(ba.data.ptr) +
                                  (unsigned long long)s * ${SA} + (unsigned long long)(64 * (v / 128) / 8) * ${SBO};
    const unsigned long long sb = (unsigned long long)__cvta_generic_to_shared(bb.data.ptr) +
                                  (unsigned long long)s * ${SB};
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < ${KS}; ++kk) {
        const unsigned long long da = desc(sa + 256 * kk);
        const unsigned long long db = desc(sb + 256 * kk);
        // scale-d p = 1: D = A B + D; scale-a, scale-b 1; no transposes (both K-major)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %${NS}, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n${TN}k16.f32.${T}.${T} "
                     "{${DREGS}}, %${NA}, %${NB}, p, 1, 1, 0, 0;\n}\n"
                     : ${DOUTS}
                     : "l"(da), "l"(db), "r"(1));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // the sums are written by the asynchronous wgmma: no access to them may move above its wait
#pragma unroll
    for (int i = 0; i < ${PER}; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
#else
    // The CPU runs the tile's threads one after another; each sum reads A and B through the descriptors' fields
    // (decoded from the same desc()) and the core-matrix layout, so the copies' placement and the descriptors are
    // checked against each other.
    const char* As = (const char*)ba.data.ptr + (size_t)s * ${SA};
    const char* Bs = (const char*)bb.data.ptr + (size_t)s * ${SB};
    auto at = [](const char* base, unsigned long long dsc, int r, int k) -> float {
        const size_t start = (size_t)(dsc & 0x3FFFull) << 4;
        const size_t lbo = (size_t)((dsc >> 16) & 0x3FFFull) << 4;
        const size_t sbo = (size_t)((dsc >> 32) & 0x3FFFull) << 4;
        return (float)*(const ${IT}*)(base + start + (size_t)(r / 8) * sbo + (size_t)(k / 8) * lbo +
                                      (size_t)(r % 8) * 16 + (size_t)(k % 8) * 2);
    };
    for (int q = 0; q < ${VT} / WP_TILE_BLOCK_DIM; ++q) {
${GEOM}        float* d = acc.data + q * ${PER};
        for (int kk = 0; kk < ${KS}; ++kk) {
            const unsigned long long da = desc((unsigned long long)(64 * (v / 128) / 8) * ${SBO} + 256 * kk);
            const unsigned long long db = desc((unsigned long long)(256 * kk));
            for (int o = 0; o < ${PER}; ++o) {
                const int row = wr % 64 + l / 4 + 8 * ((o % 4) / 2);  // in the warpgroup's 64 rows
                const int col = 8 * (o / 4) + 2 * (l % 4) + o % 2;
                float x = 0.0f;
                for (int k = 0; k < 16; ++k)
                    x += at(As, da, row, k) * at(Bs, db, col, k);
                d[o] += x;
            }
        }
    }
#endif
