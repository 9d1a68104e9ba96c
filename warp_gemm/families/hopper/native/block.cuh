//! One output tile of the Hopper K loop (TMA + wgmma) inside a user's Warp kernel, its sums left in shared memory.
//! snippet block_gemm template
//! Assumes: the calling block has 128 * (1 + ${NC}) threads (warpgroup 0 the producer, 1..${NC} the consumers),
//! every thread of it calls this (block-collective: barriers); an sm_90a build on CUDA (wgmma; the module loads
//! with wp.config.cuda_arch_suffix = "a": FusedGemm.launch); `buf` the caller's shared float32 tile of ${ROWS} x
//! ${COLS} (row stride ${COLS} floats); `ta`, `tb` FusedGemm.operands' descriptors: on CUDA the device addresses of
//! 128-byte-swizzled CUtensorMaps (hopper/tma.py) of A (K, M, 1) box (64, ${BM}, 1) and B (K, N, 1) box (64, ${BN}, 1)
//! (B stored (N, K): layout T) or (N, K, 1) box (64, 64, 1) (B stored (K, N): layout N); on the CPU host addresses
//! of 5 int64 words each: data pointer, rows, columns, row stride and column stride in bytes.
#if defined(__CUDA_ARCH__)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "warp_gemm.fused_gemm needs an sm_90a build: launch the kernel with FusedGemm.launch (or FusedGemm.load first)"
#endif
    static_assert(WP_TILE_BLOCK_DIM == 128 * (1 + ${NC}), "fused_gemm: launch with block_dim 128 * (1 + ${NC})");
    // acc[r, c] = sum_k A[row + r, k] * B[k, col + c] for the ${BM} x ${BN} tile at (row, col), float32, into rows
    // 0 .. ${BM} - 1 of buf (columns 0 .. ${BN} - 1); TMA reads zeros past M, N and K, so the sums past the matrix
    // are zeros. The K loop is the Hopper family's (native/gemm.cuh) for one tile: thread 0 of the producer
    // warpgroup streams the K tiles through ${ST} stages (full[s] / empty[s] mbarriers), consumer warpgroup c
    // multiplies rows 64 ${WGM} (c - 1) .. of the tile with ${WGM} m64n${BN}k16 wgmma per k16 step, one wgmma group in
    // flight. The stages and barriers live in buf from its first 1024-byte boundary on; once every stage is
    // consumed (a block barrier), each consumer writes its register sums over them as float2 pairs (row stride
    // ${COLS}: eight rows of a warp's store fall 32 bytes apart in the banks), then a second block barrier, after
    // which the caller's Warp code reads the tile.
    constexpr int BM = ${BM}, BN = ${BN}, BK = 64, ST = ${ST}, NC = ${NC}, WGM = ${WGM}, NR = BN / 2;
    constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE = A_BYTES + B_BYTES;
    const unsigned s_raw = (unsigned)__cvta_generic_to_shared(buf.data.ptr);
    const unsigned sbase = (s_raw + 1023u) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
    const unsigned full0 = sbase + ST * STAGE, empty0 = full0 + 8 * ST;
    const int tid = WP_TILE_THREAD_IDX;
    const int wg = tid / 128;
    const int k_tiles = (K + BK - 1) / BK;

