//! Hopper GEMM body: TMA loads into 128-byte-swizzled stages, wgmma.mma_async, warp-specialised persistent blocks.
//! snippet gemm template
//! Assumes: an sm_90a build (wgmma, setmaxnreg; compiled with wp.config.cuda_arch_suffix = "a"); a block of
//! 128 * (1 + ${NC}) threads in one dimension (warpgroup 0 the producer, 1..${NC} the consumers) with
//! __launch_bounds__(block, 1); `buf` a shared tile of at least ${SMEM} bytes (stages aligned up to a
//! 1024-byte boundary here, then ${ST} stages of ${STAGE} bytes, then 2 x ${ST} mbarriers); `tma_a`, `tma_b`
//! device addresses of 64-byte-aligned CUtensorMaps (tma.py; dims innermost first), 128-byte swizzle: A (K, M, batch) box
//! (${BK}, ${BM}, 1); B (K, N, batch) box (${BK}, ${BN}, 1) (B stored (N, K): layout T, K-major) or (N, K, batch) box
//! (64, 64, 1) (B stored (K, N): layout N, N-major, 16-bit only); operands ${IN_T}: 16-bit, or float32 bits
//! multiplied as tf32 (the tensor core reads their upper 19 bits: truncation), K tiles of ${BK} (128 bytes); C and D (batch, M, N) views of the output type, any
//! strides (pairs of outputs are stored as one access where D's columns are contiguous and aligned).
//! Split-K: `splits` K ranges of `kt_per` K tiles each (every range non-empty: hopper.spec.k_ranges); with
//! splits > 1, D is the (splits * batch, M, N) float32 workspace, alpha 1 and the epilogue "scale".
//! The CPU branch is empty: the family never runs on the CPU (rules.applies refuses it).
//! Work-item fields: SCHED (declares `items`, `k_tiles`), TILE_OF (the item -> tile mapping), AFTER_SYNC (after
//! the barrier set-up), P_ITEM / C_ITEM (the producer's / a consumer's item t: tm, tn, kt0, kt1; ba, bb the A / B
//! batch coordinates), P_STAGE (the producer's copies of one K tile: tma_stage below with the item's A row and batch coordinates), C_DRAIN (after an item's K loop), D_OFFSET (bytes from D.data to
//! the item's row 0), M_END (rows stored): the dense_* snippets below, or the grouped family's hopper_grouped.cuh.
//! EMPTY_COUNT: arrivals per empty barrier phase (NC; clusters of two: 2 * NC, the consumers of both blocks);
//! CLUSTER_EXIT: after everything (clusters: cluster_sync; else empty).
#if defined(__CUDA_ARCH__)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "warp_gemm's hopper kernels need an sm_90a build (wp.config.cuda_arch_suffix = 'a' while the module loads)"
#endif
    // D[b] = alpha * A[b] @ op(B[b]) (+ beta * C[b]) for output tiles t0, t0 + grid, ... of ${BM} x ${BN}, taken
    // in grouped order (group_m tile rows per group, column by column inside a group: neighbouring blocks share
    // A rows and B columns in L2). Warpgroup 0 is the producer: its thread 0 streams the K tiles of every tile of
    // the block's sequence through ${ST} stages (full[s]: the stage's bytes arrived, one arrival plus the
    // transaction count; empty[s]: both consumers are done with it, ${NC} arrivals). Consumer warpgroup c
    // (1..${NC}) multiplies rows 64 ${WGM} (c - 1) .. 64 ${WGM} c - 1 of the tile by all ${BN} columns: ${WGM}
    // m64n${BN}k16 wgmma per k16 step, float32 sums in registers, one wgmma group kept in flight (a stage is
    // released once the group after it is issued and the group reading it is complete), then the epilogue
    // straight from the registers while the producer already loads the next tile's stages.
    // Split-K: work item t (t0, t0 + grid, ...) is K range t / (batch * tiles) of output tile t % (batch * tiles):
    // K tiles kt_per * range .. min(k_tiles, kt_per * (range + 1)) - 1, its sums stored into D's entry
    // range * batch + b (splits == 1: the whole K of each tile into entry b).
    // Measured (H200, fp16 in, float32 out, B = W.T, 4096^3 / 8192^3, cuBLAS 701 / 656 in the same process): the
    // warp-specialised pipeline with one block per tile runs 647 / 633 TFLOP/s against 530 / 553 for the feasibility
    // probe's design (every warpgroup waits on each stage, wgmma wait 0 and a block barrier per K step). The
    // persistent grid (624 / 625) and setmaxnreg (without: 637 / 641) measured no gain inside the 10% spread seen
    // between two processes for one kernel; both stay as the reference designs have them.
    // WGN 2 (split_n): both consumers multiply all BM rows, consumer c columns CBN c .. CBN (c + 1) - 1.
    constexpr int BM = ${BM}, BN = ${BN}, BK = ${BK}, ST = ${ST}, NC = ${NC}, WGM = ${WGM}, WGN = ${WGN};
    constexpr int CBN = ${CBN}, NR = CBN / 2;
    constexpr unsigned EPITCH = ${EPITCH};  // bytes per row of the staged store's buffer (STAGED)
    constexpr unsigned A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES;  // 128-byte rows of K
    const unsigned s_raw = (unsigned)__cvta_generic_to_shared(buf.data.ptr);
    const unsigned sbase = (s_raw + 1023u) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
    const unsigned full0 = sbase + ST * STAGE, empty0 = full0 + 8 * ST;
    const int tid = threadIdx.x;
    const int wg = tid / 128;
