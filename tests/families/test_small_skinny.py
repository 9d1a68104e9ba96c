"""The small-matrix batched family (kernels/small.py) and the skinny family (kernels/skinny.py),
through their entry points (choose_spec -> workspace_shape -> launch_args), on the CPU (and on CUDA
where there is a GPU): odd sizes, batch broadcast, both layouts, every dtype, alpha/beta*C, output
casts, K split into a workspace, NaN-prefilled outputs, against float64.

Compiles are kept few (each distinct spec is one module; CI has 2 cores): shapes that share tile
sizes share a kernel, and the dtype/layout matrix uses one shape per family.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import warp as wp

import warp_gemm._compat as compat
from warp_gemm.families import skinny, small

try:
    from warp_gemm.tools.tolerance import bf16_bits_to_f64, compare, f64_to_bf16_bits, random_operands
except ImportError:  # before the restructure
    from warp_gemm.tolerance import bf16_bits_to_f64, compare, f64_to_bf16_bits, random_operands

compat.init()
DTYPES = ["float16", "float32", "float64"] + (["bfloat16"] if compat.HAS_BF16 else [])
DEVICES = ["cpu"] + ([pytest.param("cuda", marks=pytest.mark.gpu)] if wp.get_cuda_device_count() else [])
_KEEP = []


def _wp(x64: np.ndarray, dtype: str, device: str):
    if dtype == "bfloat16":
        bits = wp.array(f64_to_bf16_bits(x64), dtype=wp.uint16, device=device)
        _KEEP.append(bits)
        return wp.array(ptr=bits.ptr, dtype=wp.bfloat16, shape=bits.shape, strides=bits.strides,
                        capacity=bits.size * 2, device=device)
    return wp.array(np.ascontiguousarray(x64.astype(dtype)), dtype=getattr(wp, dtype), device=device)


def _f64(x) -> np.ndarray:
    if compat.HAS_BF16 and x.dtype is wp.bfloat16:
        u16 = wp.array(ptr=x.ptr, dtype=wp.uint16, shape=x.shape, strides=x.strides, capacity=x.capacity,
                       device=x.device)
        return bf16_bits_to_f64(u16.numpy())
    return x.numpy().astype(np.float64)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    return _f64(_wp(x, dtype, "cpu"))


def run_family(fam, device, dtype, out_dtype, layout, M, N, K, batch, a_nb, b_nb, c_nb, alpha, beta, rng,
               spec_override=None):
    """Run one product through ``fam``'s entry points; return (comparison, spec, launches)."""
    dev = wp.get_device(device)
    epilogue = "axpby" if c_nb else "scale"
    spec = fam.choose_spec(dev, dtype, layout[0], layout[1], M, N, K, batch, out_dtype, epilogue)
    if spec is None and fam is skinny and 4 < min(M, N) <= skinny.MAX_SMALL:
        # choose_spec leaves small sides 5..16 to the pipelined K-split plan on CUDA; the kernel itself
        # still computes them (16-wide small side), and is tested here.
        side, big = 16, 64
        tm, tn = (side, big) if M <= N else (big, side)
        spec = skinny.SkinnySpec(tm, tn, 64, dtype, out_dtype, layout[0], layout[1], epilogue,
                                 block_dim=1 if dev.is_cpu else 128, mathdx=not dev.is_cpu,
                                 target_blocks=8 if dev.is_cpu else 1056)
    assert spec is not None, (fam.__name__, M, N, K, batch)
    if spec_override:
        spec = dataclasses.replace(spec, **spec_override)
    a, _ = random_operands(M, N, K, dtype, rng, batch=a_nb)
    _, b = random_operands(M, N, K, dtype, rng, batch=b_nb)
    a_st = a if layout[0] == "N" else np.ascontiguousarray(a.transpose(0, 2, 1))
    b_st = b if layout[1] == "N" else np.ascontiguousarray(b.transpose(0, 2, 1))
    A, B = _wp(a_st, dtype, device), _wp(b_st, dtype, device)
    C = None
    ref = alpha * np.matmul(a, b)  # broadcasts a batch of 1
    ref = np.broadcast_to(ref, (batch, M, N)).copy()
    if c_nb:
        c = _round(rng.standard_normal((c_nb, M, N)), out_dtype)
        C = _wp(c, out_dtype, device)
        ref = ref + beta * c
    D = _wp(np.full((batch, M, N), np.nan), out_dtype, device)
    ws = None
    shp = fam.workspace_shape(spec, M, N, K, batch)
    if shp is not None:
        # NaN-prefilled too: every partial sum the finishing pass reads must have been written.
        ws = wp.array(np.full(shp[0], np.nan), dtype=getattr(wp, shp[1]), device=device)
    launches = fam.launch_args(spec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb or 1, workspace=ws)
    for kernel, dim, inputs, block_dim in launches:
        if block_dim is None:
            wp.launch(kernel, dim=dim, inputs=inputs, device=dev)
        else:
            wp.launch_tiled(kernel, dim=dim, inputs=inputs, block_dim=block_dim, device=dev)
    wp.synchronize_device(dev)
    # The result is rounded to out_dtype once: judge it with out_dtype's bound, unless the inputs
    # are coarser (16-bit inputs to a float32/float64 output keep the inputs' accumulation bound).
    tol_dtype = out_dtype if out_dtype in ("float16", "bfloat16") or out_dtype == dtype else "float32"
    if dtype == "float64" and out_dtype != "float64":
        tol_dtype = out_dtype
    return compare(_f64(D), ref, tol_dtype), spec, launches


