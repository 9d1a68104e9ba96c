//! The grouped Hopper kernel's work items: the work-item fields of the Hopper family's gemm template
//! (families/hopper/native/gemm.cuh), for a 2-D A (M rows of K) whose rows are split into G groups by `offs` and a
//! 3-D B (G, K, N) or (G, N, K) whose batch entry g is group g's matrix.
//! snippet grouped_sched nonl
//! Assumes: the kernel's stub has `offs` (int32 array of G group ends), `G` (1..hopper.MAX_GROUPS), `M` (A's and D's
//! rows), `K`, `tiles_n`, `group_m`, `alpha`; `buf` holds, after the stages and their mbarriers, 2 G + 3 ints; A's
//! map covers all M rows (batch 1), B's map has batch G; D is the (1, M, N) result.
    // the group table in shared memory, after the mbarriers: pre[g] the first tile row of group g (pre[G]: the tile
    // rows of all groups), beg[g] its first row (beg[G] = offs[G - 1]: the rows after it get zeros); bad: offs
    // decrease, are negative or pass M
    int* const pre = (int*)((char*)buf.data.ptr + (empty0 + 8 * ST - s_raw));
    int* const beg = pre + (G + 1);
    int* const bad = beg + (G + 1);
    const int k_tiles = (K + BK - 1) / BK;
//! snippet grouped_tile_of nonl
//! Warp 0 fills the group table from `offs` (every block reads offs itself: no host read, no other launch); the
//! block barrier after the mbarrier set-up publishes it.
    if (tid < 32) {
        // each lane takes a run of consecutive groups, a warp scan adds up their tile rows
        const int run = (G + 31) / 32;
        const int g0 = tid * run < G ? tid * run : G, g1 = g0 + run < G ? g0 + run : G;
        auto end_of = [&](int g) -> int {
            return *(const int*)((const char*)offs.data + (size_t)g * (size_t)offs.strides[0]);
        };
        int wrong = 0, sum = 0;
        int s = g0 == 0 ? 0 : end_of(g0 - 1);
        for (int g = g0; g < g1; ++g) {
            const int e = end_of(g);
            wrong |= (s < 0) | (e < s) | (e > M);
            beg[g] = s;
            pre[g] = (int)(((long long)e - s + BM - 1) / BM);  // this group's tile rows, for now
            sum += pre[g];
            s = e;
        }
        int inc = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, inc, o);
            if (tid >= o) inc += v;
        }
        int first = inc - sum;
        for (int g = g0; g < g1; ++g) {
            const int r = pre[g];
            pre[g] = first;
            first += r;
        }
        wrong = __any_sync(0xffffffffu, wrong);
        if (tid == 31) {
            pre[G] = inc;
            beg[G] = end_of(G - 1);
            bad[0] = wrong;
        }
        __syncwarp();
        if (wrong) {
            // one group over all M rows, scaled by NaN (grouped_after_sync): the whole result is NaN
            for (int g = tid; g <= G; g += 32) {
                pre[g] = g == 0 ? 0 : (M + BM - 1) / BM;
                beg[g] = g == 0 ? 0 : M;
            }
        }
    }
    // work item t -> group g (the last one whose first tile row is <= t / tiles_n: empty groups own no tile row),
    // the group's tile row tm and tile column tn (grouped order inside the group, as the dense kernel's tile_of),
    // its first row row0 and rows mg. Consecutive items share B's tile columns of one group (in L2).
    auto item_of = [&](int t, int& g, int& tm, int& tn, int& row0, int& mg) {
        const int u = t / tiles_n;
        int lo = 0, hi = G - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (pre[mid] <= u)
                lo = mid;
            else
                hi = mid - 1;
        }
        g = lo;
        row0 = beg[g];
        mg = beg[g + 1] - row0;
        const int rows = pre[g + 1] - pre[g];
        const int r = t - pre[g] * tiles_n;
        const int per = group_m * tiles_n;
        const int first = (r / per) * group_m;
        const int rr = rows - first < group_m ? rows - first : group_m;
        tm = first + (r % per) % rr;
        tn = (r % per) / rr;
    };
//! snippet grouped_after_sync template
//! Placed right after the block barrier that follows the mbarrier set-up (the group table is written). The rows
//! after offs[G - 1] are no work item (every item has K tiles: the consumers' wgmma accumulators see no divergent
//! writes, which would serialise the wgmma, ptxas C7518): warps 1-3 of the producer warpgroup, idle otherwise,
//! store their zeros, spread over the blocks, before the producer starts.

    const int items = pre[G] * tiles_n;
    if (bad[0])
        alpha = __int_as_float(0x7fffffff);  // NaN
    if (tid >= 32 && tid < 128) {
        const int e0 = beg[G];
        const long long cells = (long long)(M - e0) * N;
        for (long long x = (long long)t0 * 96 + (tid - 32); x < cells; x += (long long)grid * 96) {
            char* p = (char*)D.data + (size_t)(e0 + x / N) * (size_t)D.strides[1] + (size_t)(x % N) * (size_t)D.strides[2];
            if (${OUT_BYTES} == 2)
                *(unsigned short*)p = 0;
            else
                *(unsigned*)p = 0u;
        }
    }
//! snippet grouped_p_item nonl
                int g, tm, tn, row0, mg;
                item_of(t, g, tm, tn, row0, mg);
                (void)mg;
                const int ba = 0;
                const int bb = g;
                const int kt0 = 0, kt1 = k_tiles;
//! snippet grouped_c_item nonl
            int g, tm, tn, row0, mg;
            item_of(t, g, tm, tn, row0, mg);
            const int b = 0;  // C is not read (epilogue "scale")
            const int kt0 = 0, kt1 = k_tiles;