${SCHED}

${HELPERS}
${TILE_OF}

    if (tid == 0) {
        // The maps' fetch starts here, before the barrier set-up. A map's device buffer is written once, by the host
        // copy that finished before any launch naming it, and never reused (hopper/tma.py), so no tensormap-proxy
        // fence is needed: fp16 1000^3 (H100, L2 flushed before each call, kernel time) 11.1-11.2 us against
        // 11.7-11.8 with the acquire fence (fence.proxy.tensormap) at entry and 11.4-11.6 with it before the first copy.
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(tma_a) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(tma_b) : "memory");
        for (int s = 0; s < ST; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(full0 + 8 * s) : "memory");
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(empty0 + 8 * s), "r"(${EMPTY_COUNT}) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();${AFTER_SYNC}

    if (wg == 0) {
        // ---- producer ----
        ${PRODUCER_SETMAXNREG}
        if (tid == 0) {
            unsigned s = 0, ph = 0;
            for (int t = t0; t < items; t += grid) {
${P_ITEM}
                for (int kt = kt0; kt < kt1; ++kt) {
${P_STAGE}
                }
            }
        }
    } else {
        // ---- consumers ----
        ${CONSUMER_SETMAXNREG}
        const int c = wg - 1;
        const int lt = tid % 128, w = lt / 32, l = lt % 32;
        float d[WGM][NR];
#pragma unroll
        for (int h = 0; h < WGM; ++h)
#pragma unroll
            for (int i = 0; i < NR; ++i) d[h][i] = 0.0f;
        unsigned s = 0, ph = 0;
        for (int t = t0; t < items; t += grid) {
${C_ITEM}
            int prev = -1;
            for (int kt = kt0; kt < kt1; ++kt) {
${C_STAGE}
            }
${C_DRAIN}
            // the sums are written by the asynchronous wgmma: no read of them may move above its wait
#pragma unroll
            for (int h = 0; h < WGM; ++h)
#pragma unroll
                for (int i = 0; i < NR; ++i) asm volatile("" : "+f"(d[h][i]) :: "memory");

            // ---- epilogue: thread (w, l) holds, per m64 block h and j < CBN / 8, d[h][4 j + 2 e + q] at row
            // 16 w + l / 4 + 8 e, column 8 j + 2 (l % 4) + q of the block (wgmma's D fragment) ----
            char* dbase = (char*)D.data + ${D_OFFSET};
            const char* cbase = (const char*)C.data + (size_t)(c_nb == 1 ? 0 : b) * (size_t)C.strides[0];
            const size_t dcs = (size_t)D.strides[2], ccs = (size_t)C.strides[2];
            const bool pair = dcs == ${OUT_BYTES} &&
                ((((unsigned long long)(size_t)D.data) | (unsigned long long)D.strides[1] |
                  (unsigned long long)(batch * splits > 1 ? D.strides[0] : 0)) % (2 * ${OUT_BYTES})) == 0;
            // 16-bit outputs whose rows start on 16 bytes: each quad (the four threads of one row) trades its packed
            // column pairs so that every thread stores 8 columns in one 16-byte access (the quad's 64 bytes whole).
            // H200, 4096^3, cuBLAS in the same process: fp16 617 -> 666 TFLOP/s, bf16 666 -> 688 (4-byte stores before).
            const bool vec = ${VEC16} && dcs == 2 &&
                ((((unsigned long long)(size_t)dbase) | (unsigned long long)D.strides[1]) % 16) == 0;
            (void)vec;
            const int r0 = tm * BM + (WGN == 1 ? c * WGM * 64 : 0) + 16 * w + l / 4;
            const int cn0 = tn * BN + (WGN == 1 ? 0 : c * CBN);  // the consumer's first column
            const int c0 = cn0 + 2 * (l % 4);
#if ${STAGED}
            // Staged store (spec.staged_store): where D's rows start on 16 bytes and N is a multiple of 8, the warpgroup
            // writes its packed outputs into its own rows of the staging buffer (rows of EPITCH bytes after the
            // mbarriers; each stmatrix four 8 x 8 blocks of the wgmma fragment), then copies the rows out in 16-byte
            // stores, a warp two whole rows at a time. fp16 1000^3 (H100, kernel time): 11.1 us against 11.7 with one bulk
            // copy (cp.async.bulk) per row, whose copies took 2,200 of the epilogue's 3,200 cycles.
            if (vec && (N & 7) == 0) {
                const unsigned eb = empty0 + 8 * ST + (unsigned)c * (64u * WGM * EPITCH);
                const int rb = tm * BM + (WGN == 1 ? c * WGM * 64 : 0);  // the warpgroup's first row
#pragma unroll
                for (int h = 0; h < WGM; ++h) {
#pragma unroll
                    for (int jp = 0; jp < CBN / 16; ++jp) {
                        unsigned u[4];  // block m: rows 8 (m % 2) .. of the warp's 16, columns 8 (2 jp + m / 2) ..
#pragma unroll
                        for (int m = 0; m < 4; ++m) {
                            const int e = m & 1, j = 2 * jp + (m >> 1);
                            const int r = rb + 16 * w + l / 4 + 8 * e + 64 * h;
                            const char* crow = cbase + (size_t)r * (size_t)C.strides[1];
                            (void)crow;
                            const int col = c0 + 8 * j;
                            float v0 = alpha * d[h][4 * j + 2 * e];
                            float v1 = alpha * d[h][4 * j + 2 * e + 1];
                            const bool two = true;
                            (void)two;
                            if (r < ${M_END} && col < N) {
${AXPBY}
                            }
                            // cvt packs its first source into the upper half
                            asm("cvt.rn.${OUT_T}x2.f32 %0, %1, %2;" : "=r"(u[m]) : "f"(v1), "f"(v0));
                        }
                        // lane i gives the address of row i % 8 of block i / 8
                        const int row = 16 * w + (l & 7) + 8 * ((l >> 3) & 1) + 64 * h;
                        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                                     :: "r"(eb + (unsigned)row * EPITCH + (unsigned)(16 * (2 * jp + (l >> 4)))),
                                        "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]) : "memory");
                    }
                }
                asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");  // the warpgroup's rows complete
                const int cols = N - cn0 < CBN ? N - cn0 : CBN;
#pragma unroll
                for (int it = 0; it < WGM * CBN / 16; ++it) {  // 16-byte chunk ch of the warpgroup's row rr
                    const int i = lt + 128 * it, rr = i / (CBN / 8), ch = i % (CBN / 8);
                    if (rb + rr < ${M_END} && 8 * ch < cols) {
                        uint4 v;
                        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                                     : "r"(eb + (unsigned)rr * EPITCH + (unsigned)ch * 16u) : "memory");
                        *(uint4*)(dbase + (size_t)(rb + rr) * (size_t)D.strides[1] + (size_t)(cn0 + 8 * ch) * 2) = v;
                    }
                }
                asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");  // the rows are free for the next item
                continue;
            }
#endif
#pragma unroll
            for (int h = 0; h < WGM; ++h) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int r = r0 + 64 * h + 8 * e;
                    if (r >= ${M_END}) continue;
                    char* drow = dbase + (size_t)r * (size_t)D.strides[1];
                    const char* crow = cbase + (size_t)r * (size_t)C.strides[1];
                    (void)crow;
                    (void)ccs;
#pragma unroll
                    for (int i = 0; i < NR / 16; ++i) {  // 32-column chunks: 8-column groups 4 i .. 4 i + 3
#if ${VEC16}
                        if (vec && cn0 + 32 * i + 32 <= N) {
                            unsigned p0 = 0, p1 = 0, p2 = 0, p3 = 0;
#pragma unroll
                            for (int jj = 0; jj < 4; ++jj) {
                                const int j = 4 * i + jj;
                                const int col = c0 + 8 * j;
                                float v0 = alpha * d[h][4 * j + 2 * e];
                                float v1 = alpha * d[h][4 * j + 2 * e + 1];
                                const bool two = true;
                                (void)col;
                                (void)two;
${AXPBY}
                                unsigned u;  // cvt packs its first source into the upper half
                                asm("cvt.rn.${OUT_T}x2.f32 %0, %1, %2;" : "=r"(u) : "f"(v1), "f"(v0));
                                p0 = jj == 0 ? u : p0;
                                p1 = jj == 1 ? u : p1;
                                p2 = jj == 2 ? u : p2;
                                p3 = jj == 3 ? u : p3;
                            }
                            const unsigned q = (unsigned)l & 3u, qmask = 0xFu << ((unsigned)l & 28u);
${QUAD}
                            *(uint4*)(drow + (size_t)(cn0 + 32 * i + 8 * (int)q) * 2) = make_uint4(o0, o1, o2, o3);
                            continue;
                        }
#endif
#pragma unroll
                        for (int jj = 0; jj < 4; ++jj) {
                            const int j = 4 * i + jj;
                            const int col = c0 + 8 * j;
                            if (col >= N) continue;
                            float v0 = alpha * d[h][4 * j + 2 * e];
                            float v1 = alpha * d[h][4 * j + 2 * e + 1];
                            const bool two = col + 1 < N;
${AXPBY}
${STORE}
                        }
                    }
                }
            }
        }
    }${CLUSTER_EXIT}