# --- small family -------------------------------------------------------------------------------------
# (M, N, K, batch, a_nb, b_nb, c_nb): odd sides, a K longer than one tile (70 > 64), batch broadcast of
# each operand and of C; float32 NN, so these share at most a handful of tile-size kernels.
SMALL_SHAPES = [
    (1, 1, 1, 1, 1, 1, 0),
    (3, 15, 17, 5, 5, 5, 0),
    (16, 16, 16, 7, 7, 1, 0),
    (17, 31, 3, 4, 1, 4, 4),
    (32, 17, 15, 3, 3, 3, 1),
    (15, 16, 70, 2, 2, 2, 0),
    (32, 31, 100, 2, 2, 1, 2),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_small_shapes(device, shape):
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    rng = np.random.default_rng(abs(hash(shape)) % 2**31)
    res, spec, _ = run_family(small, device, "float32", "float32", "NN", M, N, K, batch, a_nb, b_nb, c_nb,
                              0.75, -1.5, rng)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_small_dtypes_layouts(device, dtype, layout):
    # One odd shape per (dtype, layout); axpby with C broadcast over the batch.
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _ = run_family(small, device, dtype, dtype, layout, 17, 15, 33, 3, 3, 1, 1, 0.5, 2.0, rng)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,out_dtype", [("float16", "float32"), ("bfloat16", "float32"), ("float32", "float16")])
def test_small_output_cast(device, dtype, out_dtype):
    if "bfloat16" in (dtype, out_dtype) and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _ = run_family(small, device, dtype, out_dtype, "NT", 16, 16, 16, 4, 1, 4, 0, 1.25, 0.0, rng)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
def test_small_per_block(device):
    """Several batch entries per block, a batch count that is not a multiple of it."""
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, launches = run_family(small, device, "float32", "float32", "NN", 16, 16, 16, 7, 7, 7, 0,
                                     1.0, 0.0, rng, spec_override={"per_block": 3})
    assert res.ok, f"{spec.key}: {res}"
    assert launches[0][1][0] == 3  # ceil(7 / 3) blocks along the batch


def test_small_applies():
    cpu = wp.get_device("cpu")
    assert small.choose_spec(cpu, "float32", "N", "N", 33, 8, 8, 10, "float32", "scale") is None
    assert small.choose_spec(cpu, "float32", "N", "N", 8, 8, 129, 10, "float32", "scale") is None
    assert small.choose_spec(cpu, "float32", "N", "N", 8, 8, 8, 10, "float32", "splitk") is None
    s = small.choose_spec(cpu, "float16", "N", "T", 32, 17, 100, 10, "float16", "scale")
    assert (s.tm, s.tn, s.tk) == (32, 32, 32) and hash(s) == hash(dataclasses.replace(s)) and s.key
    assert small.workspace_shape(s, 32, 17, 100, 10) is None

    class Cuda:  # a stand-in CUDA device: the choice is pure arithmetic (H100 measurements in small.py)
        is_cpu = False
        sm_count = 132

    pick = [(b, small.choose_spec(Cuda(), dt, "N", "N", m, m, m, b, dt, "scale")) for b, m, dt in
            [(4096, 32, "float16"), (256, 32, "float16"), (10000, 16, "float32"), (1000, 16, "float32")]]
    # Warp's scalar tile GEMM on CUDA too (compiles in under a second; MathDx's in 20-60 s)
    assert [(p.per_block, p.block_dim, p.mathdx) for _, p in pick] == [
        (4, 32, False), (1, 128, False), (4, 32, False), (1, 64, False)]


# --- skinny family ------------------------------------------------------------------------------------
# (M, N, K, batch, a_nb, b_nb, c_nb): small M (1: matrix-vector, 3, 15, 16) and small N (the
# transposed case), K of several 64-wide tiles (split across blocks on the CPU too) or one partial tile.
SKINNY_SHAPES = [
    (1, 33, 200, 1, 1, 1, 0),
    (3, 70, 129, 2, 2, 1, 2),
    (15, 17, 1, 1, 1, 1, 1),
    (16, 130, 300, 2, 1, 2, 0),
    (40, 3, 200, 1, 1, 1, 0),
    (33, 16, 65, 3, 3, 3, 1),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SKINNY_SHAPES, ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_skinny_shapes(device, shape):
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    rng = np.random.default_rng(abs(hash(shape)) % 2**31)
    res, spec, launches = run_family(skinny, device, "float32", "float32", "NN", M, N, K, batch, a_nb, b_nb,
                                     c_nb, 0.75, -1.5, rng)
    assert res.ok, f"{spec.key}: {res}"
    if K > 2 * spec.tk:
        assert len(launches) == 2, "K of several tiles should be split on a 2-core CPU"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N", [(3, 70), (40, 3)])
def test_skinny_no_split(device, M, N):
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, launches = run_family(skinny, device, "float32", "float32", "NN", M, N, 200, 2, 2, 2, 1,
                                     0.5, 3.0, rng, spec_override={"target_blocks": 0})
    assert res.ok, f"{spec.key}: {res}"
    assert len(launches) == 1 and skinny.workspace_shape(spec, M, N, 200, 2) is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_skinny_dtypes_layouts(device, dtype, layout):
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _ = run_family(skinny, device, dtype, dtype, layout, 5, 37, 150, 2, 2, 1, 1, 0.5, 2.0, rng)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
def test_skinny_output_cast(device):
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _ = run_family(skinny, device, "float16", "float32", "TN", 2, 40, 130, 1, 1, 1, 0, 1.0, 0.0, rng)
    assert res.ok, f"{spec.key}: {res}"


def test_skinny_workspace_checked():
    cpu = wp.get_device("cpu")
    spec = skinny.choose_spec(cpu, "float32", "N", "N", 4, 64, 1000, 1, "float32", "scale")
    assert skinny.choose_spec(cpu, "float32", "N", "N", 17, 17, 64, 1, "float32", "scale") is None
    assert skinny.choose_spec(cpu, "float32", "N", "N", 5, 64, 64, 1, "float32", "scale") is None
    shape, dt = skinny.workspace_shape(spec, 4, 64, 1000, 1)
    assert dt == "float32" and shape[1:] == (4, 64) and shape[0] > 1
    A = wp.zeros((1, 4, 1000), dtype=wp.float32)
    B = wp.zeros((1, 1000, 64), dtype=wp.float32)
    D = wp.zeros((1, 4, 64), dtype=wp.float32)
    with pytest.raises(ValueError, match="workspace"):
        skinny.launch_args(spec, A, B, None, D, 1.0, 0.0, 4, 64, 1000, 1, 1, 1, 1, workspace=None)


# --- padded shared tiles (chosen on CUDA with MathDx; the same code path runs on the CPU) ---------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fam,layout,shape", [
    (small, "NT", (17, 31, 15, 3, 3, 1, 1)),
    (small, "TN", (32, 32, 32, 2, 1, 2, 0)),
    (skinny, "NN", (3, 70, 129, 2, 2, 1, 2)),
    (skinny, "TT", (40, 5, 200, 1, 1, 1, 1)),
], ids=["small-NT", "small-TN", "skinny-NN", "skinny-TT"])
def test_padded(device, fam, layout, shape):
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _ = run_family(fam, device, "float16", "float16", layout, M, N, K, batch, a_nb, b_nb, c_nb,
                              0.5, 2.0, rng, spec_override={"pad_ab": 8, "pad_c": 8})
    assert res.ok, f"{spec.key}: {res}"