${HELPERS}

    __syncthreads();  // every earlier reader of buf (a previous call's epilogue) is done
    if (tid == 0) {
        for (int s = 0; s < ST; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(full0 + 8 * s) : "memory");
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(empty0 + 8 * s), "r"(NC) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    float d[WGM][NR];
    if (wg == 0) {
        if (tid == 0) {
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" :: "l"(ta) : "memory");
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" :: "l"(tb) : "memory");
            unsigned s = 0, ph = 0;
            for (int kt = 0; kt < k_tiles; ++kt) {
${P_STAGE}
            }
        }
    } else {
        const int c = wg - 1;
#pragma unroll
        for (int h = 0; h < WGM; ++h)
#pragma unroll
            for (int i = 0; i < NR; ++i) d[h][i] = 0.0f;
        unsigned s = 0, ph = 0;
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt) {
${C_STAGE}
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int h = 0; h < WGM; ++h)
#pragma unroll
            for (int i = 0; i < NR; ++i) asm volatile("" : "+f"(d[h][i]) :: "memory");
    }
    __syncthreads();  // every stage consumed: the sums may overwrite them
    if (wg > 0) {
        // thread (w, l) of consumer c holds, per m64 block h and j < BN / 8, d[h][4 j + 2 e + q] at row
        // 64 (WGM (c - 1) + h) + 16 w + l / 4 + 8 e, column 8 j + 2 (l % 4) + q (wgmma's D fragment)
        const int c = wg - 1, lt = tid % 128, w = lt / 32, l = lt % 32;
        float* out = (float*)buf.data.ptr;
#pragma unroll
        for (int h = 0; h < WGM; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float* r = out + (size_t)(64 * (WGM * c + h) + 16 * w + l / 4 + 8 * e) * ${COLS} + 2 * (l % 4);
#pragma unroll
                for (int j = 0; j < NR / 4; ++j)
                    *(float2*)(r + 8 * j) = make_float2(d[h][4 * j + 2 * e], d[h][4 * j + 2 * e + 1]);
            }
    }
    __syncthreads();
#else
    // The CPU twin: the same tile from the descriptors' arrays, element by element (zeros past the arrays' extents),
    // the block's threads taking outputs in turn; sums in float32 over k in order.
${TWIN}
    float* out = (float*)buf.data.ptr;
    WP_TILE_SYNC();
    for (int x = WP_TILE_THREAD_IDX; x < ${BM} * ${BN}; x += WP_TILE_BLOCK_DIM)
        out[(size_t)(x / ${BN}) * ${COLS} + x % ${BN}] = twin_dot(row + x / ${BN}, col + x % ${BN});
    WP_TILE_SYNC();
#endif
//! snippet tile_frag template
//! The persistent form: the sums of output tiles handed to the caller in the consumer threads' registers.
//! Assumes: as block_gemm (128 * (1 + ${NC}) threads, sm_90a, `buf` of ${ROWS} x ${COLS} float32, `ta`, `tb`);
//! the caller's kernel runs `for t in range(block, items, G)` on a grid of G blocks (block = its 1-D tile index,
//! items = ceil(ceil(M / ${BM}) * ceil(N / ${BN}) / ${TW})), every thread of the block calling this once per t,
//! nothing else in the kernel calling it, and no block barrier (tile operation) inside that loop.
#if defined(__CUDA_ARCH__)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "warp_gemm.fused_gemm needs an sm_90a build: launch the kernel with FusedGemm.launch_tiles (or FusedGemm.load first)"
#endif
    static_assert(WP_TILE_BLOCK_DIM == 128 * (1 + ${NC}), "fused_gemm: launch with block_dim 128 * (1 + ${NC})");
    // Work item t is output tiles ${TW} t .. ${TW} t + ${TW} - 1 (grouped order: ${GM} tile rows per group, as the
    // Hopper family's kernel). Returns this thread's ${FR} float32 sums (tile_origin, tile_coord: each one's row and
    // column); the producer warpgroup's threads, and consumers without a tile, return zeros. The block's first call
    // (t < G) initialises the ${ST} stages' mbarriers in buf (one block barrier), and there thread 0 of warpgroup 0
    // streams the K tiles of all the block's tiles (items t, t + G, ...) through the stages and returns once it
    // has issued the last: it runs ahead while the consumers run the caller's code between calls.
    // PP = 1 (ping-pong): consumer warpgroup c (0-based) takes the whole tile ${TW} t + c, ${WGM} m64n${BN}k16 wgmma
    // per k16 step; the stages of its tile follow the other consumer's in the ring, so one warpgroup multiplies
    // while the other runs the caller's epilogue. PP = 0: both consumers share tile t, warpgroup c taking rows
    // 64 ${WGM} c ..; a stage is released by each consumer that read it (empty barrier count ${NE}). Either way one
    // wgmma group stays in flight, and the stage and phase of a call follow from the K tiles consumed before.
    constexpr int BM = ${BM}, BN = ${BN}, BK = 64, ST = ${ST}, NC = ${NC}, WGM = ${WGM}, NR = BN / 2, GM = ${GM};
    constexpr int PP = ${PP}, TW = ${TW};
    constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE = A_BYTES + B_BYTES;
    const unsigned s_raw = (unsigned)__cvta_generic_to_shared(buf.data.ptr);
    const unsigned sbase = (s_raw + 1023u) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
    const unsigned full0 = sbase + ST * STAGE, empty0 = full0 + 8 * ST;
    const unsigned ord0 = empty0 + 8 * ST;  // ping-pong: ord0 + 8 c completes a phase per tile consumer c has waited for
    const int tid = WP_TILE_THREAD_IDX;
    const int wg = tid / 128;
    const int k_tiles = (K + BK - 1) / BK;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
    auto tile_of = [&](int u, int& tm, int& tn) {
        const int per = GM * tiles_n;
        const int first = (u / per) * GM;
        const int rows = tiles_m - first < GM ? tiles_m - first : GM;
        tm = first + (u % per) % rows;
        tn = (u % per) / rows;
    };