#endif
//! snippet tma_stage template nonl
//! The producer's copies of K tile `kt` into stage s (thread 0 of warpgroup 0; the gemm template's names: wait,
//! full0, empty0, sbase, STAGE, A_BYTES, BK, BN, s, ph): wait until the consumers released the stage, expect its
//! bytes on full[s], TMA box of A (map ${MAP_A}: K tile kt, row ${A_ROW}, batch ${A_BATCH}) and the box(es) of B
//! (map ${MAP_B}: column ${B_COL}, batch ${B_BATCH}), then the next stage and phase.
                    wait(empty0 + 8 * s, ph ^ 1);  // a fresh barrier passes parity 1 at once
                    const unsigned fb = full0 + 8 * s, sa = sbase + s * STAGE, sb = sa + A_BYTES;
                    // the full box bytes count even where the box reaches past the tensor (zero-filled)
                    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                                 :: "r"(fb), "r"(STAGE) : "memory");
${TMA_A}
${TMA_B}
                    if (++s == ST) { s = 0; ph ^= 1; }
//! snippet wgmma_stage template nonl
//! A consumer warpgroup's products of K tile `kt` from stage s (the gemm template's names: wait, desc, full0, empty0,
//! sbase, STAGE, A_BYTES, WGM, d, s, ph, prev): wait for the stage's bytes, ${WGM} wgmma per 32-byte K step on the
//! warpgroup's A rows (${A_OFF} bytes into the stage's A) and B columns (${B_OFF} bytes into its B), the sums
//! accumulated where ${ACC} (else overwritten), then commit; once the group after a stage is issued and the one
//! reading it complete, the warpgroup's thread ${LEAD} releases that stage (${RELEASE}: release_cta, or for
//! clusters release_cluster); then the next stage and phase.
                wait(full0 + 8 * s, ph);
                const unsigned sa = sbase + s * STAGE + ${A_OFF};
                const unsigned sb = sbase + s * STAGE + A_BYTES + ${B_OFF};
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {  // four 32-byte K steps per 128-byte row (k16 16-bit, k8 tf32)
                    const unsigned long long db = desc(sb + ${B_STEP} * kk, ${B_LBO});
                    const int acc = ${ACC};
#pragma unroll
                    for (int h = 0; h < WGM; ++h) {
                        const unsigned long long da = desc(sa + 8192u * h + 32u * kk, 16);
                        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %${NS}, 0;\n"
                                     "wgmma.mma_async.sync.aligned.m64n${CBN}k${KI}.f32.${IN_T}.${IN_T} "
                                     "{${DREGS}}, %${NA}, %${NB}, p, 1, 1${TRANS};\n}\n"
                                     : ${DOUTS}
                                     : "l"(da), "l"(db), "r"(acc));
                    }
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                if (prev >= 0) {
                    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                    if (${LEAD}) ${RELEASE}
                }
                prev = (int)s;
                if (++s == ST) { s = 0; ph ^= 1; }