# --- small side 5..16 on CUDA: the pipelined family over K slices, then the finishing pass --------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_split_pipe_composition(device, layout, dtype, request):
    from warp_gemm.families import pipelined

    if device == "cuda" and layout[0] == "T":
        # Seen on the H100 (warp-lang 1.19.0, 2026-11-22): TN rel. error 0.3 for float16 and float32, TT
        # 0.28 for float32; correct on the CPU twin. The planner never takes this path with A stored
        # transposed (core/plan.py, _plan_split_pipe).
        request.applymarker(pytest.mark.xfail(strict=True, reason="16-row pipelined tiles with A stored "
                                              "transposed are wrong on CUDA (not diagnosed)"))

    M, N, K, sp = 5, 40, 256, 4
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    a, b = random_operands(M, N, K, dtype, rng, batch=1)
    c = _round(rng.standard_normal((1, M, N)), dtype)
    ref = 0.5 * (a @ b) + 2.0 * c
    A = _wp(a if layout[0] == "N" else np.ascontiguousarray(a.transpose(0, 2, 1)), dtype, device)
    B = _wp(b if layout[1] == "N" else np.ascontiguousarray(b.transpose(0, 2, 1)), dtype, device)
    C = _wp(c, dtype, device)
    D = _wp(np.full((1, M, N), np.nan), dtype, device)
    shape, acc = skinny.split_pipe_workspace_shape(M, N, sp, dtype)
    W = wp.array(np.full(shape, np.nan), dtype=getattr(wp, acc), device=device)
    A3, B3 = skinny.split_k_views(A, B, layout[0], layout[1], K, sp)
    assert A3.shape[0] == sp and B3.shape[0] == sp
    dev = wp.get_device(device)
    if dev.is_cpu:
        spec = pipelined.default_spec(dtype, acc, layout=layout, device_is_cpu=True)
    else:
        cfg = skinny.split_pipe_config(dev, dtype, layout[0], layout[1], M, N, K, 1, dtype, "axpby")
        assert cfg is not None
        spec = pipelined.PipeSpec(in_dtype=dtype, out_dtype=acc, layout_a=layout[0], layout_b=layout[1],
                                  **cfg["pipe"])
    k, dim, inputs, bd = pipelined.launch_args(spec, A3, B3, None, W, 1.0, 0.0, M, N, K // sp, sp, sp, sp, 1)
    wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=bd, device=dev)
    fk, fdim, finputs, _ = skinny.finish_launch(D, W, C, 0.5, 2.0, sp, 1, 1, acc, dtype)
    wp.launch(fk, dim=fdim, inputs=finputs, device=dev)
    wp.synchronize_device(dev)
    res = compare(_f64(D), ref, dtype)
    assert res.ok, f"{spec.key}: {res}"