${HELPERS}

    wp::vec_t<${FR}, wp::float32> out;
    if (t < G) {
        if (tid == 0) {
            for (int s = 0; s < ST; ++s) {
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(full0 + 8 * s) : "memory");
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(empty0 + 8 * s), "r"(${NE}) : "memory");
            }
            for (int x = 0; x < 2; ++x)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(ord0 + 8 * x) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        __syncthreads();
    }
    const int c = wg - 1;
    const int u = PP ? t * TW + c : t;  // this consumer's tile
    if (wg == 0 || u >= tiles) {
        if (tid == 0 && t < G) {
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" :: "l"(ta) : "memory");
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" :: "l"(tb) : "memory");
            unsigned s = 0, ph = 0;
            for (int v = t * TW; v < tiles; v += G * TW) {
                for (int x = v; x < v + TW && x < tiles; ++x) {
                    int tm, tn;
                    tile_of(x, tm, tn);
                    const int row = tm * BM, col = tn * BN;
                    for (int kt = 0; kt < k_tiles; ++kt) {
${P_STAGE}
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < ${FR}; ++i) out.c[i] = 0.0f;
    } else {
        float d[WGM][NR];
        // K tiles the block consumed before this tile (ping-pong: the tiles before it in the block's sequence)
        const int m = t / G;
        const long long done = (long long)(PP ? m * TW + c : m) * k_tiles;
        if (PP) {
            // A parity wait tells only the last two phases of a barrier apart: consumer 1 may wait on its tile's
            // first stage only once consumer 0 has seen every stage of tile m land (and consumer 0 on its tile
            // m > 0 once consumer 1 has seen tile m - 1's), else a stage's earlier fill would pass its wait. This
            // also orders the two multiplications: one warpgroup's runs while the other's epilogue does.
            if (c == 1)
                wait(ord0, (unsigned)(m & 1));
            else if (m > 0)
                wait(ord0 + 8, (unsigned)((m - 1) & 1));
        }
        unsigned s = (unsigned)(done % ST), ph = (unsigned)((done / ST) & 1);
        const unsigned arow = PP ? 0u : (unsigned)(c * WGM) * 8192u;  // this consumer's first m64 block of A
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt) {
${C_STAGE}
        }
        if (PP && tid % 128 == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(ord0 + 8 * c) : "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (tid % 128 == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * prev) : "memory");
        // the sums are written by the asynchronous wgmma: no read of them may move above its wait
#pragma unroll
        for (int h = 0; h < WGM; ++h)
#pragma unroll
            for (int i = 0; i < NR; ++i) {
                asm volatile("" : "+f"(d[h][i]) :: "memory");
                out.c[h * NR + i] = d[h][i];
            }
    }
    return out;
#else
    // The CPU twin: each consumer thread's sums of its fragment (tile_origin's, tile_coord's rows and columns) from the
    // descriptors' arrays, element by element (zeros past the arrays' extents), float32 over k in order; the
    // producer's threads return zeros. Needs ${NC} + 1 warpgroups of CPU fibers (wp.config.enable_cpu_blocks:
    // FusedGemm.launch_tiles sets it for the launch).
    static_assert(WP_TILE_BLOCK_DIM == 128 * (1 + ${NC}),
                  "fused_gemm: tile_frag needs 128 * (1 + ${NC}) threads per block (on the CPU: launch with "
                  "FusedGemm.launch_tiles, which runs CPU fibers)");
    (void)buf;
    (void)G;
${TWIN}
${RC}
    const wp::vec_t<2, int> o = frag_origin(M, N, t);
    wp::vec_t<${FR}, wp::float32> out;
    for (int i = 0; i < ${FR}; ++i) {
        const wp::vec_t<2, int> rc = frag_coord(o, i);
        out.c[i] = rc.c[0] < M ? twin_dot(rc.c[0], rc.c[1]) : 0.0f;
    }
    return out;
#endif
//! snippet tile_origin template
//! (row, col) in the product of fragment entry 0 of this thread at output tile t (tile_frag's layout): entry i lies
//! at tile_coord(origin, i); row is 2^30 (>= M) for the producer warpgroup's threads, which hold no sums. Same
//! code on CUDA and the CPU.
${RC}
    return frag_origin(M, N, t);
//! snippet tile_coord template
//! (row, col) of fragment entry i from tile_origin's (row, col) of entry 0: constant offsets once i is (an unrolled
//! loop's index), so a loop over the entries computes the tile's position once (tile_origin), not per entry.
${RC}
    return frag_coord(o, i);
//! snippet frag_rc template
    // consumer thread (w, l) of warpgroup c (0-based) holds, per m64 block h and j < BN / 8, entry
    // h NR + 4 j + 2 e + q at row 64 h + 16 w + l / 4 + 8 e (PP = 0: plus 64 WGM c), column 8 j + 2 (l % 4) + q of
    // its tile (wgmma's D fragment); tiles in grouped order (${GM} tile rows per group)
    auto frag_origin = [](int M, int N, int t) -> wp::vec_t<2, int> {
        constexpr int BM = ${BM}, BN = ${BN}, WGM = ${WGM}, GM = ${GM}, PP = ${PP}, TW = ${TW};
        const int tid = WP_TILE_THREAD_IDX;
        const int wg = tid / 128, c = wg - 1;
        const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
        const int u = PP ? t * TW + c : t;  // the consumer's tile
        wp::vec_t<2, int> rc;
        if (wg == 0 || u >= tiles_m * tiles_n) {
            rc.c[0] = 1 << 30;
            rc.c[1] = 0;
            return rc;
        }
        const int per = GM * tiles_n;
        const int first = (u / per) * GM;
        const int rows = tiles_m - first < GM ? tiles_m - first : GM;
        const int tm = first + (u % per) % rows, tn = (u % per) / rows;
        const int lt = tid % 128, w = lt / 32, l = lt % 32;
        rc.c[0] = tm * BM + (PP ? 0 : 64 * WGM * c) + 16 * w + l / 4;
        rc.c[1] = tn * BN + 2 * (l % 4);
        return rc;
    };
    auto frag_coord = [](const wp::vec_t<2, int>& o, int i) -> wp::vec_t<2, int> {
        constexpr int NR = ${BN} / 2;
        wp::vec_t<2, int> rc;
        rc.c[0] = o.c[0] + 64 * (i / NR) + 8 * ((i / 2) % 2);
        rc.c[1] = o.c[1] + 8 * ((i % NR) / 4) + i % 2;
        return rc;
    };
//! snippet twin_dot template
    // The CPU twins' product: twin_dot(r, c) is the float32 sum over k, in order, of A[r, k] * op(B)[k, c] read
    // from the descriptors' arrays (pointer, extents, byte strides), zeros past the arrays' extents.
    const long long* da = (const long long*)ta;
    const long long* db = (const long long*)tb;
    const char* pa = (const char*)da[0];
    const char* pb = (const char*)db[0];
    const int am = (int)da[1], ak = (int)da[2];
    const int br = (int)db[1], bc = (int)db[2];
    auto twin_dot = [&](int r, int cc) -> float {
        float s = 0.0f;
        for (int k = 0; k < K; ++k) {
            if (r >= am || k >= ak)
                continue;
#if ${B_MN}
            if (k >= br || cc >= bc)
                continue;
            const char* b = pb + (size_t)k * db[3] + (size_t)cc * db[4];
#else
            if (cc >= br || k >= bc)
                continue;
            const char* b = pb + (size_t)cc * db[3] + (size_t)k * db[4];
#endif
            const float av = (float)*(const ${IT}*)(pa + (size_t)r * da[3] + (size_t)k * da[4]);
            s += av * (float)*(const ${IT}*)b;
        }
        return s;
    };
//! snippet store_frag template
//! A consumer thread's ${FR} tile_frag entries (float32, wgmma's fragment order) stored into Y as ${OT}.
//! Assumes: `v` holds entries in tile_frag's order (any values: tile_frag's sums or the caller's function of them),
//! `o` is tile_origin's (row, col) for this thread and work item; Y a 2-D array of ${OT}, any strides; every thread
//! of the block calls it with its own `v`, `o` (threads whose row is past Y store nothing: the producer's, 2^30).
//! Entries on rows >= Y.shape[0] or columns >= Y.shape[1] are not stored.
#if defined(__CUDA_ARCH__)
    // Entry h NR + 4 j + 2 e + q lies at row o[0] + 64 h + 8 e, column o[1] + 8 j + q (frag_rc). The four threads of
    // a quad (lanes 4 k .. 4 k + 3: one row) hold columns 8 j .. 8 j + 7 of the tile as four pairs: per 32-column
    // chunk they exchange their packed pairs with three __shfl_sync exchanges so that each holds 8 consecutive columns
    // (a 16-byte piece), then store 16 bytes. ncu (H100, fp16 silu 4096^3, element stores of the persistent kernel):
    // 8 of each 32-byte sector's bytes used; the 16-byte stores use all 32.
    // Rows whose start is not 16-byte aligned (contiguous columns; e.g. fp16 rows of 4095: 8190 bytes) are shifted
    // by the row's misalignment m halves: thread q of the quad stores the aligned 16-byte segment that starts m halves
    // before its own piece, those m halves the end of the piece before (the previous thread's, for thread 0 thread
    // 3's of the previous chunk: four more __shfl_sync), so the row still goes out as whole aligned 16-byte stores;
    // the row's first and last partial segments, and segments past the matrix's right edge, as 2-byte stores.
    // Strided columns: 2-byte stores.
    constexpr int NR = ${BN} / 2, WGM = ${FR} / NR;
    const int r0 = o.c[0], c0 = o.c[1];
    const int M = Y.shape.dims[0], N = Y.shape.dims[1];
    if (r0 >= M) return;
    const int l = WP_TILE_THREAD_IDX % 32;
    const unsigned q = (unsigned)l & 3u, qmask = 0xFu << ((unsigned)l & 28u);
    const int prev_lane = (l & 28) | (int)((q + 3u) & 3u);  // the thread whose piece precedes this one's in the row
    const int tc = c0 - 2 * (int)q;  // the tile's first column
    char* base = (char*)Y.data;
    const long long rs = (long long)Y.strides[0], cs = (long long)Y.strides[1];
    const bool contig = cs == 2;
    const bool vec = contig && ((((unsigned long long)(size_t)base) | (unsigned long long)rs) % 16ull) == 0;
    const bool shift = contig && !vec;  // contiguous rows, some of them off the 16-byte grid
    // every pair converted and packed first: ${FR} / 2 registers instead of ${FR} for what the stores still need
    unsigned pk[${FR} / 2];
#pragma unroll
    for (int x = 0; x < ${FR} / 2; ++x)  // cvt packs its first source into the upper half
        asm("cvt.rn.${OUT_T}x2.f32 %0, %1, %2;" : "=r"(pk[x]) : "f"(v.c[2 * x + 1]), "f"(v.c[2 * x]));
    // one copy of the loops per case (uniform branch): the shifted stores' extra registers stay out of the other
    if (shift) {
#pragma unroll
        for (int h = 0; h < WGM; ++h) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int r = r0 + 64 * h + 8 * e;
                if (r >= M) continue;  // the same row for the whole quad
                char* drow = base + (long long)r * rs;
                // halves from the 16-byte boundary at or below column tc's address to it: the shift of the segments
                const int m = (int)((((unsigned long long)(size_t)drow) + 2ull * (unsigned)tc) & 15ull) / 2;
                // the segment's words from the 32 bytes (previous piece, own piece): words b .. b + 4, shifted sb bits
                const int b = (16 - 2 * m) >> 2, sb = 8 * ((16 - 2 * m) & 3);
                unsigned v0 = 0, v1 = 0, v2 = 0, v3 = 0;  // this thread's piece of the previous chunk
                int last = -1;                            // its first column
#pragma unroll
                for (int i = 0; i < NR / 16; ++i) {  // 32-column chunks: 8-column groups 4 i .. 4 i + 3
                    if (tc + 32 * i >= N) continue;  // the same for the whole quad
                    const int x = (h * NR + 16 * i + 2 * e) / 2;  // pair of entry h NR + 4 (4 i + jj) + 2 e: x + 2 jj
                    const unsigned p0 = pk[x], p1 = pk[x + 2], p2 = pk[x + 4], p3 = pk[x + 6];
                    // afterwards o_k holds columns cb + 2 k (low half), cb + 2 k + 1 (high half)
${QUAD}
                    const int cb = tc + 32 * i + 8 * (int)q;  // this thread's 8 columns
                    // the piece before this one in the row: thread 3 sends its previous chunk's, the others this one's
                    const unsigned g0 = __shfl_sync(qmask, q == 3u ? v0 : o0, prev_lane);
                    const unsigned g1 = __shfl_sync(qmask, q == 3u ? v1 : o1, prev_lane);
                    const unsigned g2 = __shfl_sync(qmask, q == 3u ? v2 : o2, prev_lane);
                    const unsigned g3 = __shfl_sync(qmask, q == 3u ? v3 : o3, prev_lane);
                    v0 = o0;
                    v1 = o1;
                    v2 = o2;
                    v3 = o3;
                    last = cb;
                    unsigned sw[5];  // words b .. b + 4 of (g0 .. g3, o0 .. o3, 0)
#pragma unroll
                    for (int n = 0; n < 5; ++n) {
                        const unsigned a0 = n == 0 ? g0 : n == 1 ? g1 : n == 2 ? g2 : n == 3 ? g3 : o0;
                        const unsigned a1 = n == 0 ? g1 : n == 1 ? g2 : n == 2 ? g3 : n == 3 ? o0 : o1;
                        const unsigned a2 = n == 0 ? g2 : n == 1 ? g3 : n == 2 ? o0 : n == 3 ? o1 : o2;
                        const unsigned a3 = n == 0 ? g3 : n == 1 ? o0 : n == 2 ? o1 : n == 3 ? o2 : o3;
                        const unsigned a4 = n == 0 ? o0 : n == 1 ? o1 : n == 2 ? o2 : n == 3 ? o3 : 0u;
                        sw[n] = b == 0 ? a0 : b == 1 ? a1 : b == 2 ? a2 : b == 3 ? a3 : a4;
                    }
                    const unsigned w0 = __funnelshift_r(sw[0], sw[1], sb), w1 = __funnelshift_r(sw[1], sw[2], sb);
                    const unsigned w2 = __funnelshift_r(sw[2], sw[3], sb), w3 = __funnelshift_r(sw[3], sw[4], sb);
                    const int sc = cb - m;  // the segment's first column (16-byte aligned address)
                    if (sc >= tc && sc + 8 <= N) {
                        *(uint4*)(drow + 2ll * sc) = make_uint4(w0, w1, w2, w3);
                    } else {  // the row's first segment (its start before the tile) or past the right edge
#pragma unroll
                        for (int k = 0; k < 8; ++k) {
                            const unsigned w = k / 2 == 0 ? w0 : k / 2 == 1 ? w1 : k / 2 == 2 ? w2 : w3;
                            if (sc + k >= tc && sc + k < N)
                                *(unsigned short*)(drow + 2ll * (sc + k)) = (unsigned short)(k % 2 ? w >> 16 : w);
                        }
                    }
                }
                // the row's last m halves: the end of thread 3's last piece
                if (q == 3u && last >= 0 && m > 0) {
#pragma unroll
                    for (int k = 1; k < 8; ++k) {
                        const unsigned w = k / 2 == 0 ? v0 : k / 2 == 1 ? v1 : k / 2 == 2 ? v2 : v3;
                        if (k >= 8 - m && last + k < N)
                            *(unsigned short*)(drow + 2ll * (last + k)) = (unsigned short)(k % 2 ? w >> 16 : w);
                    }
                }
            }
        }
        return;
    }
#pragma unroll
    for (int h = 0; h < WGM; ++h) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int r = r0 + 64 * h + 8 * e;
            if (r >= M) continue;  // the same row for the whole quad
            char* drow = base + (long long)r * rs;
#pragma unroll
            for (int i = 0; i < NR / 16; ++i) {  // 32-column chunks: 8-column groups 4 i .. 4 i + 3
                if (tc + 32 * i >= N) continue;  // the same for the whole quad
                const int x = (h * NR + 16 * i + 2 * e) / 2;  // pair of entry h NR + 4 (4 i + jj) + 2 e: x + 2 jj
                const unsigned p0 = pk[x], p1 = pk[x + 2], p2 = pk[x + 4], p3 = pk[x + 6];
                // afterwards o_k holds columns cb + 2 k (low half), cb + 2 k + 1 (high half)
${QUAD}
                const int cb = tc + 32 * i + 8 * (int)q;  // this thread's 8 columns
                if (vec && cb + 8 <= N) {
                    *(uint4*)(drow + 2ll * cb) = make_uint4(o0, o1, o2, o3);
                    continue;
                }
                {  // strided columns, or the right edge of aligned rows: 2-byte stores inside Y
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        const unsigned w = k / 2 == 0 ? o0 : k / 2 == 1 ? o1 : k / 2 == 2 ? o2 : o3;
                        if (cb + k < N)
                            *(unsigned short*)(drow + (long long)(cb + k) * cs) = (unsigned short)(k % 2 ? w >> 16 : w);
                    }
                }
            }
        }
    }
#else
    // The CPU twin: entry by entry at tile_coord's (row, col), converted to ${OT} (to nearest, ties to even).
${RC}
    const int M = Y.shape.dims[0], N = Y.shape.dims[1];
    for (int i = 0; i < ${FR}; ++i) {
        const wp::vec_t<2, int> rc = frag_coord(o, i);
        if (rc.c[0] < M && rc.c[1] < N)
            *(${OT}*)((char*)Y.data + (size_t)rc.c[0] * Y.strides[0] + (size_t)rc.c[1] * Y.strides[1]) = ${OT}(v.c[i]);
    }
#endif