//! snippet quad_exchange nonl
//! The four threads of an output row (a quad: lanes l & 28 .. + 3, this one q = l & 3, shuffle mask qmask) trade
//! their packed column pairs p0 .. p3 (p_k: this thread's two columns of 8-column group k of a 32-column chunk): in
//! round s thread q sends its pair of group q ^ s and receives thread (q ^ s)'s pair of group q, so that o_k holds
//! the chunk's columns 8 q + 2 k and 8 q + 2 k + 1 (low half first): 8 consecutive columns for one 16-byte store.
                            unsigned o0 = 0, o1 = 0, o2 = 0, o3 = 0;
#pragma unroll
                            for (unsigned sr = 0; sr < 4; ++sr) {
                                const unsigned k = q ^ sr;
                                const unsigned pk = k == 0 ? p0 : k == 1 ? p1 : k == 2 ? p2 : p3;
                                const unsigned got = sr == 0 ? pk : __shfl_sync(qmask, pk, (int)(((unsigned)l & 28u) | k));
                                o0 = k == 0 ? got : o0;
                                o1 = k == 1 ? got : o1;
                                o2 = k == 2 ? got : o2;
                                o3 = k == 3 ? got : o3;
                            }
//! snippet helpers nonl
//! The K loops' two helpers: wait(bar, parity) spins until mbarrier `bar` has completed the phase of that parity;
//! desc(addr, lbo) is the wgmma shared-memory descriptor of a stage address (128-byte swizzle, bits 62-63 = 1):
//! start / 16 in bits 0-13, the leading byte offset / 16 in 16-29, the stride byte offset / 16 in 32-45. K-major
//! stages (A; B of layout T): rows of 128 bytes (64 K elements), 8-row groups 1024 bytes apart (SBO), LBO unused
//! (1); a k16 step starts 32 bytes on. N-major B (layout N): K rows of 128 bytes (64 columns), 8-row groups 1024
//! bytes apart (SBO), the next 64 columns 8192 bytes on (LBO); a k16 step starts 2048 bytes on.
    auto wait = [](unsigned bar, unsigned parity) {
        unsigned done;
        do {
            asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        } while (!done);
    };
    auto desc = [](unsigned addr, unsigned long long lbo) -> unsigned long long {
        return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((lbo >> 4) << 16) | (64ull << 32) | (1ull << 62);
    };