def test_split_pipe_config_rules():
    class Cuda:  # a stand-in CUDA device: the config is pure arithmetic
        is_cpu = False
        sm_count = 132

    cfg = skinny.split_pipe_config(Cuda(), "float16", "N", "N", 16, 8192, 8192, 1, "float16", "scale")
    # measured best: 4 slices (round 6), 32x128 tiles of 64-deep K steps, 3 stages (round 9)
    assert cfg["splits"] == 4 and (cfg["pipe"]["tm"], cfg["pipe"]["tn"], cfg["pipe"]["tk"]) == (32, 128, 64)
    cfg = skinny.split_pipe_config(Cuda(), "float16", "N", "N", 8192, 16, 8192, 1, "float16", "scale")
    assert (cfg["pipe"]["tm"], cfg["pipe"]["tn"]) == (128, 32)
    assert skinny.split_pipe_config(Cuda(), "float16", "N", "N", 4, 8192, 8192, 1, "float16", "scale") is None
    assert skinny.split_pipe_config(Cuda(), "float16", "N", "N", 16, 8192, 8192, 2, "float16", "scale") is None
    assert skinny.split_pipe_config(Cuda(), "float16", "N", "N", 16, 8192, 100, 1, "float16", "scale") is None
    assert skinny.split_pipe_config(wp.get_device("cpu"), "float16", "N", "N", 16, 64, 8192, 1, "float16",
                                    "scale") is None


