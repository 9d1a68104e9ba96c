//! Stream-K partial tiles: spill, add and zero of register accumulators through a workspace.
//! snippet sk_zero
//! Stream-K (spec.stream_k): a block's register accumulator written to / added from its slot of the workspace, and
//! zeroed. A slot holds every thread's registers register-major ([r][thread]: coalesced); a contributor's slot comes
//! with a flag in `flags` (set after a device-wide fence; the finisher waits for it, adds the slot, and clears it).

    // Zero this thread's accumulator registers (the register tile's storage).
#pragma unroll
    for (int r = 0; r < (int)(sizeof(acc.data) / sizeof(acc.data[0])); ++r) acc.data[r] = 0.0f;
//! snippet sk_spill template

    // ws[slot][r][thread] = acc.data[r]; then, where flag >= 0, flags[flag] = 1 once the whole block's writes are
    // visible device-wide.
    const int nreg = (int)(sizeof(acc.data) / sizeof(acc.data[0]));
    const int bd = WP_TILE_BLOCK_DIM;
    const int tid = WP_TILE_THREAD_IDX;
    ${AT}* w = (${AT}*)ws.data + (size_t)slot * nreg * bd;
#pragma unroll  // constant trip count: acc.data stays in registers
    for (int r = 0; r < nreg; ++r) w[(size_t)r * bd + tid] = acc.data[r];
    if (flag >= 0) {
#if defined(__CUDA_ARCH__)
        __threadfence();
        __syncthreads();
        if (tid == 0) atomicExch((int*)flags.data + flag, 1);
#else
        ((int*)flags.data)[flag] = 1;
#endif
    }
//! snippet sk_add template

    // acc.data[r] += ws[slot][r][thread]; where flag >= 0, first wait for flags[flag] (set by a block of a lower
    // index: on the CPU, blocks run in index order, so it is set already -- else the sums become NaN), and clear it
    // after (every launch leaves the flags zero).
    const int nreg = (int)(sizeof(acc.data) / sizeof(acc.data[0]));
    const int bd = WP_TILE_BLOCK_DIM;
    const int tid = WP_TILE_THREAD_IDX;
    const ${AT}* w = (const ${AT}*)ws.data + (size_t)slot * nreg * bd;
    if (flag >= 0) {
#if defined(__CUDA_ARCH__)
        if (tid == 0) {
            while (*(volatile int*)((int*)flags.data + flag) == 0) {
#if __CUDA_ARCH__ >= 700
                __nanosleep(32);
#endif
            }
            __threadfence();
        }
        __syncthreads();
#else
        if (((int*)flags.data)[flag] == 0) {
            for (int r = 0; r < nreg; ++r) acc.data[r] = __builtin_nanf("");  // CPU only
            return;
        }
#endif
    }
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int r = 0; r < nreg; ++r) acc.data[r] += __ldcg(w + (size_t)r * bd + tid);
#else
    for (int r = 0; r < nreg; ++r) acc.data[r] += w[(size_t)r * bd + tid];
#endif
    if (flag >= 0) {
        WP_TILE_SYNC();  // every thread has read the flag (CPU fibers too) before it is cleared
        if (tid == 0) ((int*)flags.data)[flag] = 0;
    }