//! snippet dense_sched nonl
//! The dense kernel's work items (the gemm template's work-item fields; dense_* below): item t of `items` = (K
//! range sp, batch entry b, tile row tm, tile column tn), every item with at least one K tile.
    const int tiles_mn = tiles_m * tiles_n;
    const int total = batch * tiles_mn;
    const int items = total * splits;
    const int k_tiles = (K + BK - 1) / BK;
//! snippet dense_tile_of nonl
    // output tile t -> batch entry, tile row, tile column (grouped order, Triton tutorial 03's GROUP_SIZE_M)
    auto tile_of = [&](int t, int& b, int& tm, int& tn) {
        b = t / tiles_mn;
        const int r = t - b * tiles_mn;
        const int per = group_m * tiles_n;
        const int first = (r / per) * group_m;
        const int rows = tiles_m - first < group_m ? tiles_m - first : group_m;
        tm = first + (r % per) % rows;
        tn = (r % per) / rows;
    };
//! snippet dense_p_item nonl
                const int sp = t / total;
                int b, tm, tn;
                tile_of(t - sp * total, b, tm, tn);
                const int ba = a_nb == 1 ? 0 : b;
                const int bb = b_nb == 1 ? 0 : b;
                const int kt0 = sp * kt_per, kt1 = min(k_tiles, kt0 + kt_per);