def test_precompile_lists_the_skinny_family():
    """`warp-gemm precompile` builds the skinny kernels the planner picks on CUDA: small sides 2-4 and the
    8-row tiles of the pipelined family's peeled edges (4103^3's 7 rows, a 6-column edge), whole-K and
    K-split, and the split-K plan's pipelined tiles of 16-row products (row-major A only)."""
    import types

    from warp_gemm.families.skinny.rules import precompile_jobs as skinny_jobs
    from warp_gemm.tools.precompile import job_label

    if skinny.choose_spec(types.SimpleNamespace(is_cpu=False, sm_count=132), "float16", "N", "N", 2, 64, 64, 1,
                          "float16", "scale") is None:
        assert skinny_jobs(["float16"]) == []  # a Warp without the family's needs: nothing to build
        return
    cuda = types.SimpleNamespace(is_cpu=False, sm_count=100)  # the SM count is a launch-time choice
    jobs = skinny_jobs(["float16", "tf32"], ("NN", "TN"), ("scale", "axpby"))
    got = {(j[1].kernel_key, j[2]) for j in jobs if j[0] == "skinny"}
    for lay in ("NN", "TN"):
        for epi in ("scale", "axpby"):
            for M, N in ((7, 4103), (4096, 6), (3, 5000), (300, 2)):
                for dt in ("float16", "float32"):
                    spec = skinny.choose_spec(cuda, dt, lay[0], lay[1], M, N, 999, 1, dt, epi, max_side=8)
                    assert {(spec.kernel_key, False), (spec.kernel_key, True)} <= got, (lay, epi, M, N, dt)
    pipes = [j[1] for j in jobs if j[0] == "pipelined"]
    if pipes:  # (a Warp that passes tiles to native snippets)
        assert {(p.tm, p.tn, p.layout_a, p.out_dtype) for p in pipes} == {(32, 128, "N", "float32")}
    assert all(j[1].in_dtype != "tf32" for j in jobs) and len(set(jobs)) == len(jobs)
    assert all(job_label(j).startswith(("wg_skinny_", "wg_pipe_")) for j in jobs)


@pytest.mark.skipif(not compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
def test_precompile_builds_a_skinny_kernel_offline(tmp_path):
    """One K-split skinny job (the 8-row edge tile and the finishing pass) compiles for sm_90 offline."""
    from warp_gemm.families.skinny.rules import precompile_jobs as skinny_jobs
    from warp_gemm.tools.precompile import build_one

    job = next((j for j in skinny_jobs(["float16"]) if j[0] == "skinny" and j[1].tm == 8 and j[2]), None)
    if job is None:
        pytest.skip("no skinny family in this Warp")
    _, _, err = build_one(job, [90], str(tmp_path))
    assert err == "", err
    built = [p.name for p in tmp_path.rglob("*") if p.suffix in (".cubin", ".ptx")]
    assert sum("sm90" in n for n in built) >= 2, built  # the GEMM and its finishing kernel