//! snippet dense_c_item nonl
            const int sp = t / total;
            int b, tm, tn;
            tile_of(t - sp * total, b, tm, tn);
            const int kt0 = sp * kt_per, kt1 = min(k_tiles, kt0 + kt_per);
//! snippet dense_c_drain nonl
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (lt == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * prev) : "memory");
//! snippet axpby_f32 nonl
                        v0 += beta * *(const float*)(crow + (size_t)col * ccs);
                        if (two) v1 += beta * *(const float*)(crow + (size_t)(col + 1) * ccs);
//! snippet axpby_f16 nonl
                        {
                            float x;
                            asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(*(const unsigned short*)(crow + (size_t)col * ccs)));
                            v0 += beta * x;
                            if (two) {
                                asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(*(const unsigned short*)(crow + (size_t)(col + 1) * ccs)));
                                v1 += beta * x;
                            }
                        }
//! snippet axpby_bf16 nonl
                        v0 += beta * __uint_as_float((unsigned)*(const unsigned short*)(crow + (size_t)col * ccs) << 16);
                        if (two) v1 += beta * __uint_as_float((unsigned)*(const unsigned short*)(crow + (size_t)(col + 1) * ccs) << 16);
//! snippet store_f32 nonl
                        if (two && pair) {
                            *(float2*)(drow + (size_t)col * 4) = make_float2(v0, v1);
                        } else {
                            *(float*)(drow + (size_t)col * dcs) = v0;
                            if (two) *(float*)(drow + (size_t)(col + 1) * dcs) = v1;
                        }
//! snippet store_16 template nonl
                        if (two && pair) {
                            unsigned u;  // cvt packs its first source into the upper half
                            asm("cvt.rn.${OUT_T}x2.f32 %0, %1, %2;" : "=r"(u) : "f"(v1), "f"(v0));
                            *(unsigned*)(drow + (size_t)col * 2) = u;
                        } else {
                            unsigned short u0, u1;
                            asm("cvt.rn.${OUT_T}.f32 %0, %1;" : "=h"(u0) : "f"(v0));
                            *(unsigned short*)(drow + (size_t)col * dcs) = u0;
                            if (two) {
                                asm("cvt.rn.${OUT_T}.f32 %0, %1;" : "=h"(u1) : "f"(v1));
                                *(unsigned short*)(drow + (size_t)(col + 1) * dcs) = u1;
                            }
                        }
//! snippet release_cta nonl
//! A consumer's release of stage `prev` (wgmma_stage's RELEASE, after `if (lead) `): one arrival on this block's
//! empty[prev].
asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * prev) : "memory");
//! snippet release_cluster nonl
//! The clustered kernel's release of stage `prev` (cluster_sched's `release`), which holds K tile kt - 1: one arrival
//! on empty[prev] of each block of the cluster; a lone cluster (cluster_sched) releases only the stages its
//! producers wait on again (K tiles before kt1 - ST), so that no arrival reaches a block that may have left.
if (!lone || kt - 1 + ST < kt1) release(empty0 + 8 * prev);
//! snippet cluster_sched nonl
//! Clusters of two blocks (after dense_sched; the gemm template's names: t0, grid): the cluster of blocks 2 c and
//! 2 c + 1 walks the pair items c, c + grid / 2, ... (`t0` and `grid` become cluster counts; the grid is even);
//! `crank` is this block's rank in its cluster; `lone`: the cluster has at most one item. release(bar): one arrival
//! on the mbarrier at offset `bar` in each block of the cluster (mapa gives its shared::cluster address): both
//! blocks' producers write into each block's stages (the shared half by multicast), so each empty barrier counts
//! the consumers of both. The arrival keeps the default .release.cta semantics, as CUTLASS's ClusterBarrier::arrive: .release.cluster compiles to a
//! MEMBAR.ALL.GPU before it (sm_90a SASS), and with it every cluster kernel measured about half the speed of the
//! same tiles without a cluster (H100; fp16 4096^3 333 against 665 TFLOP/s).
    unsigned crank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(crank));
    t0 >>= 1;
    grid >>= 1;
    const bool lone = t0 + grid >= items;
    auto release = [](unsigned bar) {
#pragma unroll
        for (unsigned r = 0; r < 2u; ++r) {
            unsigned rb;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rb) : "r"(bar), "r"(r));
            asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(rb) : "memory");
        }
    };
//! snippet cluster_item template
//! After dense_p_item / dense_c_item: the pair item's tile of this block (tm, tn are the pair's coordinates on the
//! grid of pair rows (pair M) or pair columns (pair N)): tile row (or column) 2 p + crank.
                if (${PAIR_M}) tm = 2 * tm + (int)crank; else tn = 2 * tn + (int)crank;
//! snippet cluster_sync
//! Every thread of both blocks after the barrier set-up: the partner's barriers exist before any multicast copy or
//! remote arrival reaches them. Thread 0's fence.mbarrier_init.release.cluster publishes the inits, so the arrival
//! is relaxed (PTX ISA's pattern for mbarrier inits, as CUTLASS's sm90 kernels).

    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
//! snippet cluster_exit
//! The clustered kernel's end (CLUSTER_EXIT): no block leaves while its partner may still arrive on its barriers
//! (cluster_sync). A lone cluster skips it: every multicast copy into a block completes before that block's
//! consumers pass its full barriers, and its partner's arrivals are on stages its own producer waited for. fp16
//! 1000^3 on 64 x 128 tiles (H100, kernel time): 10.8-10.9 us against 11.2-11.3 with the barrier.

    if (!lone) {
        asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
        asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
    }
//! snippet cluster_c_drain nonl
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (lt == 0 && !lone) release(empty0 + 8 * prev);
//! snippet tma_stage_cluster template nonl
//! tma_stage for clusters of two (cluster_sched's crank): wait until the consumers of both blocks released stage s
//! (this block's empty[s] counts both), expect the whole stage's bytes on full[s], copy this block's unshared tile
//! alone and its half of the shared tile (${SHARE_B}: B, else A) with .multicast::cluster into the same stage of
//! both blocks (mask 0b11; each destination's full[s] at the same offset counts the bytes). Shared B: layout T
//! rows BN / 2 * crank .. of the tile (map ${MAP_B}, box of BN / 2 rows), layout N boxes BN / 128 * crank .. of
//! the BN / 64; shared A: rows BM / 2 * crank .. (map ${MAP_A}, box of BM / 2 rows).
                    wait(empty0 + 8 * s, ph ^ 1);
                    const unsigned fb = full0 + 8 * s, sa = sbase + s * STAGE, sb = sa + A_BYTES;
                    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                                 :: "r"(fb), "r"(STAGE) : "memory");
                    const unsigned short mask = 3;
#if ${SHARE_B}
${TMA_A}
#if ${B_MN}
#pragma unroll
                    for (int j = 0; j < BN / 128; ++j) {
                        const int jj = (int)crank * (BN / 128) + j;
                        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                     ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                                     :: "r"(sb + 8192u * jj), "l"(${MAP_B}), "r"(${B_COL} + 64 * jj), "r"(kt * BK),
                                        "r"(${B_BATCH}), "r"(fb), "h"(mask) : "memory");
                    }
#else
                    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                                 :: "r"(sb + crank * (BN / 2) * 128u), "l"(${MAP_B}), "r"(kt * BK),
                                    "r"(${B_COL} + (int)crank * (BN / 2)), "r"(${B_BATCH}), "r"(fb), "h"(mask)
                                 : "memory");
#endif
#else
                    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                                 :: "r"(sa + crank * (BM / 2) * 128u), "l"(${MAP_A}), "r"(kt * BK),
                                    "r"(${A_ROW} + (int)crank * (BM / 2)), "r"(${A_BATCH}), "r"(fb), "h"(mask)
                                 : "memory");
${TMA_B}
#endif
                    if (++s == ST) { s = 0; ph ^= 1; }
//! snippet tma_a template nonl
//! The TMA copy of A's box into the stage at sa (map ${MAP_A}: K tile kt, row ${A_ROW}, batch ${A_BATCH}), its bytes
//! counted on the barrier at fb: tma_stage's and, for the unshared A of a cluster, tma_stage_cluster's.
                    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                                 :: "r"(sa), "l"(${MAP_A}), "r"(kt * BK), "r"(${A_ROW}), "r"(${A_BATCH}), "r"(fb)
                                 : "memory");
//! snippet tma_b template nonl
//! The TMA copy of B's tile into the stage at sb (map ${MAP_B}: column ${B_COL}, batch ${B_BATCH}), its bytes counted
//! on the barrier at fb; B stored (K, N) (${B_MN}): BN / 64 boxes of 64 K rows x 64 columns (128 bytes), 8 KB apart.
#if ${B_MN}
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j)
                        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                     " [%0], [%1, {%2, %3, %4}], [%5];\n"
                                     :: "r"(sb + 8192u * j), "l"(${MAP_B}), "r"(${B_COL} + 64 * j), "r"(kt * BK),
                                        "r"(${B_BATCH}), "r"(fb) : "memory");
#else
                    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                                 :: "r"(sb), "l"(${MAP_B}), "r"(kt * BK), "r"(${B_COL}), "r"(${B_BATCH}), "r"(fb)
                                 : "memory");
#endif
