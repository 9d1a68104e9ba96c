"""The pipelined family (warp_gemm/families/pipelined/) on its CPU twin against float64, and its
offline CUDA build.

The CPU twin runs the same kernel: stage indexing, shared-buffer views, the grouped order, the copy
snippets' zero-fill rules (plain C++ copies under the same rules as cp.async's source-size operand) and
the epilogue. Small tiles (32x32x32, one 64-row case for the chunked epilogue) keep compiles short.
Every output is NaN-prefilled; every input is fresh random data from a per-test seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import zlib

import numpy as np
import pytest
from conftest import set_options

from warp_gemm.core.options import options
from warp_gemm.families.common.kernels import ITEM_BYTES, WP_DTYPES
import warp as wp

from warp_gemm import _compat, fused
from warp_gemm.families import pipelined as P

try:
    from warp_gemm.tools.tolerance import bf16_bits_to_f64, compare, f64_to_bf16_bits, random_operands, round_to
except ImportError:
    from warp_gemm.tolerance import bf16_bits_to_f64, compare, f64_to_bf16_bits, random_operands, round_to

_compat.init()
CPU = wp.get_device("cpu")
pytestmark = pytest.mark.skipif(not P.applies(CPU, "float32"), reason="pipelined family needs Warp 1.19-class tiles")
NP = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
_KEEP = []


def _rng(request) -> np.random.Generator:
    salt = int(os.environ.get("WARP_GEMM_TEST_SEED", "0") or 0)
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()) + salt)


def _wp(x: np.ndarray, dtype: str, ld: int | None = None) -> wp.array:
    """A 3-D CPU Warp array of ``dtype`` holding ``x`` (batch, rows, cols); ``ld`` > cols: a column
    slice of a wider array (row stride ``ld`` elements), as a caller's strided view would be."""
    b, r, c = x.shape
    if ld is not None and ld != c:
        wide = np.full((b, r, ld), 7.0)  # finite junk beyond the view: must never be read
        wide[:, :, :c] = x
        return _wp(wide, dtype)[:, :, :c]
    if dtype == "bfloat16":
        bits = wp.array(f64_to_bf16_bits(x), dtype=wp.uint16, device="cpu")
        _KEEP.append(bits)
        return wp.array(ptr=bits.ptr, dtype=wp.bfloat16, shape=bits.shape, strides=bits.strides,
                        capacity=bits.size * 2, device="cpu")
    return wp.array(np.ascontiguousarray(x.astype(NP[dtype])), dtype=WP_DTYPES[dtype], device="cpu")


def _f64(a: wp.array, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        u16 = wp.array(ptr=a.ptr, dtype=wp.uint16, shape=a.shape, strides=a.strides, capacity=a.capacity,
                       device="cpu")
        return bf16_bits_to_f64(u16.numpy())
    return a.numpy().astype(np.float64)


def _run(spec: P.PipeSpec, M, N, K, rng, *, batch=1, a_nb=1, b_nb=1, c_nb=1, alpha=1.25, beta=-0.5,
         lda=None, ldb=None, ldd=None, chunk_check=True, a=None, b=None, group_m=2, fibers=False):
    """Run ``spec`` on fresh operands; returns (D as float64, float64 reference). ``ldd``: D is a column
    view of a wider array (row stride ``ldd``) whose other columns must come back untouched. ``fibers``: blocks of
    ``spec.block_dim`` CPU fibers (``wp.config.enable_cpu_blocks`` for the build and launch), as CUDA threads."""
    dt = spec.in_dtype
    nb = max(a_nb, b_nb, batch)
    if a is None:
        a, b = random_operands(M, N, K, dt, rng, batch=nb)
    a_st = np.swapaxes(a[:a_nb], 1, 2) if spec.layout_a == "T" else a[:a_nb]
    b_st = np.swapaxes(b[:b_nb], 1, 2) if spec.layout_b == "T" else b[:b_nb]
    A, B = _wp(a_st, dt, lda), _wp(b_st, dt, ldb)
    if chunk_check:
        assert P.max_chunk(A, dt) >= spec.chunk and P.max_chunk(B, dt) >= spec.chunk
    c = round_to(rng.standard_normal((c_nb, M, N)), spec.out_dtype) if spec.epilogue == "axpby" else None
    C = _wp(c, spec.out_dtype) if c is not None else None
    D = _wp(np.full((batch, M, N), np.nan), spec.out_dtype, ldd)
    grid, n_ws, n_flags = P.stream_k_sizes(spec, M, N, K, batch, wp.get_device("cpu"))
    sk = {}
    if grid:  # stream-K: a NaN-prefilled workspace (a slot read before it is written shows) and zeroed flags
        acc = spec.acc_dtype  # the workspace holds partial sums in the accumulator dtype
        sk = {"workspace": wp.array(np.full(n_ws, np.nan, NP[acc]), dtype=WP_DTYPES[acc], device="cpu"),
              "flags": wp.zeros(n_flags, dtype=wp.int32, device="cpu")}
    with fused._cpu_blocks() if fibers else contextlib.nullcontext():
        k, dim, inputs, block = P.launch_args(spec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb,
                                              c_nb if C is not None else 1, group_m=group_m, **sk)
        wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=spec.block_dim if fibers else block, device="cpu")
        wp.synchronize_device("cpu")
    if grid:
        assert dim == (1, grid) and not sk["flags"].numpy().any(), "stream-K left a flag set"
    if ldd is not None and ldd != N:
        wide = wp.array(ptr=D.ptr, dtype=D.dtype, shape=(batch, M, ldd), device="cpu")
        np.testing.assert_array_equal(_f64(wide, spec.out_dtype)[:, :, N:], 7.0)  # nothing written past N
    ai = np.minimum(np.arange(batch), a_nb - 1)
    bi = np.minimum(np.arange(batch), b_nb - 1)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = alpha * np.matmul(a[ai], b[bi])
        if c is not None:
            ref = ref + beta * c[np.minimum(np.arange(batch), c_nb - 1)]
    return _f64(D, spec.out_dtype), ref


def _spec(dtype, layout="NN", epilogue="axpby", tf32=False, chunk=16, **over) -> P.PipeSpec:
    return P.default_spec(dtype, tf32=tf32, layout=layout, epilogue=epilogue, chunk=chunk, device_is_cpu=True,
                          **over)


def _assert_close(out, ref, dtype, tf32=False):
    cmp = compare(out, ref, dtype, tf32)
    assert cmp.ok, str(cmp)


def _build_offline(spec: P.PipeSpec, out_dir, arch: int = 90) -> str:
    """Compile ``spec``'s kernel offline for ``arch`` into ``out_dir`` (asserting a cubin/PTX came out); returns the
    generated CUDA source."""
    k = P.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    wp.compile_aot_module(k.module, arch=[arch], module_dir=str(out_dir))
    built = sorted(p.name for p in out_dir.rglob("*") if p.suffix in (".cubin", ".ptx"))
    assert any(f"sm{arch}" in n for n in built), built
    return "".join(p.read_text() for p in out_dir.rglob("*.cu"))


def _offline_ptx(spec: P.PipeSpec, tmp_path) -> str | None:
    """:func:`_build_offline` of ``spec`` for sm_90, then its PTX (``use_ptx``), or None on a Warp whose
    ``compile_aot_module`` cannot write PTX."""
    import inspect

    _build_offline(spec, tmp_path / "cubin")
    if "use_ptx" not in inspect.signature(wp.compile_aot_module).parameters:
        return None
    wp.compile_aot_module(P.get_kernel(spec).module, arch=[90], module_dir=str(tmp_path / "ptx"), use_ptx=True)
    return "".join(p.read_text() for p in (tmp_path / "ptx").rglob("*.ptx"))


def _forced_on_cuda(dtype, layout, cfg, epilogue, request, tf32=False, batch=2):
    """``options(family="pipelined", pipe_config=cfg)`` on CUDA: ``batch`` entries of 1000x1000 (M and N edges), K 520
    (a partial K tile), alpha and (epilogue "axpby") beta * C, operands stored as ``layout`` says (T: a transposed
    view of the transpose) and the input dtype as output, NaN-prefilled; checked against float64. The caller
    reads what was planned."""
    from conftest import make, nan_like, to_f64

    import warp_gemm

    rng = _rng(request)
    M, N, K = 1000, 1000, 520
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    c = round_to(rng.standard_normal((batch, M, N)), dtype) if epilogue == "axpby" else None
    out = nan_like("warp", (batch, M, N), dtype, "cuda")

    def operand(x, trans):
        if not trans:
            return make(x, dtype, "warp", "cuda")
        return make(np.ascontiguousarray(np.swapaxes(x, 1, 2)), dtype, "warp", "cuda").transpose((0, 2, 1))

    args = [operand(a, layout[0] == "T"), operand(b, layout[1] == "T")]
    with warp_gemm.options(family="pipelined", pipe_config=cfg):
        if c is None:
            warp_gemm.gemm(*args, alpha=1.25, out=out, allow_tf32=tf32)
        else:
            warp_gemm.gemm(*args, make(c, dtype, "warp", "cuda"), alpha=1.25, beta=-0.5, out=out, allow_tf32=tf32)
    ref = 1.25 * np.matmul(a, b) + (0.0 if c is None else -0.5 * c)
    _assert_close(to_f64(out), ref, dtype, tf32)


def _assert_refused(spec: P.PipeSpec, match: str) -> None:
    """``spec`` is refused before any compile (get_kernel raises, unfit names it), with ``match`` in the reason."""
    with pytest.raises(ValueError, match=match):
        P.get_kernel(spec)
    assert P.unfit(spec)


DTYPE_CASES = [("float16", False), ("float32", False), ("float64", False)] + \
    ([("bfloat16", False)] if _compat.HAS_BF16 else []) + ([("float32", True)] if _compat.HAS_TF32 else [])


@pytest.mark.parametrize("dtype,tf32", DTYPE_CASES, ids=lambda v: str(v))
def test_dtypes_odd_edges(dtype, tf32, request):
    """Every dtype, M/N/K edges (45x37x71 on 32x32x32 tiles: partial tiles in M, N and K), rows of
    odd length: the widest chunk the rows allow (float32 4 bytes, 16-bit 2 bytes: the synchronous path,
    float64 8 bytes)."""
    M, N, K = 45, 37, 71
    chunk = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
    out, ref = _run(_spec(dtype, tf32=tf32, chunk=chunk), M, N, K, _rng(request))
    _assert_close(out, ref, dtype, tf32)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_16_byte_chunks_with_partial_chunks(dtype, request):
    """16-byte chunks on rows whose leading dimension is a multiple of 16 bytes but whose extent is
    not (column views of wider arrays: the last chunk of a row is partly outside the operand and the
    copy reads only its valid bytes); padded shared rows (the GPU layout) on the CPU too."""
    M, N, K = 33, 41, 45
    it = ITEM_BYTES[dtype]
    ld = lambda n: -(-n * it // 16) * 16 // it  # noqa: E731
    pads = {"float16": (8, 8), "float32": (4, 8), "float64": (4, 4)}[dtype]
    spec = _spec(dtype, chunk=16, pad_ab=pads[0], pad_c=pads[1])
    out, ref = _run(spec, M, N, K, _rng(request), lda=ld(K), ldb=ld(N))
    _assert_close(out, ref, dtype)


@pytest.mark.parametrize("chunk", [8, 4])
def test_narrow_chunks_fp16(chunk, request):
    """cp.async.ca sizes (8 and 4 bytes) on fp16 rows aligned only that far."""
    M, N, K = 40, 34, 38
    ld = {8: (44, 36), 4: (38, 34)}[chunk]  # 88/72 bytes (8-aligned), 76/68 bytes (4-aligned)
    out, ref = _run(_spec("float16", chunk=chunk), M, N, K, _rng(request), lda=ld[0], ldb=ld[1])
    _assert_close(out, ref, "float16")


@pytest.mark.parametrize("layout", ["NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_layouts(dtype, layout, request):
    """Transposed storage of A and/or B (tiles copied in the stored shape, transposed in shared
    memory), with edges in every dimension."""
    chunk = 2 if dtype == "float16" else 4
    out, ref = _run(_spec(dtype, layout, chunk=chunk), 39, 35, 67, _rng(request))
    _assert_close(out, ref, dtype)


@pytest.mark.parametrize("stages", [3, 4])
def test_stages_and_chunked_epilogue(stages, request):
    """3 and 4 stages over 5 and 6 K tiles plus a partial one (the stage ring wraps), 64-row tiles
    (the epilogue in 32-row chunks), several tile rows in the grouped order (group_m 2)."""
    spec = _spec("float32", chunk=4, tm=64, stages=stages)
    M, N, K = 150, 70, 32 * (stages + 2) + 7
    out, ref = _run(spec, M, N, K, _rng(request), group_m=2)
    _assert_close(out, ref, "float32")


@pytest.mark.parametrize("K", [0, 5, 32])
def test_short_k(K, request):
    """K == 0 (no K tile: D = beta * C), K smaller than one K tile, exactly one K tile."""
    out, ref = _run(_spec("float32", chunk=4), 37, 33, K, _rng(request))
    _assert_close(out, ref, "float32")


def test_batch_broadcast(request):
    """Batch 3 with A broadcast (one matrix), B batched, C broadcast; alpha/beta."""
    out, ref = _run(_spec("float32", chunk=4), 35, 33, 40, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=1,
                    alpha=0.75, beta=2.0)
    _assert_close(out, ref, "float32")
    out, ref = _run(_spec("float32", chunk=4), 35, 33, 40, _rng(request), batch=2, a_nb=2, b_nb=1, c_nb=2)
    _assert_close(out, ref, "float32")


def test_scale_epilogue_fp16_output_cast(request):
    """Epilogue "scale" (no C), fp16 output through tile_astype, 16-byte chunks on aligned rows."""
    out, ref = _run(_spec("float16", epilogue="scale", chunk=16), 41, 40, 56, _rng(request), alpha=-2.0)
    _assert_close(out, ref, "float16")


@pytest.mark.parametrize("chunk", [16, 4])
def test_infinities_in_edge_tiles(chunk, request):
    """Infinities in the last valid K column of A and the last valid row/column of B: the zero-filled
    chunks beyond the edges must not turn inf * 0 into NaN where the reference has none."""
    rng = _rng(request)
    M, N, K = 37, 35, 44 if chunk == 16 else 45
    a, b = random_operands(M, N, K, "float32", rng, batch=1)
    a[0, 3, K - 1] = np.inf
    a[0, M - 1, K - 2] = -np.inf
    b[0, K - 1, N - 1] = np.inf
    b[0, 5, N - 1] = -np.inf
    spec = _spec("float32", chunk=chunk)
    out, ref = _run(spec, M, N, K, rng, a=a, b=b, lda=48 if chunk == 16 else None,
                    ldb=36 if chunk == 16 else None)
    assert np.isinf(ref).any() and np.isfinite(ref).sum() > ref.size // 2
    assert np.array_equal(np.isnan(out), np.isnan(ref)), "NaN pattern differs from the float64 reference"
    _assert_close(out, ref, "float32")


STORE_CASES = [("float16", "float16", False), ("float16", "float32", False), ("float32", "float32", False),
               ("float64", "float64", False)] + \
    ([("bfloat16", "bfloat16", False)] if _compat.HAS_BF16 else []) + \
    ([("float32", "float32", True)] if _compat.HAS_TF32 else [])


@pytest.mark.parametrize("zero", [False, True], ids=["tile_zeros", "zero_snippet"])
@pytest.mark.parametrize("dtype,out_dtype,tf32", STORE_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("N,ldd", [(40, None), (37, None), (43, 48), (35, 41)], ids=lambda v: str(v))
def test_native_accumulator_and_store(dtype, out_dtype, tf32, N, ldd, zero, request, monkeypatch):
    """The "scale" epilogue's snippet stores from the padded shared accumulator, zero-filled by
    tile_zeros (ZERO_ACC_SNIPPET off) or by its snippet (the GPU's padded configuration, here
    on the CPU twin with 32x32 tiles, two tile rows and columns):
    whole vector stores where D's rows allow them (N 40; a view of rows 48 wide), element stores where
    they do not (odd N 37 and 35: every row misaligned; a view of rows 41 wide), and the N edge inside a
    vector; nothing past N written. 2 K tiles and a partial one (the accumulator is read back per step)."""
    pads = {"float16": (8, 8), "bfloat16": (8, 8), "float32": (4, 8), "float64": (4, 4)}[dtype]
    spec = _spec(dtype, epilogue="scale", tf32=tf32, chunk=ITEM_BYTES[dtype], pad_ab=pads[0], pad_c=pads[1])
    spec = P.PipeSpec(**{**spec.__dict__, "out_dtype": out_dtype})
    if zero and not _compat.HAS_TILE_EMPTY:
        pytest.skip("the zero-fill snippet needs tile_empty (1.19)")
    set_options(monkeypatch, zero_acc_snippet=zero)
    assert P.native_acc(spec) == zero and P.native_store(spec) and spec.key.endswith("_za") == zero
    out, ref = _run(spec, 45, N, 75, _rng(request), alpha=-1.5, ldd=ldd, batch=2, a_nb=2, b_nb=1)
    _assert_close(out, ref, out_dtype if out_dtype != "float32" or dtype != "float16" else "float16", tf32)


def test_native_paths_are_chosen_where_they_apply(monkeypatch):
    """Shared accumulators of 32+ rows are zero-filled by the snippet (tile_empty); the epilogue snippet
    only for "scale" without bias or activation (the others keep Warp's tile epilogue); register
    accumulators (pad_c 0) and 16-row tiles (the split-K plan: slower with them) neither."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    s = P.default_spec("float16", epilogue="scale")
    assert P.native_store(s) and P.native_acc(s) == _compat.HAS_TILE_EMPTY
    assert s.key.endswith("_za") == _compat.HAS_TILE_EMPTY
    for over in (dict(epilogue="axpby"), dict(bias=True), dict(activation="relu")):
        t = P.PipeSpec(**{**s.__dict__, **over})
        assert not P.native_store(t) and P.native_acc(t) == _compat.HAS_TILE_EMPTY
    for t in (P.default_spec("float32"), P.PipeSpec(**{**s.__dict__, "tm": 16})):  # register acc; 16 rows
        assert not P.native_store(t) and not P.native_acc(t)
    # 16-bit inputs into a float64 output: 4 float32 accumulators a thread would store 32 bytes (no vector type;
    # the KeyError the GPU tests found once 1-tile fp16 products took this family, round 16): Warp's epilogue
    wide = P.PipeSpec(**{**s.__dict__, "out_dtype": "float64"})
    assert not P.native_store(wide) and P.native_store(P.PipeSpec(**{**s.__dict__, "out_dtype": "float32"}))


ACTS = [None, "relu", "gelu", "gelu_tanh", "silu", "tanh"]


@pytest.mark.parametrize("act", ACTS[1:])
def test_bias_activation_epilogue(act, request):
    """D = act(alpha * A @ B + beta * C + bias) with a broadcast bias row (1-D, of the output dtype), in
    the 32-row epilogue chunks (64-row tiles) and at the N edge; float32 (the accumulator's dtype)."""
    from warp_gemm.families.common.epilogue import reference

    rng = _rng(request)
    M, N, K = 70, 45, 37
    spec = _spec("float32", chunk=4, tm=64, bias=True, activation=act)
    a, b = random_operands(M, N, K, "float32", rng, batch=1)
    c = round_to(rng.standard_normal((1, M, N)), "float32")
    bias = round_to(rng.standard_normal(N), "float32")
    A, B, C = _wp(a, "float32"), _wp(b, "float32"), _wp(c, "float32")
    Bias = wp.array(bias.astype(np.float32), dtype=wp.float32, device="cpu")
    D = _wp(np.full((1, M, N), np.nan), "float32")
    k, dim, inputs, block = P.launch_args(spec, A, B, C, D, 0.5, 2.0, M, N, K, 1, 1, 1, 1, bias=Bias)
    wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=block, device="cpu")
    wp.synchronize_device("cpu")
    ref = reference(act, 0.5 * (a @ b) + 2.0 * c + bias[None, None, :])
    _assert_close(D.numpy().astype(np.float64), ref, "float32")
    with pytest.raises(ValueError):
        P.launch_args(spec, A, B, C, D, 0.5, 2.0, M, N, K, 1, 1, 1, 1)


def test_bias_fp16_output(request):
    """Bias (2-D (1, N), fp16) without activation, fp16 output cast, 16-byte chunks."""
    rng = _rng(request)
    M, N, K = 40, 40, 48
    spec = _spec("float16", epilogue="scale", chunk=16, bias=True)
    a, b = random_operands(M, N, K, "float16", rng, batch=1)
    bias = round_to(rng.standard_normal((1, N)), "float16")
    D = _wp(np.full((1, M, N), np.nan), "float16")
    k, dim, inputs, block = P.launch_args(spec, _wp(a, "float16"), _wp(b, "float16"), None, D, 1.0, 0.0, M, N, K,
                                          1, 1, 1, 1, bias=wp.array(bias.astype(np.float16), dtype=wp.float16,
                                                                    device="cpu"))
    wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=block, device="cpu")
    wp.synchronize_device("cpu")
    _assert_close(D.numpy().astype(np.float64), a @ b + bias[None], "float16")


def test_spec_key_and_checks(monkeypatch):
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    s = P.default_spec("float16", layout="NT", epilogue="axpby")
    assert s.key.startswith("wg_pipe_float16_float16_NT_128x128x128_s2_b128")  # 128 threads: round 9
    assert hash(s) == hash(P.default_spec("float16", layout="NT", epilogue="axpby"))
    assert P.default_spec("float16", M=1000, N=1000).tn == 64 and P.default_spec("float16", M=4096, N=4096).tn == 128
    # the small configuration only where its 128x64 blocks fit in one wave (132 SMs): 8x17 and 16x16 do not
    assert P.default_spec("float16", M=1023, N=1025).tn == 128 and P.default_spec("float16", M=2048, N=1024).tn == 128
    assert P.default_spec("float16", M=1024, N=1024).tn == 64
    # 65 blocks of 128x64 at 127x4099 fill under half the SMs: 64x32 tiles (test_narrow_rows_rule_and_kernel)
    assert P.default_spec("float16", M=127, N=4099).tn == 32
    assert P.default_spec("float32", M=127, N=4099, tf32=True).tn == 64
    assert P.smem_bytes(s) == 2 * 2 * 128 * 136 * 2 + 128 * 136 * 4 <= P.SMEM_LIMIT
    assert P.smem_bytes(P.PipeSpec(**{**s.__dict__, "pad_c": 0})) == 2 * 2 * 128 * 136 * 2
    assert "_axpby_bias_gelu" in P.PipeSpec(**{**s.__dict__, "bias": True, "activation": "gelu"}).key
    for bad in (dict(chunk=2, in_dtype="float32"), dict(stages=9), dict(chunk=16, pad_ab=4), dict(activation="elu")):
        with pytest.raises(ValueError):
            P._check(P.PipeSpec(**{**s.__dict__, **bad}))


def test_max_chunk():
    x = np.zeros((2, 8, 72))
    assert P.max_chunk(_wp(x, "float16"), "float16") == 16
    assert P.max_chunk(_wp(x, "float16", ld=76)[:, :, :70], "float16") == 8
    assert P.max_chunk(_wp(x[:, :, :70], "float16", ld=74), "float16") == 4
    assert P.max_chunk(_wp(x[:, :, :71], "float16"), "float16") == 2
    assert P.max_chunk(_wp(x[:, :, :71], "float32"), "float32") == 4
    assert P.max_chunk(_wp(x[:, :, :71], "float64"), "float64") == 8
    assert P.max_chunk(_wp(x[:1, :1, :71], "float16"), "float16") == 16  # one row: its stride is unused


def test_applies():
    assert P.has_native_tile_args()
    assert P.applies(CPU, "float16")
    assert not P.applies(CPU, "float16", tf32=True)
    assert not P.applies(CPU, "float32", chunk=2)

    class Old:
        is_cuda, is_cpu, arch = True, False, 75

    class H100:
        is_cuda, is_cpu, arch = True, False, 90

    assert not P.applies(Old(), "float16")
    assert P.applies(H100(), "float16", layout="TN") and P.applies(H100(), "float32", tf32=True, layout="NT")
    assert not P.applies(H100(), "float32", layout="NT") and P.applies(CPU, "float32", layout="NT")


AOT_CASES = [("float16", False), ("float32", False), ("float64", False)] + \
    ([("bfloat16", False)] if _compat.HAS_BF16 else []) + ([("float32", True)] if _compat.HAS_TF32 else [])


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,tf32", AOT_CASES, ids=lambda v: str(v))
def test_cuda_build_offline(dtype, tf32, tmp_path, monkeypatch):
    """The recommended CUDA kernel of each dtype (cp.async PTX, padded views, launch bounds) compiles
    without a GPU (~25 s each on 2 cores): sm_90, fp16 for sm_80 with transposed layouts."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    spec = P.default_spec(dtype, tf32=tf32, epilogue="axpby", layout="TT" if dtype == "float16" else "NN")
    src = _build_offline(spec, tmp_path, 80 if dtype == "float16" else 90)
    assert "cp.async.cg.shared.global" in src and f"cp.async.wait_group {spec.stages - 1}" in src


@pytest.mark.skipif(not (_compat.HAS_COMPILE_AOT and _compat.HAS_TILE_EMPTY),
                    reason="needs compile_aot_module and tile_empty")
@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_cuda_build_offline_native_store(dtype, tmp_path, monkeypatch):
    """The "scale" kernels' store snippet (vector stores: 8 bytes of fp16, 16 of fp64) compiles for sm_90
    without a GPU; the accumulator's zero-fill snippet too (fp64, ZERO_ACC_SNIPPET)."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    set_options(monkeypatch, zero_acc_snippet=dtype == "float64")
    spec = P.default_spec(dtype, epilogue="scale")
    assert P.native_store(spec) and P.native_acc(spec) == (dtype == "float64")
    src = _build_offline(spec, tmp_path)
    vt = "unsigned long long" if dtype == "float16" else "::uint4"
    assert ("make_uint4(0u, 0u, 0u, 0u)" in src) == (dtype == "float64") and f"*({vt}*)g = *(const {vt}*)v" in src


@pytest.mark.skipif(not (_compat.HAS_COMPILE_AOT and _compat.HAS_TILE_EMPTY),
                    reason="needs compile_aot_module and tile_empty")
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_cuda_build_offline_persistent(epilogue, tmp_path, monkeypatch):
    """The persistent kernel (blocks looping over output tiles; the store snippet or Warp's tile epilogue
    inside the K loop's branch, the accumulator's zero fill between tiles) compiles for sm_90 offline."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    spec = P.default_spec("float16", epilogue=epilogue, layout="NT" if epilogue == "axpby" else "NN",
                          persistent=1)
    assert P.native_acc(spec) and P.native_store(spec) == (epilogue == "scale")
    src = _build_offline(spec, tmp_path)
    assert "cp.async.cg.shared.global" in src and "make_uint4(0u, 0u, 0u, 0u)" in src and "_per1" in src


def test_precompile_lists_the_pipelined_family():
    """`warp-gemm precompile` builds the pipelined family's planner defaults (large and small problems,
    every layout and epilogue asked for) beside the tiled family's; exact float32 its SIMT kernels, float64 its DMMA
    kernels."""
    from warp_gemm.families.pipelined.rules import precompile_jobs as pipelined_jobs
    from warp_gemm.tools.precompile import job_label

    if not P.has_native_tile_args():
        assert pipelined_jobs(["float16"]) == []
        return
    jobs = pipelined_jobs(["float16", "float32", "float64"], ("NN", "TT"), ("scale", "axpby"))
    keys = {j[1].key for j in jobs}
    for lay in ("NN", "TT"):
        for epi in ("scale", "axpby"):
            for side in (4096, 1000):
                assert P.default_spec("float16", "float16", layout=lay, epilogue=epi, M=side, N=side).key in keys
            assert P.default_spec("float16", "float16", layout=lay, epilogue=epi, M=8192, N=8192, K=256).key in keys
    for k in (32, 128):  # the 32x32 tiles of batched small 16-bit products
        assert P.default_spec("float16", "float16", layout="NN", epilogue="scale", M=32, N=32, K=k).key in keys
    # every 16-bit default is an mma.sync kernel where the snippets are on (so are the shipped table's 16-bit winners)
    assert all(j[1].mma for j in jobs if j[1].in_dtype == "float16") == options().pipe_snippets
    if _compat.HAS_TF32:  # tf32: the large, small-grid and 32x32 tiles
        t32 = {j[1].key for j in pipelined_jobs(["tf32"])}
        for side in (8192, 1024, 32):
            assert P.default_spec("float32", "float32", tf32=True, M=side, N=side, K=side).key in t32
    # exact float32: its large, small-grid (stream-K) and quarter-grid kernels (SIMT), one per layout and epilogue, and
    # the small-grid one with edge copies (sides not a multiple of its tiles), TT's 16 x 8 kernel of large grids with
    # a deep K, NN's 16 x 8 kernel of whole 128x256 tiles; float64: the DMMA kernel's three, and with edge copies
    f32 = {j[1].key for j in jobs if j[1].in_dtype == "float32"}
    sides = ((8192, None), (1024, None), (512, None), (1016, 1016), (8184, 8184), (8192, 8192))
    assert f32 == {P.default_spec("float32", "float32", layout=lay, epilogue=epi, M=side, N=side, K=k).key
                   for lay in ("NN", "TT") for epi in ("scale", "axpby") for side, k in sides}
    assert sum("_r16" in k for k in f32) == 4  # TT 8184^3 on 128x128 tiles, NN 8192^2 on 128x256 ones
    assert len(f32) == 20 and all(j[1].simt for j in jobs if j[1].in_dtype == "float32") == options().pipe_snippets
    f64 = {j[1].key for j in jobs if j[1].in_dtype == "float64"}
    assert f64 >= {P.default_spec("float64", "float64", layout=lay, epilogue=epi, M=side, N=side, K=k).key
                   for lay in ("NN", "TT") for epi in ("scale", "axpby") for side, k in sides + ((8184, 8184),)}
    assert not options().pipe_snippets or any(j[1].edge_copy for j in jobs if j[1].in_dtype == "float64")
    assert any(j[1].mma for j in jobs if j[1].in_dtype == "float64") == options().pipe_snippets
    assert all(job_label(j).startswith("wg_pipe_") for j in jobs)


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
def test_precompile_builds_a_pipelined_kernel_offline(tmp_path):
    from warp_gemm.families.pipelined.rules import precompile_jobs as pipelined_jobs
    from warp_gemm.tools.precompile import build_one

    jobs = [j for j in pipelined_jobs(["float16"]) if j[1].tn == 64]  # the small-problem configuration
    assert jobs
    job, sec, err = build_one(jobs[0], [90], str(tmp_path))
    assert err == "", err
    assert any("sm90" in p.name for p in tmp_path.rglob("*") if p.suffix in (".cubin", ".ptx"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_staging_kernel_pads_rows(dtype, request):
    """The staging copy (16-byte chunks, element-wise reads): batched sources with odd rows, a batch
    stride and a non-unit column stride land in the first c columns of 16-byte rows, zeros after, on the
    CPU twin of the snippet (the CUDA build is compiled offline below) -- one operand alone, and two of
    different shapes in one launch (A and B of a call)."""
    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    from warp_gemm.core import launches

    rng = _rng(request)
    item = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]

    def job(nb, r, c):
        cp = -(-c * item // 16) * 16 // item
        full = rng.standard_normal((nb, r, 2 * c)).astype(np.float32)  # every other column: column stride 2
        src_full = _wp(full, dtype)
        src = wp.array(ptr=src_full.ptr, dtype=src_full.dtype, shape=(nb, r, c),
                       strides=(src_full.strides[0], src_full.strides[1], 2 * src_full.strides[2]), device="cpu")
        dst = _wp(np.full((nb, r, cp), np.nan, np.float32), dtype)
        return dst, src, src_full

    def check(dst, src_full, c):
        got = _f64(dst, dtype)
        want = _f64(src_full, dtype)[:, :, ::2]
        np.testing.assert_array_equal(got[:, :, :c], want)
        np.testing.assert_array_equal(got[:, :, c:], 0.0)

    d1, s1, f1 = job(3, 5, 13)
    launches.stage([(d1, s1)], dtype)
    check(d1, f1, 13)
    d2, s2, f2 = job(2, 7, 11)
    d3, s3, f3 = job(1, 3, 17)
    launches.stage([(d2, s2), (d3, s3)], dtype)
    check(d2, f2, 11)
    check(d3, f3, 17)


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
def test_staging_kernel_builds_offline(tmp_path):
    """The staging snippet's CUDA branch (aligned local array, one 16-byte store) compiles for sm_90."""
    from warp_gemm.families.common import elementwise

    k = elementwise.stage_kernel("float16")
    wp.compile_aot_module(k.module, arch=[90], module_dir=str(tmp_path))
    assert any("sm90" in p.name for p in tmp_path.rglob("*") if p.suffix in (".cubin", ".ptx"))
    src = "".join(p.read_text() for p in tmp_path.rglob("*.cu"))
    assert "*(uint4*)d" in src


def test_narrow_rows_rule_and_kernel(monkeypatch, request):
    """tile_matmul's 16-bit configurations (without the snippets): problems whose 128x128 blocks leave a wave mostly
    idle get 96-row tiles (fewer waves at ~0.84 of the time per block, H100); the others keep 128. The 96x128 tile
    (the CUDA shape, padded shared rows) and the 64x32 tile of grids under half the SMs are correct on the CPU
    twin."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    pick = {sh: P.default_spec("float16", M=sh[0], N=sh[1]).tm
            for sh in [(1023, 1025), (1536, 1536), (2048, 1024), (4095, 4095), (4096, 4096)]}
    assert pick == {(1023, 1025): 96, (1536, 1536): 96, (2048, 1024): 128, (4095, 4095): 128, (4096, 4096): 128}
    assert P.default_spec("float16", M=1000, N=1000).tn == 64  # the one-wave small configuration first
    quarter = P.default_spec("float16", M=127, N=4099)  # 65 blocks of 128x64: under half of 132 SMs
    assert (quarter.tm, quarter.tn, quarter.block_dim) == (64, 32, 128)
    assert P.default_spec("float64", M=1023, N=1025).tm == 64  # float64: its own small-grid tiles
    rng = _rng(request)
    for M, N in ((1023, 1025), (127, 4099)):  # the 96x128 and the 64x32 CUDA tiles, on the CPU twin
        spec = P.default_spec("float16", M=M, N=N, epilogue="axpby")
        if not _compat.HAS_STRIDED_MATMUL_OPERANDS:
            spec = P.PipeSpec(**{**spec.__dict__, "pad_ab": 0, "pad_c": 0})
        spec = P.PipeSpec(**{**spec.__dict__, "block_dim": 1})
        out, ref = _run(spec, 100, 136, 152, rng)  # 16-byte rows, partial tiles in M, N and K
        _assert_close(out, ref, "float16")


def test_short_k_block_rule(monkeypatch):
    """tile_matmul's 16-bit 128x128 tiles take 128 threads, except with at most SHORT_K_STEPS K steps (256 threads:
    the fixed cost per tile dominates); K unknown keeps 128."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    b = {K: P.default_spec("float16", M=256, N=256, batch=64, K=K).block_dim for K in (128, 256, 257, 4096)}
    assert b == {128: 256, 256: 256, 257: 128, 4096: 128}
    assert P.default_spec("bfloat16", M=4096, N=4096).block_dim == 128
    assert P.default_spec("float16", M=4096, N=4096, K=256).tm == 128


def test_tiny_batched_rule_and_kernel(monkeypatch, request):
    """Batched 16-bit products of 17-32 output sides (K <= 128, >= 256 entries) are the family's on CUDA
    (32x32 tiles, 64-deep K tiles past K 32); sides of 16, wider outputs, longer K, fewer entries and
    other dtypes stay with the small family. tile_matmul's CUDA tile (padded shared rows, the accumulator and
    store snippets; without the snippets) on the CPU twin: edges in M, N and K, two K tiles, B broadcast, both
    epilogues."""
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's kernels (the snippet defaults: own tests)
    assert P.tiny_batched("float16", 32, 32, 32, 4096) and P.tiny_batched("bfloat16", 17, 32, 128, 256)
    for args in (("float16", 16, 32, 32, 4096), ("float16", 32, 33, 32, 4096), ("float16", 32, 32, 129, 4096),
                 ("float16", 32, 32, 32, 255), ("float32", 32, 32, 32, 4096), ("float16", 24, 24, 0, 4096)):
        assert not P.tiny_batched(*args), args
    s = P.default_spec("float16", M=32, N=32, K=32, batch=4096)
    assert (s.tm, s.tn, s.tk, s.block_dim, s.min_blocks, s.stages) == (32, 32, 32, 64, 0, 2)
    assert P.default_spec("float16", M=24, N=30, K=100, batch=4096).tk == 64
    rng = _rng(request)
    for epi in ("scale", "axpby"):
        spec = P.default_spec("float16", M=24, N=30, K=100, batch=5, epilogue=epi)
        if not _compat.HAS_STRIDED_MATMUL_OPERANDS:
            spec = P.PipeSpec(**{**spec.__dict__, "pad_ab": 0, "pad_c": 0})
        spec = P.PipeSpec(**{**spec.__dict__, "block_dim": 1})
        out, ref = _run(spec, 24, 24, 104, rng, batch=5, a_nb=5, b_nb=1, c_nb=5)  # 16-byte rows, K 2 tiles
        _assert_close(out, ref, "float16")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tiny_batched_planned_on_cuda(dtype, planned, request):
    """On CUDA the planner gives 300 x 24x32x40 (16-bit, aligned rows) to the pipelined family and
    300 x 16^3 to the small family; both match float64."""
    from conftest import make, nan_like, to_f64

    import warp_gemm

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    rng = _rng(request)
    for (M, N, K), fam in (((24, 32, 40), "pipelined"), ((16, 16, 16), "small")):
        a, b = random_operands(M, N, K, dtype, rng, batch=300)
        out = nan_like("warp", (300, M, N), dtype, "cuda")
        warp_gemm.matmul(make(a, dtype, "warp", "cuda"), make(b, dtype, "warp", "cuda"), out=out)
        assert planned[-1].family == fam, (M, N, K, planned[-1].family)
        _assert_close(to_f64(out), np.matmul(a, b), dtype)


# (dtype, tf32, batch, M, N, K, layout, epilogue, family): products whose default kernel compiles in seconds on CUDA
# (mma.sync snippets, Warp's scalar tile GEMM in the small family), with odd sides, transposed views and C
SMALL_GRID_CASES = [
    ("float16", False, 0, 64, 64, 64, "NN", "scale", "pipelined"),
    ("bfloat16", False, 0, 64, 64, 64, "TN", "axpby", "pipelined"),
    ("float16", False, 0, 127, 4099, 1031, "NT", "scale", "pipelined"),
    ("float16", False, 0, 1023, 1025, 1027, "TT", "axpby", "pipelined"),
    ("float16", False, 3, 1500, 1500, 200, "NN", "scale", "pipelined"),
    ("float16", False, 300, 24, 32, 40, "TN", "axpby", "pipelined"),
    ("bfloat16", False, 4096, 32, 32, 128, "NN", "scale", "pipelined"),
    ("float32", True, 0, 64, 64, 64, "NN", "scale", "pipelined"),
    ("float32", True, 0, 33, 17, 65, "NT", "axpby", "pipelined"),
    ("float32", True, 1000, 16, 16, 16, "TT", "scale", "pipelined"),
    ("float32", False, 1000, 16, 16, 16, "NN", "axpby", "small"),
    ("float64", False, 4096, 8, 8, 8, "TN", "scale", "small"),
    ("float16", False, 1000, 16, 16, 16, "NT", "scale", "small"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", SMALL_GRID_CASES, ids=lambda c: "{}{}-b{}-M{}-N{}-K{}-{}-{}".format(
    c[0], "-tf32" if c[1] else "", *c[2:8]))
def test_small_grid_defaults_on_cuda(case, planned, request):
    """The default plans of small grids and tiny batched products on CUDA take no tile_matmul (MathDx) kernel: the
    pipelined family's mma.sync kernel, or the small family on Warp's scalar tile GEMM; each matches float64 with
    operands stored as the layout says (T: a transposed view), alpha and beta * C, the output NaN-prefilled."""
    from conftest import make, nan_like, to_f64

    import warp_gemm

    dtype, tf32, batch, M, N, K, layout, epilogue, family = case
    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    if tf32 and not _compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    rng = _rng(request)
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    lead = (batch,) if batch else ()
    c = round_to(rng.standard_normal(lead + (M, N)), dtype) if epilogue == "axpby" else None
    out = nan_like("warp", lead + (M, N), dtype, "cuda")

    def operand(x, trans):
        if not trans:
            return make(x, dtype, "warp", "cuda")
        t = make(np.ascontiguousarray(np.swapaxes(x, -1, -2)), dtype, "warp", "cuda")
        return t.transpose((0, 2, 1) if batch else (1, 0))

    args = [operand(a, layout[0] == "T"), operand(b, layout[1] == "T")]
    if c is None:
        warp_gemm.gemm(*args, alpha=1.25, out=out, allow_tf32=tf32)
    else:
        warp_gemm.gemm(*args, make(c, dtype, "warp", "cuda"), alpha=1.25, beta=-0.5, out=out, allow_tf32=tf32)
    plan = planned[-1]
    assert plan.family == family, (case, plan.family)
    spec = plan.family_spec
    if family == "pipelined":
        assert spec.mma and spec.tf32 == tf32, spec
    else:
        assert not spec.mathdx, spec
    ref = 1.25 * np.matmul(a, b) + (0.0 if c is None else -0.5 * c)
    _assert_close(to_f64(out), ref, dtype, tf32)


PERSIST_PADS = {"float16": (8, 8), "bfloat16": (8, 8), "float32": (4, 8), "float64": (4, 4)}


@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("dtype,tf32", DTYPE_CASES, ids=lambda v: str(v))
def test_persistent_blocks_loop_over_tiles(dtype, tf32, epilogue, request):
    """Persistent blocks (``spec.persistent``; on the CPU a grid of 4 blocks): each block loops over several
    output tiles of several batch entries (3 x 70x45 outputs on 32x32 tiles: 18 tiles, with M and N edges),
    its copies running ahead across tile boundaries (3 K tiles, the last partial), the accumulator stored
    and zeroed in place between tiles; A broadcast over the batch."""
    M, N, K = 70, 45, 75
    it = ITEM_BYTES[dtype]
    ld = lambda n: -(-n * it // 16) * 16 // it  # noqa: E731
    pads = PERSIST_PADS[dtype]
    spec = _spec(dtype, tf32=tf32, epilogue=epilogue, pad_ab=pads[0], pad_c=pads[1], persistent=1)
    out, ref = _run(spec, M, N, K, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=3, lda=ld(K), ldb=ld(N))
    _assert_close(out, ref, dtype, tf32)


@pytest.mark.parametrize("layout,K", [("NT", 75), ("TN", 20), ("TT", 64), ("NN", 0)])
def test_persistent_layouts_and_short_k(layout, K, request):
    """Persistent blocks with transposed operands, one K tile per output tile (K 20: every step stores),
    and K == 0 (no K steps to loop over: the one-tile-per-block kernel stores alpha * 0 + beta * C)."""
    M, N = 66, 97
    spec = _spec("float16", layout=layout, pad_ab=8, pad_c=8, persistent=1)
    ld = lambda n: -(-n // 8) * 8  # noqa: E731
    lda = ld(M) if layout[0] == "T" else ld(K) if K else None
    ldb = (ld(K) if layout[1] == "T" else ld(N)) if K else None
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, b_nb=2, a_nb=2, c_nb=1, lda=lda, ldb=ldb,
                    chunk_check=K > 0)
    _assert_close(out, ref, "float16")


def test_persistent_needs_the_zero_fill_snippet():
    """A persistent spec without a shared accumulator (pad_c 0) is refused by name, before any compile."""
    with pytest.raises(ValueError, match="persistent"):
        P.get_kernel(_spec("float32", pad_c=0, persistent=1))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tf32,cfg", [
    ("float16", False, "pipe/128x128x128/s2/b128/o1/p1"), ("bfloat16", False, "pipe/128x64x64/s2/b128/o2/p2"),
    ("float32", True, "pipe/128x128x64/s2/b256/o1/p1"), ("float64", False, "pipe/64x64x32/s2/b128/o2/p2")],
    ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_persistent_forced_on_cuda(dtype, tf32, cfg, epilogue, planned, request):
    """The tuner's persistent candidates forced through the API on CUDA: more output tiles than the grid
    (4 x 1000x1000 on 128x128 tiles: 256 tiles for 132 blocks), M and N edges, 520 = 4 K tiles and a partial
    one, the store snippet ("scale") and Warp's tile epilogue with beta * C ("axpby")."""
    from warp_gemm.config.configs import PipeConfig

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    if tf32 and not _compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    _forced_on_cuda(dtype, "NN", cfg, epilogue, request, tf32=tf32, batch=4)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.persistent == PipeConfig.parse(cfg).persistent, spec


# --- exact float32 on CUDA cores (spec.simt) ---------------------------------------------------------------
def _simt_spec(layout="NN", epilogue="axpby", tm=64, tn=64, tk=16, stages=3, **over) -> P.PipeSpec:
    return _spec("float32", layout=layout, epilogue=epilogue, tm=tm, tn=tn, tk=tk, stages=stages, pad_ab=4,
                 pad_c=0, simt=True, **over)


def _ld4(n: int) -> int:
    return -(-n // 4) * 4


@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_simt_layouts_and_edges(layout, epilogue, request):
    """The SIMT kernel (8x8 outputs per thread in registers, the product in float32 FMAs): on the CPU twin each
    block runs the tile's CUDA threads one after another with the same lane-to-output order and stage reads,
    so the order's every row and column is checked. 70x131x75 on 64x64x16 tiles (M, N and K edges, 5 K tiles
    through 3 stages), three batch entries with A broadcast, D a column view whose other columns stay."""
    M, N, K = 70, 131, 75
    lda = _ld4(M) if layout[0] == "T" else _ld4(K)
    ldb = _ld4(K) if layout[1] == "T" else _ld4(N)
    out, ref = _run(_simt_spec(layout, epilogue), M, N, K, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=3,
                    lda=lda, ldb=ldb, ldd=N + 5)
    _assert_close(out, ref, "float32")


@pytest.mark.parametrize("tm,tn,tk,stages,rows", [(128, 128, 32, 2, 8), (64, 128, 16, 3, 8), (128, 128, 16, 3, 16),
                                                  (256, 128, 16, 3, 16)])
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_simt_large_tile_two_stages(layout, tm, tn, tk, stages, rows, request):
    """128x128x32 tiles (256 threads: 4 x 2 warps of 32x64 outputs), 2 stages, the small-grid default's 64x128x16 (128
    threads: 2 x 2 warps), 3 stages, and 16 x 8 outputs per thread (simt_rows 16: warps of 64x64 outputs) on the
    large-grid default's 128x128x16 (128 threads) and 256x128x16 (256 threads): one partial tile each way."""
    M, N, K = 150, 200, 100
    spec = _simt_spec(layout, tm=tm, tn=tn, tk=tk, stages=stages, simt_rows=rows)
    assert P.simt_threads(spec) == tm * tn // (8 * rows)
    out, ref = _run(spec, M, N, K, _rng(request), lda=_ld4(M) if layout[0] == "T" else _ld4(K),
                    ldb=_ld4(K) if layout[1] == "T" else _ld4(N))
    _assert_close(out, ref, "float32")


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("layout,tm,tn,over", [
    ("NN", 128, 128, {}), ("TN", 64, 128, {}), ("NT", 128, 128, dict(stream_k=2)),
    ("TT", 128, 64, dict(edge_copy=True))], ids=lambda v: str(v))
def test_simt_16_rows_on_cpu_fibers(layout, tm, tn, over, request):
    """16 x 8 outputs per thread (simt_rows 16) with the CUDA block size of fibers: each thread's own rows (four
    groups of 4, 16 apart) and columns, its 16-byte stage reads and its stores, on interior and edge tiles (M, N
    and K edges); stream-K's spill and add of 128 registers per thread; edge copies. A broadcast over two batch
    entries, alpha and beta * C, D a column view whose other columns stay; against float64."""
    spec = dataclasses.replace(_simt_spec(layout, "axpby", tm=tm, tn=tn, simt_rows=16, **over),
                               block_dim=tm * tn // 128)
    assert P.unfit(spec) == "" and spec.key.endswith("_r16") and P.simt_threads(spec) == spec.block_dim
    M, N, K = 2 * tm + 19, tn + 37, 3 * spec.tk + 7
    lda = _ld4(M) if layout[0] == "T" else _ld4(K)
    ldb = _ld4(K) if layout[1] == "T" else _ld4(N)
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, a_nb=1, b_nb=2, c_nb=2, lda=lda, ldb=ldb, ldd=N + 3,
                    fibers=True)
    _assert_close(out, ref, "float32")


@pytest.mark.parametrize("K", [0, 5])
@pytest.mark.parametrize("kernel", ["simt", "mma"])
def test_snippet_products_short_k(kernel, K, request):
    """The SIMT and mma.sync kernels at K == 0 (no K step: alpha * 0 + beta * C) and K under one K tile (the rest of
    the tile zero-filled); the SIMT one with a float16 output (the store's cast)."""
    spec, ld, out_dtype = ((_simt_spec(out_dtype="float16"), _ld4, "float16") if kernel == "simt" else
                           (_mma_spec(out_dtype="float32"), _ld8, "float32"))
    out, ref = _run(spec, 40, 70, K, _rng(request), lda=ld(K) if K else None, ldb=ld(70) if K else None,
                    chunk_check=K > 0)
    _assert_close(out, ref, out_dtype)


@pytest.mark.parametrize("over,match", [
    (dict(in_dtype="float16", out_dtype="float16", pad_ab=8), "exact float32"),
    (dict(tf32=True), "exact float32"),
    (dict(tm=48), "multiple of 32"),
    (dict(tn=96), "tn of 64"),
    (dict(block_dim=128), "block_dim 64"),
    (dict(pad_c=8), "registers"),
    (dict(bias=True), "registers"),
    (dict(chunk=8), "16-byte words"),
    (dict(simt_rows=12), "rows of outputs per thread"),
    (dict(simt_rows=16, tm=32), "multiple of 64")])
def test_simt_refusals_name_the_reason(over, match):
    """Specs the SIMT kernel cannot run are refused before any compile, with the reason."""
    import dataclasses

    _assert_refused(dataclasses.replace(_simt_spec(), **over), match)


def test_simt_forced_through_the_api_on_cpu(planned, request):
    """``options(family="pipelined", pipe_config=".../simt")`` plans the SIMT kernel (padded A/B rows, register
    accumulator) through the public call path; the CPU twin computes it."""
    import warp_gemm

    rng = _rng(request)
    a, b = random_operands(70, 131, 75, "float32", rng, batch=2)
    out = wp.array(np.full((2, 70, 131), np.nan, np.float32), device="cpu")
    B = wp.array(np.ascontiguousarray(np.swapaxes(b, 1, 2)).astype(np.float32), device="cpu").transpose((0, 2, 1))
    with warp_gemm.options(family="pipelined", cpu_backend="tiles", pipe_config="pipe/64x64x16/s3/b64/o0/simt"):
        warp_gemm.gemm(wp.array(a.astype(np.float32), device="cpu"), B, alpha=1.5, out=out)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.simt and spec.pad_ab == 4 and spec.pad_c == 0, spec
    assert spec.layout_b == "T" and spec.block_dim == 1
    _assert_close(out.numpy().astype(np.float64), 1.5 * np.matmul(a, b), "float32")


def _cuda_like_problem(monkeypatch, n: int, np_dtype):
    """``validate``'s problem for an n x n by n x n product with B stored (N, K), its operands claiming a CUDA-like
    device (conftest.CudaLike): what the planner sees on a GPU, for pure arithmetic (nothing is launched)."""
    from conftest import cuda_like_problem

    return cuda_like_problem(monkeypatch, np.zeros((n, n), np_dtype), np.zeros((n, n), np_dtype), trans_b=True)


@pytest.mark.parametrize("cfg,family,want", [
    ("pipe/128x128x16/s3/b256/o2/simt", "pipelined", "simt"),
    (None, "pipelined", "simt-default"),  # the family forced: its exact-fp32 default is the SIMT kernel
    (None, None, "simt-default"),  # the default: the same (every size, on CUDA)
    ("pipe/128x128x16/s3/b256/o2/simt", None, "simt"),  # the family's rules take it: the configuration applies
    (None, "tiled", "tiled")])
def test_simt_planned_on_a_cuda_like_device(monkeypatch, cfg, family, want):
    """The planner on a CUDA-like device (pure arithmetic, nothing launched), exact float32 1024^3 with B stored
    (N, K): the SIMT kernel by default (128 tiles of 64x128 on 132 SMs: stream-K over three blocks per SM), the
    configuration where given, with its 256 threads and the fp32 row padding."""
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    if _compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7: no pipelined family")
    p = _cuda_like_problem(monkeypatch, 1024, np.float32)

    pc = PipeConfig.parse(cfg) if cfg else None
    plan = make_plan(p, 1.0, 0.0, False, None, Options(family=family, pipe_config=pc))
    if want == "simt":
        spec = plan.family_spec
        assert plan.family == "pipelined" and spec.simt and spec.layout_b == "T", plan.family
        assert (spec.block_dim, spec.pad_ab, spec.pad_c, spec.tk, spec.simt_rows) == (256, 4, 0, 16, 8)
    elif want == "simt-default":
        spec = plan.family_spec
        assert plan.family == "pipelined" and spec.simt and (spec.tm, spec.tn, spec.tk, spec.block_dim, spec.stream_k) \
            == (64, 128, 16, 128, 3), spec
    else:
        assert plan.family == want


def test_snippet_defaults_for_large_problems_on_cuda(monkeypatch):
    """The defaults on CUDA (H100 measurements in default_spec): large 16-bit problems take the mma.sync kernel
    (128x128x64, 3 stages, 4 warps), tf32 the tf32 one (128x128x32, two blocks per SM), exact fp32 the SIMT kernel
    (64x128x16, 128 threads of 8 x 8 outputs) and float64 the DMMA kernel (128x64x16, m16n8k8) at every size (their small-grid tiles
    below); fused activations and the CPU keep tile_matmul's kernels; and the planner follows (a CUDA-like device).
    16-bit small grids: test_snippet_defaults_for_small_grids."""
    from warp_gemm.families.pipelined import rules as _plan
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    big = dict(M=4096, N=4096, K=4096)
    s16 = P.default_spec("float16", **big)
    assert (s16.tm, s16.tn, s16.tk, s16.stages, s16.block_dim, s16.mma, s16.pad_ab, s16.pad_c) == \
        (128, 128, 64, 3, 128, 4, 8, 0)
    assert P.default_spec("bfloat16", layout="TN", **big).mma == 4
    if _compat.HAS_TF32:
        s32 = P.default_spec("float32", tf32=True, **big)
        assert (s32.tk, s32.stages, s32.min_blocks, s32.mma, s32.pad_ab, s32.pad_c) == (32, 3, 2, 4, 4, 0)
    sx = P.default_spec("float32", layout="TN", **big)
    assert sx.simt and (sx.tm, sx.tn, sx.tk, sx.block_dim, sx.min_blocks, sx.simt_rows) == (64, 128, 16, 128, 3, 8)
    sx = P.default_spec("float32", layout="NT", **big)
    assert sx.simt and (sx.tm, sx.tn, sx.tk, sx.block_dim, sx.min_blocks, sx.simt_rows) == (128, 128, 16, 128, 2, 16)
    sd = P.default_spec("float64", layout="TN", **big)
    assert (sd.tm, sd.tn, sd.tk, sd.stages, sd.block_dim, sd.min_blocks, sd.mma, sd.mma_k, sd.pad_ab, sd.pad_c,
            sd.swizzle, sd.interleave, sd.edge_copy) == (128, 64, 32, 2, 128, 2, 4, 16, 0, 0, True, True, False)
    # TT keeps 16-deep K tiles on 4 stages, m16n8k8, not interleaved; tiles crossing an edge: edge copies (not TT)
    st = P.default_spec("float64", layout="TT", **big)
    assert (st.tk, st.stages, st.mma_k, st.swizzle, st.interleave, st.edge_copy) == (16, 4, 8, True, False, False)
    assert P.default_spec("float64", M=4095, N=4095, K=4095).edge_copy
    assert P.default_spec("float64", M=4096, N=4096, K=4080).edge_copy  # K alone crosses an edge
    assert not P.default_spec("float64", layout="TT", M=4095, N=4095, K=4095).edge_copy
    assert not P.default_spec("float64").edge_copy and not P.default_spec("float32", M=4095, N=4095, K=4095).edge_copy
    for spec in (sd, st):
        assert 2 * (P.smem_bytes(spec) + 1024) <= 228 * 1024  # two blocks per SM (1 KiB reserved each)
    small = {d: P.default_spec(d, M=1000, N=1000, K=1000) for d in ("float32", "float64")}
    assert small["float32"].simt and small["float32"].stream_k == 3 and small["float32"].tn == 128
    assert (small["float32"].tm, small["float32"].block_dim, small["float32"].simt_rows) == (64, 128, 8)
    assert small["float32"].edge_copy and not P.default_spec("float32", M=1024, N=1024, K=1024).edge_copy
    assert (small["float64"].tm, small["float64"].tn, small["float64"].tk, small["float64"].mma_k) == (64, 64, 16, 8)
    assert (small["float64"].stream_k, small["float64"].min_blocks, small["float64"].block_dim) == (3, 3, 128)
    assert (small["float64"].stages, small["float64"].pad_ab, small["float64"].swizzle) == (3, 4, False)
    assert small["float64"].interleave and small["float64"].edge_copy
    assert not P.default_spec("float64", M=1024, N=1024, K=1024).edge_copy
    assert (tiny_f64 := P.default_spec("float64", M=256, N=256, K=4096)).pad_ab == 4 and not tiny_f64.swizzle
    assert not P.default_spec("float64", M=4096, N=4096, K=4096).stream_k
    tiny = {d: P.default_spec(d, M=33, N=17, K=65) for d in ("float32", "float64")}
    assert tiny["float32"].simt and (tiny["float32"].tm, tiny["float32"].tn, tiny["float32"].stream_k) == (32, 64, 0)
    assert tiny["float32"].simt_rows == 8 and tiny["float32"].block_dim == 32
    assert tiny["float64"].mma == 2 and (tiny["float64"].tm, tiny["float64"].tn, tiny["float64"].stream_k) == (64, 32, 0)
    for spec in (P.default_spec("float16", activation="relu", **big), P.default_spec("float16", device_is_cpu=True),
                 P.default_spec("float32", activation="relu", **big), P.default_spec("float64", activation="relu", **big),
                 P.default_spec("float64", device_is_cpu=True)):
        assert not spec.mma and not spec.simt and not spec.mma_k, spec
    for spec in (s16, sx, sd, *small.values(), *tiny.values()):
        assert P.unfit(spec) == ""
    if _compat.WIDEN_16BIT_INPUTS:
        return
    plan = make_plan(_cuda_like_problem(monkeypatch, 4096, np.float32), 1.0, 0.0, False, None, Options())
    assert plan.family == "pipelined" and plan.family_spec.simt and plan.family_spec.layout_b == "T"
    for n, dt in ((1024, np.float32), (64, np.float32), (64, np.float64), (1024, np.float64), (4096, np.float64)):
        plan = make_plan(_cuda_like_problem(monkeypatch, n, dt), 1.0, 0.0, False, None, Options())
        spec = plan.family_spec
        assert plan.family == "pipelined" and (spec.simt if dt == np.float32 else spec.mma), (n, dt, plan.family)
        assert _plan.pipelined_min_tiles(spec.in_dtype, min(n, 2048), True) == 1
    # a few output tiles with a long K keep the tiled family's split-K (the 16-bit rule's K limit)
    from conftest import cuda_like_problem

    assert _plan.pipelined_min_tiles("float64", 4096, True) == _plan.PIPELINED_MIN_TILES["other"] > 1
    for dt in (np.float32, np.float64):
        long_k = cuda_like_problem(monkeypatch, np.zeros((64, 4096), dt), np.zeros((4096, 64), dt))
        assert make_plan(long_k, 1.0, 0.0, False, None, Options()).family == "tiled", dt
        short_k = cuda_like_problem(monkeypatch, np.zeros((64, 2048), dt), np.zeros((2048, 64), dt))
        assert make_plan(short_k, 1.0, 0.0, False, None, Options()).family == "pipelined", dt
    # (the pipelined family's; on sm_90 the Hopper family takes this product unless switched off)
    assert make_plan(_cuda_like_problem(monkeypatch, 4096, np.float16), 1.0, 0.0, False, None,
                     Options(hopper=False)).family_spec.mma == 4
    set_options(monkeypatch, pipe_snippets=False)
    assert make_plan(_cuda_like_problem(monkeypatch, 4096, np.float32), 1.0, 0.0, False, None, Options()).family \
        == "tiled"
    off = make_plan(_cuda_like_problem(monkeypatch, 4096, np.float64), 1.0, 0.0, False, None, Options())
    assert off.family == "pipelined" and not off.family_spec.mma and off.family_spec.pad_c == 4  # tile_matmul
    assert make_plan(_cuda_like_problem(monkeypatch, 64, np.float64), 1.0, 0.0, False, None, Options()).family \
        == "tiled"


def test_snippet_defaults_for_small_grids(monkeypatch):
    """With the snippets on CUDA, no 16-bit or tf32 grid takes a tile_matmul kernel (21-25 s cold compile, H100):
    16-bit 64x64x64 s3 o4 tiles where 128x64 tiles fit one wave or fill under half the SMs, or 96-row tiles would
    replace one wave of 128x128 tiles; 128x128x32 s4 o2 for short K; 32x32 tiles in 2 warps for outputs up to 32x32
    (64-deep K past 32); 1536^3 (narrow, two waves) the large tiles; tf32 64x64x32 on small grids and 32x32x32 on
    tiny outputs. The planner sends tf32 products of 1-23 output tiles (K <= 2048) to the family, not to the tiled
    family's tile_matmul kernel; every default fits (``unfit``)."""
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    def fields(s):
        return (s.tm, s.tn, s.tk, s.stages, s.block_dim, s.min_blocks, s.mma, s.pad_c)

    mid = (64, 64, 64, 3, 128, 4, 4, 0)
    cases16 = {
        (1000, 1000, 1000, 1): mid, (1023, 1025, 1027, 1): mid, (256, 2048, 2048, 1): mid, (64, 64, 64, 1): mid,
        (127, 4099, 1031, 1): mid, (1024, 1024, 4096, 1): mid,
        (1536, 1536, 1536, 1): (128, 128, 64, 3, 128, 1, 4, 0), (2048, 1024, 1024, 1): (128, 128, 64, 3, 128, 1, 4, 0),
        (8192, 8192, 256, 1): (128, 128, 32, 4, 128, 2, 4, 0), (256, 256, 256, 64): (128, 128, 32, 4, 128, 2, 4, 0),
        (32, 32, 32, 4096): (32, 32, 32, 2, 64, 0, 2, 0), (24, 30, 100, 4096): (32, 32, 64, 2, 64, 0, 2, 0),
    }
    for (M, N, K, b), want in cases16.items():
        for dt in ("float16", "bfloat16"):
            spec = P.default_spec(dt, M=M, N=N, K=K, batch=b)
            assert fields(spec) == want and P.unfit(spec) == "", (dt, M, N, K, b, spec)
    if _compat.HAS_TF32:
        cases32 = {(64, 64, 64, 1): (64, 64, 32, 3, 128, 4, 4, 0), (1000, 1000, 1000, 1): (64, 64, 32, 3, 128, 4, 4, 0),
                   (16, 16, 16, 1000): (32, 32, 32, 2, 64, 0, 2, 0), (4096, 4096, 4096, 1): (128, 128, 32, 3, 128, 2, 4, 0)}
        for (M, N, K, b), want in cases32.items():
            for lay in ("NN", "NT", "TN", "TT"):
                spec = P.default_spec("float32", tf32=True, layout=lay, M=M, N=N, K=K, batch=b)
                assert fields(spec) == want and P.unfit(spec) == "", (lay, M, N, K, b, spec)
    set_options(monkeypatch, pipe_snippets=False)  # tile_matmul's configurations stay behind the option
    assert not P.default_spec("float16", M=1000, N=1000, K=1000).mma
    assert not P.default_spec("float16", M=32, N=32, K=32, batch=4096).mma
    if _compat.WIDEN_16BIT_INPUTS or not _compat.HAS_TF32:
        return
    set_options(monkeypatch, pipe_snippets=True)
    plan = make_plan(_cuda_like_problem(monkeypatch, 64, np.float32), 1.0, 0.0, True, None, Options())
    assert plan.family == "pipelined" and plan.family_spec.tf32 and plan.family_spec.mma, plan.family
    set_options(monkeypatch, pipe_snippets=False)
    assert make_plan(_cuda_like_problem(monkeypatch, 64, np.float32), 1.0, 0.0, True, None, Options()).family == "tiled"


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("rows", [8, 16])
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_simt_cuda_build_offline(layout, rows, tmp_path):
    """The SIMT kernel (128x128x16, 3 stages; 8 x 8 outputs per thread on 256 threads, or 16 x 8 on 128) compiles for
    sm_90 offline, and its PTX keeps the accumulator in registers (no local memory, no calls) and reads every stage
    value from shared memory in 16-byte words: rows / 4 + 2 per k (rows of A, 8 of B)."""
    import re

    spec = P.default_spec("float32", layout=layout, epilogue="axpby", tm=128, tn=128, tk=16, stages=3,
                          block_dim=128 * 128 // (8 * rows), min_blocks=2, pad_ab=4, pad_c=0, simt=True, simt_rows=rows)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert ".local" not in ptx and not re.search(r"\bcall", ptx)
    assert len(re.findall(r"ld\.shared\.v4\.f32", ptx)) == (rows // 4 + 2) * spec.tk
    assert len(re.findall(r"fma\.rn\.f32", ptx)) >= 8 * rows * spec.tk


@pytest.mark.gpu
@pytest.mark.parametrize("layout,cfg", [
    ("NN", "pipe/64x128x16/s3/b128/o3/simt"), ("NT", "pipe/128x128x32/s2/b256/o2/simt"),
    ("TN", "pipe/128x64x16/s4/b128/o3/simt"), ("TT", "pipe/64x64x32/s3/b64/o0/simt"),
    ("NN", "pipe/128x128x16/s3/b128/o2/simt"), ("TT", "pipe/64x128x16/s3/b64/o4/simt"),
    ("NN", "pipe/128x256x16/s3/b256/o1/simt"), ("NT", "pipe/64x256x16/s3/b128/o2/simt")], ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_simt_forced_on_cuda(layout, cfg, epilogue, planned, request):
    """The SIMT kernel forced through the API on CUDA in each layout: two batch entries of 1000x1000 (M and N
    edges), K 520 (a partial K tile), alpha and beta * C; the configurations of b128 on 128x128 and b64 on 64x128 keep
    16 x 8 outputs per thread (simt_rows 16)."""
    _forced_on_cuda("float32", layout, cfg, epilogue, request)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.simt and spec.layout_a + spec.layout_b == layout, spec
    assert spec.simt_rows == spec.tm * spec.tn // (8 * spec.block_dim), spec


# --- 16-bit inputs on tensor cores through mma.sync (spec.mma) ------------------------------------------------------
MMA_DTYPES = ["float16"] + (["bfloat16"] if _compat.HAS_BF16 else []) + (["tf32"] if _compat.HAS_TF32 else [])


def _mma_spec(dtype="float16", layout="NN", epilogue="axpby", tm=64, tn=64, tk=32, stages=3, mma=4, **over):
    """An mma.sync spec for the CPU twin; ``dtype`` "tf32": float32 inputs through tf32 MMAs (m16n8k8)."""
    tf32 = dtype == "tf32"
    return _spec("float32" if tf32 else dtype, layout=layout, epilogue=epilogue, tf32=tf32, tm=tm, tn=tn, tk=tk,
                 stages=stages, pad_ab=4 if tf32 or dtype == "float64" else 8, pad_c=0, mma=mma, **over)


def _ld8(n: int) -> int:
    return -(-n // 8) * 8


@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", MMA_DTYPES)
def test_mma_layouts_and_edges(dtype, layout, epilogue, request):
    """The mma.sync kernel (ldmatrix fragments, m16n8k16 MMAs -- tf32: m16n8k8, operands stored with k across rows
    read by 32-bit loads --, float32 sums in registers): on the CPU twin each output sums the values that its lanes'
    fragment addresses and the PTX fragment layouts deliver, so the addressing of every layout (.trans or not) is
    checked. 70x131x75 on 64x64x32 tiles of 4 warps (M, N and K edges, 3 K tiles through 3 stages), three batch
    entries with A broadcast, D a column view whose other columns stay."""
    M, N, K = 70, 131, 75
    lda = _ld8(M) if layout[0] == "T" else _ld8(K)
    ldb = _ld8(K) if layout[1] == "T" else _ld8(N)
    spec = _mma_spec(dtype, layout, epilogue, out_dtype="float32")
    assert spec.transposing_copies() == (False, False)
    assert spec.scalar_fragments() == ((layout[0] == "T", layout[1] == "N") if dtype == "tf32" else (False, False))
    out, ref = _run(spec, M, N, K, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=3, lda=lda, ldb=ldb, ldd=N + 5)
    _assert_close(out, ref, "float32", tf32=dtype == "tf32")


@pytest.mark.parametrize("dtype,tm,tn,tk,mma,warps", [
    ("float16", 128, 128, 64, 8, (2, 4)), ("float16", 64, 128, 32, 2, (1, 2)), ("float16", 32, 64, 16, 1, (1, 1)),
    ("float16", 128, 64, 32, 8, (4, 2)), ("float16", 128, 128, 32, 4, (2, 2)), ("float16", 128, 256, 32, 8, (2, 4)),
    ("float16", 64, 64, 64, 4, (2, 2)), ("float16", 32, 32, 32, 2, (1, 2)), ("float16", 32, 32, 64, 2, (1, 2))] +
    ([("tf32", 128, 128, 32, 8, (2, 4)), ("tf32", 64, 64, 32, 4, (2, 2)), ("tf32", 32, 32, 32, 2, (1, 2))]
     if _compat.HAS_TF32 else []), ids=lambda v: str(v))
def test_mma_warp_splits(dtype, tm, tn, tk, mma, warps, request):
    """Other warp splits (mma_warps: the squarest warp tiles, ties to the taller), the output's cast to the input
    dtype, and two partial tiles each way: 8 warps of 64x32, 2 of 64x64, one warp of 32x64 (with 16-deep K tiles), 8
    of 32x32, and the probes' main candidates: 4 warps of 64x64 (128x128), 8 of 64x64 (128x256), tf32 8 of 64x32; the
    small-grid defaults: 4 warps of 32x32 (64x64, tf32 too) and 2 of 32x16 (32x32, tf32 too)."""
    spec = _mma_spec(dtype, "NT", "axpby", tm=tm, tn=tn, tk=tk, stages=2, mma=mma,
                     out_dtype="float32" if dtype == "tf32" else dtype)
    assert P.mma_warps(spec) == warps
    M, N, K = tm + 13, tn + 21, 2 * tk + 40
    out, ref = _run(spec, M, N, K, _rng(request), lda=_ld8(K), ldb=_ld8(K))
    _assert_close(out, ref, "float32" if dtype == "tf32" else dtype, tf32=dtype == "tf32")


# --- stream-K (spec.stream_k; the exact-fp32 and fp64 default where 128x64 tiles fit one wave) -----------------
# (M, N, K, batch, stream_k) on 64x64x32 mma tiles / 64x64x16 SIMT tiles, the CPU counting 4 SMs: the grid is
# stream_k * 4 blocks, at most one per K step. 70x131x75 x3: 18 tiles over 4 blocks (3 whole waves, then 6 tiles
# shared: runs end inside tiles, deferred finisher runs); over 32 blocks (one or two K steps each: tiles of up to 3
# blocks, middle contributors); 60x50x300: one tile of 10 K steps over 8 blocks (a finisher with 7 contributors);
# 130x64x64 x2: the K steps over 8 blocks, one or two each; 130x128x75 x2: 12 tiles over 4 blocks, whole waves only.
def _own_case(kind, layout, epilogue, M, N, K, **over):
    """A register-accumulator spec (``kind``: "float16"/"tf32" mma.sync, "float64" DMMA with m16n8k8 on sm_90, "simt"),
    float32 output (float64: float64), with ``over``, and the 16-byte-aligned row strides (lda, ldb) of its M x K by
    K x N operands in ``layout``."""
    if kind == "simt":
        spec, ld = _simt_spec(layout, epilogue, **over), _ld4
    elif kind == "float64":
        spec, ld = _mma_spec(kind, layout, epilogue, out_dtype="float64", mma_k=8, **over), _ld8
    else:
        spec, ld = _mma_spec(kind, layout, epilogue, out_dtype="float32", **over), _ld8
    return spec, ld(M) if layout[0] == "T" else ld(K), ld(K) if layout[1] == "T" else ld(N)


SK_CASES = [(70, 131, 75, 3, 1), (70, 131, 75, 3, 8), (60, 50, 300, 1, 2), (130, 64, 64, 2, 2), (130, 128, 75, 2, 1)]


@pytest.mark.parametrize("case", SK_CASES, ids=lambda c: "M{}-N{}-K{}-b{}-k{}".format(*c))
@pytest.mark.parametrize("layout,epilogue", [("NN", "axpby"), ("TT", "scale"), ("NT", "axpby")])
@pytest.mark.parametrize("kind", ["float16", "tf32", "simt", "float64"])
def test_stream_k_on_cpu(kind, layout, epilogue, case, request):
    """The stream-K kernel (whole waves of tiles one per block, then the last tiles' K steps shared evenly by the
    fixed grid; a tile split across blocks summed by its finisher from the contributors' flagged workspace slots in
    block order): on the CPU twin blocks run in index order, so each flag a finisher waits for is set (a missing one
    turns its sums NaN). NaN-prefilled output and workspace, batch broadcast of A, C, A and B column views of wider
    arrays, D a column view whose other columns stay, every flag zero after the launch (checked in _run)."""
    if kind == "tf32" and not _compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    M, N, K, batch, sk = case
    spec, lda, ldb = _own_case(kind, layout, epilogue, M, N, K, stream_k=sk)
    grid, _, _ = P.stream_k_sizes(spec, M, N, K, batch, wp.get_device("cpu"))
    total = batch * -(-M // spec.tm) * -(-N // spec.tn) * -(-K // spec.tk)
    assert grid == min(total, 4 * sk) and "_sk" in spec.key
    out, ref = _run(spec, M, N, K, _rng(request), batch=batch, a_nb=1, b_nb=batch, c_nb=batch, lda=lda, ldb=ldb,
                    ldd=N + 3)
    _assert_close(out, ref, spec.out_dtype, tf32=kind == "tf32")


@pytest.mark.parametrize("tiles,grid,dp", [(18, 4, 12), (12, 4, 12), (7, 4, 0), (6, 8, 0), (9, 4, 4),
                                           (2048, 264, 1584), (2048, 396, 1584), (128, 264, 0)])
def test_stream_k_dp_tiles(tiles, grid, dp):
    """The tiles a stream-K grid runs whole: every full wave but the last where a partial wave follows (that one and
    the partial one are shared), all of them in whole waves, none under two waves."""
    assert P.stream_k_dp_tiles(tiles, grid) == dp
    assert dp % grid == 0 and (dp == tiles or tiles - dp >= grid or dp == 0)


@pytest.mark.parametrize("kind,stages,per", [("float16", 6, 0), ("float16", 8, 1), ("simt", 5, 0), ("tile", 8, 0)])
@pytest.mark.parametrize("K", [40, 300])
def test_deep_stages_on_cpu(kind, stages, per, K, request):
    """5-8 stages (round 15; 2-4 before): fewer K tiles than stages (K 40: empty prologue groups) and more (K 300),
    on the mma.sync, SIMT and tile_matmul kernels and a persistent mma.sync grid, against float64."""
    M, N = 70, 131
    if kind == "simt":
        spec, ld = _simt_spec("NN", "axpby", stages=stages), _ld4
    elif kind == "tile":
        spec, ld = _spec("float16", tm=32, tn=32, tk=16, stages=stages, pad_ab=8, pad_c=8), _ld8
    else:
        spec, ld = _mma_spec(kind, "NT", "axpby", tk=16, stages=stages, persistent=per, out_dtype="float32"), _ld8
    assert spec.stages == stages and P.smem_bytes(spec) <= P.SMEM_LIMIT
    lda = ld(K)
    ldb = ld(K) if spec.layout_b == "T" else ld(N)
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, b_nb=2, lda=lda, ldb=ldb)
    _assert_close(out, ref, "float32" if kind != "tile" else "float16")


# --- persistent simt/mma blocks (spec.persistent with a register accumulator; not a default, round 15) ------------
# (M, N, K, batch, persistent) on 64x64x32 mma / 64x64x16 SIMT tiles, the CPU counting 4 SMs: 70x131x75 x3 is 18
# tiles of 3 K steps (the last partial) over 4 blocks (4-5 tiles each) or 8; 130x64x20 x2: 6 tiles of one K step,
# every step a tile's last (store and zero each step); 60x50x300: one tile over a grid of 4 (3 blocks idle).
PERSIST_OWN_CASES = [(70, 131, 75, 3, 1), (70, 131, 75, 3, 2), (130, 64, 20, 2, 1), (60, 50, 300, 1, 1)]


@pytest.mark.parametrize("case", PERSIST_OWN_CASES, ids=lambda c: "M{}-N{}-K{}-b{}-p{}".format(*c))
@pytest.mark.parametrize("layout,epilogue", [("NN", "axpby"), ("TT", "scale"), ("NT", "axpby")])
@pytest.mark.parametrize("kind", ["float16", "tf32", "simt", "float64"])
def test_persistent_own_on_cpu(kind, layout, epilogue, case, request):
    """Persistent simt/mma blocks (each block loops over the output tiles g, g + grid, ... with its copies running
    ahead across them; the register accumulator stored by the kernel's own store and re-zeroed after each tile's last
    K step): NaN-prefilled output, batch broadcast of A, M/N/K edges, against float64."""
    if kind == "tf32" and not _compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    M, N, K, batch, per = case
    spec, lda, ldb = _own_case(kind, layout, epilogue, M, N, K, persistent=per)
    assert "_per" in spec.key and P.unfit(spec) == ""
    out, ref = _run(spec, M, N, K, _rng(request), batch=batch, a_nb=1, b_nb=batch, c_nb=batch, lda=lda, ldb=ldb)
    _assert_close(out, ref, spec.out_dtype, tf32=kind == "tf32")
    k, dim, _, _ = P.launch_args(spec, *_zeros_operands(M, N, K, batch, spec), 1.0, 0.0, M, N, K, batch, 1, 1, 1)
    tiles = batch * -(-M // spec.tm) * -(-N // spec.tn)
    assert dim == (1, min(tiles, 4 * per))


def _zeros_operands(M, N, K, batch, spec):
    dt = WP_DTYPES[spec.in_dtype]
    return (wp.zeros((1, M, K), dtype=dt, device="cpu"), wp.zeros((batch, K, N), dtype=dt, device="cpu"), None,
            wp.zeros((batch, M, N), dtype=WP_DTYPES[spec.out_dtype], device="cpu"))


@pytest.mark.parametrize("cfg", ["pipe/64x64x32/s3/b128/o1/p1/mma", "pipe/64x64x16/s4/b64/o1/p2/simt"])
def test_persistent_own_forced_through_the_api_on_cpu(cfg, planned, request):
    """options(pipe_config=".../pN/mma|simt") through the call path on the CPU: planned as the persistent register-
    accumulator kernel, correct against float64 with a NaN-prefilled output, K == 0 included (the one-tile-per-block
    kernel then stores beta * C)."""
    import warp_gemm
    from conftest import make, nan_like, to_f64

    dtype = "float32" if "simt" in cfg else "float16"
    rng = _rng(request)
    for M, N, K in [(97, 70, 150), (130, 140, 33)]:
        a, b = random_operands(M, N, K, dtype, rng, batch=2)
        out = nan_like("warp", (2, M, N), dtype, "cpu")
        with warp_gemm.options(family="pipelined", pipe_config=cfg):
            warp_gemm.matmul(make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"), out=out)
        _assert_close(to_f64(out), np.matmul(a, b), dtype)
    assert planned and all(p.family == "pipelined" and p.family_spec.persistent for p in planned), planned
    assert all(p.family_spec.mma or p.family_spec.simt for p in planned)


@pytest.mark.parametrize("cfg", ["pipe/64x64x32/s3/b128/o1/k2/mma", "pipe/64x64x16/s3/b64/o1/k3/simt"])
def test_stream_k_forced_through_the_api_on_cpu(cfg, planned, request):
    """options(pipe_config=".../kN/...") through the call path on the CPU: the plan is the stream-K kernel, its
    workspace and flags come from the executor's caches (the second and third calls reuse them: each launch must
    leave the flags zero), and every call is correct against float64 with a NaN-prefilled output."""
    import warp_gemm
    from conftest import make, nan_like, to_f64

    dtype = "float32" if "simt" in cfg else "float16"
    rng = _rng(request)
    for call in range(3):
        M, N, K, batch = 97 + call, 70, 150 + 40 * call, 2
        a, b = random_operands(M, N, K, dtype, rng, batch=batch)
        out = nan_like("warp", (batch, M, N), dtype, "cpu")
        with warp_gemm.options(family="pipelined", pipe_config=cfg):
            warp_gemm.matmul(make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"), out=out)
        _assert_close(to_f64(out), np.matmul(a, b), dtype)
    assert planned and all(p.family == "pipelined" and p.family_spec.stream_k for p in planned), planned


def test_stream_k_falls_back_and_refuses():
    """K == 0 takes the one-tile-per-block kernel (beta * C only); a tile_matmul or persistent spec is refused; a
    launch without its workspace names what it needs."""
    from warp_gemm.config.configs import PipeConfig

    spec = _mma_spec("float16", stream_k=1)
    assert P.stream_k_sizes(spec, 64, 64, 0, 1, wp.get_device("cpu")) == (0, 0, 0)
    with pytest.raises(ValueError, match="stream-K"):
        P.get_kernel(_spec("float16", stream_k=1))
    A = wp.zeros((1, 64, 64), dtype=wp.float16, device="cpu")
    with pytest.raises(ValueError, match="stream-K needs a workspace"):
        P.launch_args(spec, A, A, None, wp.zeros((1, 64, 64), dtype=wp.float32, device="cpu"), 1.0, 0.0, 64, 64, 64,
                      1, 1, 1, 1)
    with pytest.raises(ValueError, match="stream-K"):
        PipeConfig.parse("pipe/128x128x64/s3/b128/o1/k1")  # tile_matmul: no register accumulator
    assert str(PipeConfig.parse("pipe/128x128x64/s3/b128/o1/k2/mma")) == "pipe/128x128x64/s3/b128/o1/k2/mma"


@pytest.mark.parametrize("over,match", [
    (dict(in_dtype="float32", out_dtype="float32", pad_ab=4), "float16, bfloat16, tf32 and float64"),
    (dict(simt=True), "give one"),
    (dict(tm=40), "warp tiles"),
    (dict(mma=3), "warp tiles"),
    (dict(tk=24), "16-deep"),
    (dict(block_dim=64), "block_dim 128"),
    (dict(pad_c=8), "registers"),
    (dict(bias=True), "registers"),
    (dict(chunk=8), "16-byte rows"),
    (dict(pad_ab=4), "16-byte")])
def test_mma_refusals_name_the_reason(over, match):
    """Specs the mma.sync kernel cannot run are refused before any compile, with the reason."""
    import dataclasses

    _assert_refused(dataclasses.replace(_mma_spec(), **over), match)


def test_mma_config_text():
    """``/mma`` is a bare flag of the pipelined configuration; its warps are block_dim / 32; it excludes simt; it takes
    persistent blocks (round 15), which exclude stream-K and wgmma."""
    from warp_gemm.config.configs import PipeConfig

    pc = PipeConfig.parse("pipe/128x128x32/mma/s3/b128/o2")
    assert pc.mma and not pc.simt and str(pc) == "pipe/128x128x32/s3/b128/o2/mma"
    assert PipeConfig.parse(str(pc)) == pc and pc.fields()["mma"] == 4
    assert PipeConfig.parse("pipe/128x128x32/s3").fields()["mma"] == 0
    assert str(PipeConfig.parse("pipe/128x128x32/p2/mma/s3/b128")) == "pipe/128x128x32/s3/b128/o0/p2/mma"
    for bad, match in [("pipe/128x128x32/mma/mma", "mma given twice"), ("pipe/128x128x32/mma/simt", "give one"),
                       ("pipe/128x128x32/mma/p1/k1", "different grids"), ("pipe/128x64x64/wgmma/p1", "no persistent")]:
        with pytest.raises(ValueError, match=match):
            PipeConfig.parse(bad)


def test_mma_forced_through_the_api_on_cpu(planned, request):
    """``options(family="pipelined", pipe_config=".../mma")`` plans the mma.sync kernel (16-byte padded A/B rows,
    register accumulator, the configuration's warps) through the public call path; the CPU twin computes it."""
    import warp_gemm

    rng = _rng(request)
    a, b = random_operands(70, 131, 75, "float16", rng, batch=2)
    out = wp.array(np.full((2, 70, 131), np.nan, np.float32), device="cpu")
    B = wp.array(np.ascontiguousarray(np.swapaxes(b, 1, 2)).astype(np.float16), device="cpu").transpose((0, 2, 1))
    with warp_gemm.options(family="pipelined", cpu_backend="tiles", pipe_config="pipe/64x64x32/s3/b128/o0/mma"):
        warp_gemm.gemm(wp.array(a.astype(np.float16), device="cpu"), B, alpha=1.5, out=out)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.mma == 4 and spec.pad_ab == 8 and spec.pad_c == 0, spec
    assert spec.layout_b == "T" and spec.block_dim == 1
    _assert_close(out.numpy().astype(np.float64), 1.5 * np.matmul(a, b), "float32")


@pytest.mark.parametrize("dtype,n,cfg,warps", [("float16", 1024, "pipe/128x128x32/s3/b128/o2/mma", 4),
                                               ("float16", 4095, "pipe/128x256x32/s3/b256/o1/mma", 8),
                                               ("tf32", 4095, "pipe/128x64x32/s4/b128/o3/mma", 4)])
def test_mma_planned_on_a_cuda_like_device(monkeypatch, dtype, n, cfg, warps):
    """The planner on a CUDA-like device (pure arithmetic, nothing launched), n^3 with B stored (N, K): the forced
    mma.sync configuration keeps its block size and warps, 16-byte row padding and a register accumulator; 4095^3
    stages both operands into 16-byte rows as for the default kernel."""
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    if _compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7: no pipelined family")
    tf32 = dtype == "tf32"
    if tf32 and not _compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    p = _cuda_like_problem(monkeypatch, n, np.float32 if tf32 else np.float16)
    plan = make_plan(p, 1.0, 0.0, tf32, None, Options(family="pipelined", pipe_config=PipeConfig.parse(cfg)))
    spec = plan.family_spec
    assert plan.family == "pipelined" and spec.mma == warps and spec.layout_b == "T" and spec.tf32 == tf32, plan
    assert (spec.block_dim, spec.pad_ab, spec.pad_c) == (32 * warps, 4 if tf32 else 8, 0)
    assert tuple(plan.stage) == ((True, True) if n % 8 else (False, False))


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,layout", [("float16", "NN"), ("float16", "TT")] +
                         ([("bfloat16", "NT")] if _compat.HAS_BF16 else []) +
                         ([("tf32", "TN"), ("tf32", "NT")] if _compat.HAS_TF32 else []))
def test_mma_cuda_build_offline(dtype, layout, tmp_path):
    """The mma.sync kernel (128x128x32, 4 warps, 3 stages) compiles for sm_90 offline, and its PTX keeps the
    accumulator in registers (no local memory, no calls) with, per K tile of 32 and k step of 16 (tf32: 8), 4 + 4
    ldmatrix x4 (.trans for 16-bit A of layout T and B of layout N; tf32 operands stored with k across rows: four
    32-bit shared loads each instead) and 4 x 8 mma.sync of the input type (tf32: each fragment register rounded with
    cvt.rna)."""
    import re

    tf32 = dtype == "tf32"
    spec = P.default_spec("float32" if tf32 else dtype, "float32", tf32=tf32, layout=layout, epilogue="axpby",
                          tm=128, tn=128, tk=32, stages=3, block_dim=128, min_blocks=2, pad_ab=4 if tf32 else 8,
                          pad_c=0, mma=4)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert ".local" not in ptx and not re.search(r"\bcall", ptx)
    t, steps = ("tf32", 4) if tf32 else (P.MMA_TYPES[dtype], 2)
    shape = "m16n8k8" if tf32 else "m16n8k16"
    assert len(re.findall(rf"mma\.sync\.aligned\.{shape}\.row\.col\.f32\.{t}\.{t}\.f32", ptx)) == steps * 4 * 8
    a_tr = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", ptx))
    a_all = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4(\.trans)?\.shared\.b16", ptx))
    scalar = spec.scalar_fragments()  # tf32 A of layout T / B of layout N: four 32-bit loads instead of an x4
    assert scalar == ((layout[0] == "T", layout[1] == "N") if tf32 else (False, False))
    assert a_all == steps * 4 * (2 - sum(scalar))
    assert len(re.findall(r"ld\.shared\.b32", ptx)) >= steps * 4 * 4 * sum(scalar)
    assert a_tr == (0 if tf32 else steps * 4 * ((layout[0] == "T") + (layout[1] == "N")))
    assert len(re.findall(r"cvt\.rna\.tf32\.f32", ptx)) == (steps * (4 + 4) * 4 if tf32 else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,layout,cfg", [
    ("float16", "NN", "pipe/128x128x32/s3/b128/o2/mma"), ("float16", "NT", "pipe/128x256x32/s3/b256/o1/mma"),
    ("bfloat16", "TN", "pipe/64x64x32/s4/b128/o4/mma"), ("float16", "TT", "pipe/128x128x64/s3/b256/o1/mma"),
    ("tf32", "NN", "pipe/128x128x32/s3/b128/o2/mma"), ("tf32", "TT", "pipe/128x64x32/s4/b128/o3/mma")],
    ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_mma_forced_on_cuda(dtype, layout, cfg, epilogue, planned, request):
    """The mma.sync kernel forced through the API on CUDA in each layout: two batch entries of 1000x1000 (M and N
    edges), K 520 (a partial K tile), alpha and beta * C, the input dtype as output (tf32: float32 with allow_tf32)."""
    tf32 = dtype == "tf32"
    _forced_on_cuda("float32" if tf32 else dtype, layout, cfg, epilogue, request, tf32=tf32)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.mma and spec.layout_a + spec.layout_b == layout, spec
    assert spec.tf32 == tf32


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,layout,cfg", [
    ("float16", "NN", "pipe/128x128x64/s3/b128/o1/k1/mma"), ("float16", "TT", "pipe/64x64x64/s3/b128/o4/k4/mma"),
    ("bfloat16", "NT", "pipe/128x128x32/s3/b128/o2/k2/mma"), ("tf32", "TN", "pipe/128x128x32/s3/b128/o2/k2/mma"),
    ("float32", "NN", "pipe/64x128x16/s3/b128/o3/k3/simt"), ("float64", "NN", "pipe/64x64x16/s3/b128/o3/k3/mma"),
    ("float64", "TT", "pipe/128x64x16/s3/b128/o2/k2/mma"), ("float64", "TN", "pipe/64x32x16/s3/b64/o4/k1/mma"),
    ("float32", "NT", "pipe/64x64x16/s3/b64/o4/k1/simt")], ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_stream_k_forced_on_cuda(dtype, layout, cfg, epilogue, planned, request):
    """The stream-K kernel forced through the API on CUDA: two batch entries of 1000x1000, K 520 (M, N and K edges;
    64-1024 tiles of 9-33 K steps over 132-528 blocks: most grids share every tile, so most tiles are split; the
    64x32 and 64x64 tiles over one block per SM run 6 and 2 whole waves first, then share the rest), alpha and beta *
    C, NaN-prefilled: checked against float64. A finisher waits on the flags of lower blocks only."""
    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    tf32 = dtype == "tf32"
    for _ in range(2):  # the second call reuses the workspace and flags the first left zero
        _forced_on_cuda("float32" if tf32 else dtype, layout, cfg, epilogue, request, tf32=tf32)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.stream_k and spec.layout_a + spec.layout_b == layout, spec


# --- the epilogue through shared memory (round 17; pipelined.staged_store) ----------------------------------------
# (dtype, out dtype, layout, tile, stages, mma warps; 0: the SIMT kernel): 16-bit outputs of a 64x64 and a 128x128
# tile, float32 outputs of a 64x64x64 tile (its A stages hold 64 rows of 272 bytes), layout T of A (its stage is K x
# M), and exact float32 on the SIMT kernel (4 stages of its K-major 16 x 68 A stage hold 64 rows of 272 bytes).
STAGED = [("float16", "float16", "NN", (64, 64, 32), 3, 4), ("float16", "float32", "TN", (64, 64, 64), 3, 4),
          ("float32", "float32", "NT", (64, 64, 16), 4, 0),
          ("float16", "float16", "NT", (128, 128, 64), 2, 4), ("float16", "float16", "TT", (128, 128, 32), 4, 8)] + (
    [("bfloat16", "bfloat16", "NN", (64, 128, 32), 4, 4)] if _compat.HAS_BF16 else [])


def _staged_spec(dtype, out_dtype, layout, tile, stages, mma, threads=False):
    """``threads``: the CUDA block size (for CPU fibers); else the CPU twin's block of one thread. ``mma`` 0: the SIMT
    kernel (exact float32)."""
    tm, tn, tk = tile
    kind = dict(mma=mma, pad_ab=8) if mma else dict(simt=True, pad_ab=4)
    block = (32 * mma if mma else tm * tn // 64) if threads else None
    return P.default_spec(dtype, out_dtype, layout=layout, epilogue="scale", device_is_cpu=True, tm=tm, tn=tn, tk=tk,
                          stages=stages, pad_c=0, **kind, **({"block_dim": block} if threads else {}))


def test_staged_store_rule(monkeypatch):
    """The staged epilogue is taken by plain mma.sync/SIMT kernels with the scale epilogue whose A stages hold the
    output tile (tm rows of tn * item + 16 bytes), and named in the key; the rest keep _OWN_STORE."""
    base = _staged_spec("float16", "float16", "NN", (128, 128, 32), 4, 4)
    assert P.staged_store(base) and base.key.endswith("_ts")  # 4 x 128 x 40 x 2 = 40960 >= 128 x 272 = 34816
    assert not P.staged_store(dataclasses.replace(base, stages=3))  # 30720 bytes of A stages
    assert P.staged_store(dataclasses.replace(base, tk=64, stages=3))
    for over in (dict(epilogue="axpby"), dict(persistent=1), dict(stream_k=1), dict(out_dtype="float64")):
        assert not P.staged_store(dataclasses.replace(base, **over)), over
    tile = dataclasses.replace(base, mma=0)  # tile_matmul kernels store through their own paths
    assert not P.staged_store(tile)
    set_options(monkeypatch, staged_store=False)
    assert not P.staged_store(base) and not base.key.endswith("_ts")


@pytest.mark.parametrize("ldd", [None, 5], ids=["rows-aligned", "rows-unaligned"])
@pytest.mark.parametrize("case", STAGED, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}-s{c[4]}")
def test_staged_store_on_cpu(case, ldd, request):
    """The staged epilogue on the CPU twin (one thread plays every CUDA thread): the fragments' shared positions and
    the chunked copy-out, against float64 -- M and N edges (partial chunks of a row: element stores), three batch
    entries with A broadcast, NaN-prefilled D; rows-unaligned: D a column view with row stride N + 5 (no 16-byte
    stores; the other columns must stay)."""
    spec = _staged_spec(*case)
    assert P.staged_store(spec)
    M, N, K = spec.tm + 13, 2 * spec.tn - 5, 3 * spec.tk + 7
    lda = _ld8(M) if spec.layout_a == "T" else _ld8(K)
    ldb = _ld8(K) if spec.layout_b == "T" else _ld8(N)
    out, ref = _run(spec, M, N, K, _rng(request), batch=3, a_nb=1, b_nb=3, lda=lda, ldb=ldb,
                    ldd=None if ldd is None else N + ldd)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("case", STAGED[:4], ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}")
def test_staged_store_on_cpu_fibers(case, request):
    """The staged epilogue with each block's CUDA block size of fibers: every thread writes its own fragments, the
    barrier, then each thread its own chunks of the copy-out (as on CUDA), against float64."""
    spec = _staged_spec(*case, threads=True)
    M, N, K = spec.tm + 24, spec.tn + 8, 2 * spec.tk + 8
    lda = _ld8(M) if spec.layout_a == "T" else _ld8(K)
    ldb = _ld8(K) if spec.layout_b == "T" else _ld8(N)
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, lda=lda, ldb=ldb, fibers=True)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_staged_store_cuda_build_offline(layout, tmp_path):
    """The 128x128x64 mma.sync kernel with the staged epilogue compiles for sm_90 offline: accumulator still in
    registers (no local memory), its outputs written to shared memory and stored with 16-byte global stores (the
    copy-out; _OWN_STORE stores 4 bytes at a time)."""
    import re

    spec = _staged_spec("float16", "float16", layout, (128, 128, 64), 3, 4, threads=True)
    assert P.staged_store(spec)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert ".local" not in ptx and not re.search(r"\bcall", ptx)
    assert re.search(r"st\.global\.v4\.(u32|b32)", ptx), "no 16-byte global store"
    assert re.search(r"st\.shared\.(u32|b32)", ptx), "the fragments are not written to shared memory"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,layout,cfg", [
    ("float16", "NN", "pipe/128x128x64/s3/b128/o1/mma"), ("float16", "TN", "pipe/128x128x32/s4/b128/o2/mma"),
    ("bfloat16", "NT", "pipe/64x64x64/s3/b128/o4/mma"), ("float16", "TT", "pipe/128x128x64/s2/b128/o2/mma")],
    ids=lambda v: str(v))
def test_staged_store_forced_on_cuda(dtype, layout, cfg, planned, request):
    """The staged epilogue (round 17) on CUDA through the API: 1000x1000 (M and N edges), K 520, two batch entries,
    alpha, NaN-prefilled, against float64 (_forced_on_cuda); then 64 x 256^3 (issue 18's shape) into a column view of
    a wider output (rows not 16-byte aligned: element stores) whose other columns stay, and the plans were staged."""
    from conftest import make, nan_like, to_f64

    import warp_gemm

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    _forced_on_cuda(dtype, layout, cfg, "scale", request)
    rng = _rng(request)
    a, b = random_operands(256, 256, 256, dtype, rng, batch=64)
    wide = nan_like("warp", (64, 256, 261), dtype, "cuda")
    out = wide[:, :, :256]
    with warp_gemm.options(family="pipelined", pipe_config=cfg):
        warp_gemm.matmul(make(a, dtype, "warp", "cuda"), make(b, dtype, "warp", "cuda"), out=out)
    _assert_close(to_f64(out), np.matmul(a, b), dtype)
    assert np.isnan(to_f64(wide)[:, :, 256:]).all(), "a column past the view was written"
    assert planned and all(P.staged_store(p.family_spec) for p in planned), [p.family_spec for p in planned]


# --- the CUDA thread paths on CPU fibers -----------------------------------------------------------------------------
@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("dtype,tf32,over", [
    ("float16", False, dict(mma=4, block_dim=128, tm=64, tn=64, tk=32, pad_ab=8)),
    ("float32", True, dict(mma=4, block_dim=128, tm=64, tn=64, tk=32, pad_ab=4)),
    ("float32", False, dict(simt=True, block_dim=64, tm=64, tn=64, tk=16, pad_ab=4)),
    ("float16", False, dict(block_dim=64, tm=32, tn=32, tk=32, pad_ab=8, pad_c=8)),
    ("float16", False, dict(wgmma=True, block_dim=256, tm=128, tn=64, tk=64, pad_ab=0)),
    ("float16", False, dict(mma=4, block_dim=128, tm=64, tn=64, tk=32, pad_ab=8, stream_k=4)),
    ("float32", False, dict(simt=True, block_dim=64, tm=64, tn=64, tk=16, pad_ab=4, stream_k=2)),
    ("float16", False, dict(mma=4, block_dim=128, tm=64, tn=64, tk=32, pad_ab=8, persistent=1)),
    ("float32", False, dict(simt=True, block_dim=64, tm=64, tn=64, tk=16, pad_ab=4, persistent=1))],
    ids=lambda v: str(v))
@pytest.mark.parametrize("layout", ["NN", "TT", "NT"])
def test_cuda_thread_paths_on_cpu_fibers(dtype, tf32, over, layout, request):
    """With ``wp.config.enable_cpu_blocks`` each block runs its CUDA block size of fibers: the snippets then take the
    paths CUDA threads take -- one thread's share of the mma.sync / SIMT outputs, and the copies' interior fast paths
    (_COPY_FAST's chunks, _COPY_T's 4 x 8 blocks per warp), which a block of one thread never reaches -- against
    float64. 152x136x200 on 64x64 (32x32) tiles: interior tiles and M, N, K edges."""
    if bool(over.get("wgmma")) != (layout == "NT"):
        pytest.skip("the wgmma kernel is for layout NT only; NT is run for it alone")
    spec = P.default_spec(dtype, "float32", tf32=tf32, layout=layout, epilogue="axpby", device_is_cpu=True, stages=3,
                          **{"pad_c": 0, **over})
    out, ref = _run(spec, 152, 136, 200, _rng(request), fibers=True)
    _assert_close(out, ref, "float32", tf32=tf32)


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,over", [
    ("float16", dict(tm=128, tn=128, tk=64, stages=3, block_dim=128, min_blocks=1, pad_ab=8, mma=4, stream_k=1)),
    ("float32", dict(tm=64, tn=128, tk=16, stages=3, block_dim=128, min_blocks=3, pad_ab=4, simt=True, stream_k=3))])
def test_stream_k_cuda_build_offline(dtype, over, tmp_path):
    """The stream-K kernels compile for sm_90 offline with the accumulator still in registers (no local memory:
    the slot loops are unrolled over the register tile's constant length), the flag's release (fence, atomic) and
    the finisher's wait (volatile load, nanosleep) and L2 loads in the PTX."""
    import re

    spec = P.default_spec(dtype, dtype, layout="NN", epilogue="axpby", pad_c=0, **over)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert not re.search(r"\b(ld|st)\.local", ptx)
    assert "membar.gl" in ptx and "atom.global.exch" in ptx and "ld.volatile.global" in ptx and "nanosleep" in ptx
    assert "ld.global.cg" in ptx


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,over", [
    ("float16", dict(tm=128, tn=128, tk=32, stages=6, block_dim=128, min_blocks=1, pad_ab=8, mma=4, persistent=1)),
    ("float32", dict(tm=64, tn=128, tk=16, stages=3, block_dim=128, min_blocks=3, pad_ab=4, simt=True, persistent=3))])
def test_persistent_own_cuda_build_offline(dtype, over, tmp_path):
    """The persistent simt/mma kernels compile for sm_90 offline with the accumulator still in registers (no local
    memory: the zeroing loop is unrolled over the register tile's constant length); the mma.sync one with 6 stages
    (cp.async.wait_group 4 between K steps)."""
    import re

    spec = P.default_spec(dtype, dtype, layout="NN", epilogue="axpby", pad_c=0, **over)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert not re.search(r"\b(ld|st)\.local", ptx)
    assert ("mma.sync" in ptx) == bool(over.get("mma")) and "cp.async" in ptx
    assert f"cp.async.wait_group {spec.stages - 2};" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,layout,cfg", [
    ("float16", "NN", "pipe/128x128x32/s4/b128/o2/p2/mma"), ("float16", "TT", "pipe/64x64x64/s3/b128/o4/p4/mma"),
    ("bfloat16", "NT", "pipe/128x128x64/s3/b128/o1/p1/mma"), ("tf32", "TN", "pipe/128x128x32/s3/b128/o2/p2/mma"),
    ("float32", "NN", "pipe/64x128x16/s3/b128/o3/p3/simt"),
    ("float16", "NT", "pipe/128x128x32/s6/b128/o1/mma"), ("float16", "NN", "pipe/128x128x32/s6/b128/o1/p1/mma")],
    ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_persistent_own_forced_on_cuda(dtype, layout, cfg, epilogue, planned, request):
    """Persistent simt/mma blocks and 6 stages (not defaults; round 15) forced through the API on CUDA: four batch
    entries of 1000x1000, K 520 (M, N and K edges; 256-512 tiles over 132-528 blocks, so persistent blocks loop over
    one to four tiles), alpha and beta * C, NaN-prefilled: checked against float64."""
    from warp_gemm.config.configs import PipeConfig

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    tf32 = dtype == "tf32"
    _forced_on_cuda("float32" if tf32 else dtype, layout, cfg, epilogue, request, tf32=tf32, batch=4)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.layout_a + spec.layout_b == layout, spec
    assert (spec.persistent, spec.stages) == (PipeConfig.parse(cfg).persistent, PipeConfig.parse(cfg).stages), spec


# --- 16-bit NT on sm_90a warpgroup MMAs (spec.wgmma) -----------------------------------------------------------------
def _wgmma_spec(dtype="float16", epilogue="axpby", tm=64, tn=64, tk=32, stages=3, **over):
    return _spec(dtype, layout="NT", epilogue=epilogue, tm=tm, tn=tn, tk=tk, stages=stages, pad_ab=0, pad_c=0,
                 wgmma=True, **over)


@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("dtype,tm,tn,tk,stages", [
    ("float16", 64, 64, 32, 3), ("float16", 128, 128, 64, 2), ("float16", 64, 256, 16, 4)] +
    ([("bfloat16", 128, 256, 32, 3)] if _compat.HAS_BF16 else []), ids=lambda v: str(v))
def test_wgmma_tiles_and_edges(dtype, tm, tn, tk, stages, epilogue, request):
    """The wgmma kernel (K-major core-matrix stages, shared-memory descriptors, warpgroup sums in wgmma's D order) on
    the CPU twin: each sum reads A and B through the fields decoded from the kernel's own descriptors and the
    core-matrix layout, so the copies' placement, the descriptors (start per warpgroup and k step, LBO, SBO) and the
    store order are checked against float64. M, N and K edges, three batch entries with A broadcast, D a column
    view whose other columns stay."""
    M, N, K = tm + 30, tn + 13, 2 * tk + 24
    out, ref = _run(_wgmma_spec(dtype, epilogue, tm, tn, tk, stages, out_dtype="float32"), M, N, K, _rng(request),
                    batch=3, a_nb=1, b_nb=3, c_nb=3, lda=_ld8(K), ldb=_ld8(K), ldd=N + 3)
    _assert_close(out, ref, "float32")


@pytest.mark.parametrize("K", [0, 5])
def test_wgmma_short_k_and_output_cast(K, request):
    """K == 0 (alpha * 0 + beta * C) and K under one K tile, with a float16 output."""
    out, ref = _run(_wgmma_spec(), 40, 70, K, _rng(request), lda=_ld8(K) if K else None,
                    ldb=_ld8(K) if K else None, chunk_check=K > 0)
    _assert_close(out, ref, "float16")


@pytest.mark.parametrize("over,match", [
    (dict(layout_a="T"), "layout NT"),
    (dict(layout_b="N"), "layout NT"),
    (dict(in_dtype="float32", out_dtype="float32"), "float16 and bfloat16"),
    (dict(mma=4), "give one"),
    (dict(tm=96), "multiple of 64"),
    (dict(tn=272), "up to 256"),
    (dict(block_dim=256), "block_dim 128"),
    (dict(pad_ab=8), "pad_ab 0"),
    (dict(pad_c=8), "pad_c 0"),
    (dict(bias=True), "bias")])
def test_wgmma_refusals_name_the_reason(over, match):
    """Specs the wgmma kernel cannot run are refused before any compile, with the reason."""
    import dataclasses

    _assert_refused(dataclasses.replace(_wgmma_spec(), **over), match)


def test_wgmma_config_and_plan(monkeypatch):
    """``/wgmma`` is a bare flag; the planner (a CUDA-like device, nothing launched) keeps the configuration's block
    size, no padding and a register accumulator, for fp16 4096^3 with B stored (N, K)."""
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    pc = PipeConfig.parse("pipe/128x256x64/wgmma/s3/b256/o1")
    assert pc.wgmma and str(pc) == "pipe/128x256x64/s3/b256/o1/wgmma" and PipeConfig.parse(str(pc)) == pc
    with pytest.raises(ValueError, match="give one"):
        PipeConfig.parse("pipe/128x128x64/wgmma/mma")
    if _compat.WIDEN_16BIT_INPUTS:
        return
    p = _cuda_like_problem(monkeypatch, 4096, np.float16)
    spec = make_plan(p, 1.0, 0.0, False, None, Options(family="pipelined", pipe_config=pc)).family_spec
    assert spec.wgmma and (spec.block_dim, spec.pad_ab, spec.pad_c, spec.layout_b) == (256, 0, 0, "T"), spec
    assert P.unfit(spec) == ""


@pytest.mark.skipif(not (_compat.HAS_COMPILE_AOT and _compat.HAS_CUDA_ARCH_SUFFIX),
                    reason="sm_90a offline builds need wp.compile_aot_module and wp.config.cuda_arch_suffix")
def test_wgmma_cuda_build_offline(tmp_path):
    """The wgmma kernel (128x128x64, 2 warpgroups, 3 stages) compiles for sm_90a offline; its PTX keeps the
    accumulator in registers (no local memory, no calls), issues 4 wgmma m64n128k16 per K tile between one fence and
    one commit / wait, and fences the copies for the async proxy."""
    import inspect
    import re

    spec = P.default_spec("float16", "float32", layout="NT", epilogue="axpby", tm=128, tn=128, tk=64, stages=3,
                          block_dim=256, min_blocks=1, pad_ab=0, pad_c=0, mma=0, wgmma=True)
    old = wp.config.cuda_arch_suffix
    wp.config.cuda_arch_suffix = "a"
    try:
        _build_offline(spec, tmp_path / "cubin")
        if "use_ptx" not in inspect.signature(wp.compile_aot_module).parameters:
            return
        wp.compile_aot_module(P.get_kernel(spec).module, arch=[90], module_dir=str(tmp_path / "ptx"), use_ptx=True)
    finally:
        wp.config.cuda_arch_suffix = old
    ptx = "".join(p.read_text() for p in (tmp_path / "ptx").rglob("*.ptx"))
    assert ".target sm_90a" in ptx and ".local" not in ptx and not re.search(r"\bcall", ptx)
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)) == 4
    assert len(re.findall(r"wgmma\.fence\.sync\.aligned", ptx)) == 1
    assert len(re.findall(r"wgmma\.commit_group\.sync\.aligned", ptx)) == 1
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned 0", ptx)) == 1
    assert "fence.proxy.async.shared::cta" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,cfg", [("float16", "pipe/128x128x64/s3/b256/o1/wgmma"),
                                       ("bfloat16", "pipe/128x256x32/s3/b256/o1/wgmma"),
                                       ("float16", "pipe/64x128x64/s4/b128/o2/wgmma")], ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_wgmma_forced_on_cuda(dtype, cfg, epilogue, planned, request):
    """The wgmma kernel forced through the API on an sm_90 GPU, B stored (N, K): two batch entries of 1000x1000 (M
    and N edges), K 520 (a partial K tile), alpha and beta * C, the input dtype as output."""
    if wp.get_device("cuda").arch != 90:
        pytest.skip("wgmma needs an sm_90 GPU")
    _forced_on_cuda(dtype, "NT", cfg, epilogue, request)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.wgmma and spec.layout_a + spec.layout_b == "NT", spec


@pytest.mark.skipif(not _compat.HAS_TF32, reason="tf32 needs tile_matmul(precision=...)")
@pytest.mark.parametrize("layout", ["NN", "TN", "TT"])
def test_mma_tf32_scalar_fragments_odd_tile_widths(layout, request):
    """tf32 operands stored with k across rows (A of layout T, B of layout N) are copied as stored and read with
    32-bit shared loads (scalar_fragments) from rows padded to 8 or 24 words modulo 32, whatever the tile's width:
    96x64 tiles in 2 warps of 48x64 (rows of 104 and 72 words), 2 stages, partial tiles each way, against float64."""
    spec = _mma_spec("tf32", layout, "axpby", tm=96, tn=64, tk=32, stages=2, mma=2, out_dtype="float32")
    assert P.mma_warps(spec) == (2, 1)
    acols, bcols = spec.stage_cols()
    for cols, scalar, stored in zip((acols, bcols), spec.scalar_fragments(), (96, 64)):
        if scalar:  # the row: the tile's width plus at least pad_ab, 8 or 24 words modulo 32
            assert cols >= stored + spec.pad_ab and cols % 32 in (8, 24) and (cols - stored) % 4 == 0
    assert P.smem_bytes(spec) == spec.stages * (spec.a_tile()[0] * acols + spec.b_tile()[0] * bcols) * 4
    M, N, K = 96 + 37, 64 + 29, 2 * 32 + 19
    out, ref = _run(spec, M, N, K, _rng(request), lda=_ld8(M) if layout[0] == "T" else _ld8(K),
                    ldb=_ld8(K) if layout[1] == "T" else _ld8(N))
    _assert_close(out, ref, "float32", tf32=True)


# --- float64 on the fp64 tensor cores through mma.sync (spec.mma with float64 inputs: DMMA) -----------------------
def _dmma_spec(layout="NN", epilogue="axpby", tm=64, tn=64, tk=16, stages=3, mma=4, mma_k=8, pad_ab=4,
               **over) -> P.PipeSpec:
    """A float64 mma.sync spec for the CPU twin (``mma_k``: the sm_90 MMA's k; 0: m8n8k4 pairs)."""
    return _spec("float64", layout=layout, epilogue=epilogue, tm=tm, tn=tn, tk=tk, stages=stages, pad_ab=pad_ab,
                 pad_c=0, mma=mma, mma_k=mma_k, **over)


def _ld2(n: int) -> int:
    return -(-n // 2) * 2


@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_dmma_layouts_and_edges(layout, epilogue, request):
    """The float64 mma.sync kernel (8-byte fragment loads, m8n8k4 pairs / m16n8k8, float64 sums in registers): on
    the CPU twin each output sums the values that its lanes' fragment addresses and the PTX fragment layouts deliver,
    so the addressing of every layout is checked. 70x131x75 on 64x64x16 tiles of 4 warps (M, N and K edges, 5 K
    tiles through 3 stages), three batch entries with A broadcast, A and B column views of wider arrays (rows of
    16-byte multiples), D a column view whose other columns stay, against float64."""
    M, N, K = 70, 131, 75
    lda = _ld2(M) + 2 if layout[0] == "T" else _ld2(K) + 2
    ldb = _ld2(K) + 2 if layout[1] == "T" else _ld2(N) + 2
    spec = _dmma_spec(layout, epilogue)
    assert spec.acc_dtype == "float64" and P.mma_warps(spec) == (2, 2) and "_mma4_k8" in spec.key
    out, ref = _run(spec, M, N, K, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=3, lda=lda, ldb=ldb, ldd=N + 5)
    _assert_close(out, ref, "float64")


@pytest.mark.parametrize("tm,tn,tk,mma,mma_k,warps", [
    (128, 64, 16, 4, 8, (2, 2)), (64, 32, 16, 2, 16, (2, 1)), (128, 128, 16, 8, 4, (2, 4)), (64, 64, 32, 4, 16, (2, 2)),
    (32, 32, 8, 1, 0, (1, 1))], ids=lambda v: str(v))
def test_dmma_warp_splits_and_instructions(tm, tn, tk, mma, mma_k, warps, request):
    """Other warp splits and sm_90 instructions (m16n8k8 / k16 / k4, m8n8k4 pairs: the fragments the CPU twin reads do
    not depend on it), the planner's tiles among them (128x64x16 k8, 64x64x32 k16, 64x32x16 of 2 warps); the "scale"
    epilogue, through the free A stage where it fits (_STAGED_STORE), and two partial tiles each way."""
    spec = _dmma_spec("NT", "scale", tm=tm, tn=tn, tk=tk, mma=mma, mma_k=mma_k)
    assert P.mma_warps(spec) == warps and P.unfit(spec) == ""
    assert ("_ts" in spec.key) == P.staged_store(spec)
    M, N, K = 2 * tm - 13, 2 * tn - 5, 2 * tk + 6
    out, ref = _run(spec, M, N, K, _rng(request), lda=_ld2(K), ldb=_ld2(K))
    _assert_close(out, ref, "float64")


@pytest.mark.parametrize("layout,epilogue,over", [
    ("NN", "axpby", {}), ("NT", "scale", {}), ("TN", "axpby", dict(tk=32, mma_k=16)), ("TT", "scale", dict(mma_k=4)),
    ("NN", "scale", dict(tm=128, tn=64, stream_k=2)), ("TN", "axpby", dict(tm=32, tn=32, mma=1, mma_k=0))],
    ids=lambda v: str(v))
def test_dmma_swizzled_stages(layout, epilogue, over, request):
    """Unpadded swizzled float64 stages (spec.swizzle: chunk c of stage row r at c ^ 2 (r % 4)): the copy writes and
    the fragment reads share the permutation, so every layout (rows along k or along M / N), K depths 16 / 32, the
    sm_90 MMAs, stream-K and a one-warp tile match float64; M, N, K edges, batch broadcast, column views."""
    spec = _dmma_spec(layout, epilogue, **{**dict(pad_ab=0, swizzle=True), **over})
    assert "_sw" in spec.key and P.unfit(spec) == "" and spec.stage_cols() == (spec.a_tile()[1], spec.b_tile()[1])
    M, N, K = 2 * spec.tm - 13, 2 * spec.tn + 3, 3 * spec.tk + 6
    lda = _ld2(M) + 2 if layout[0] == "T" else _ld2(K) + 2
    ldb = _ld2(K) + 2 if layout[1] == "T" else _ld2(N) + 2
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, a_nb=1, b_nb=2, c_nb=2, lda=lda, ldb=ldb, ldd=N + 3)
    _assert_close(out, ref, "float64")


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_dmma_swizzled_stages_on_cpu_fibers(layout, request):
    """Swizzled stages with the CUDA block size of fibers: the copies' interior fast path (a thread's chunks 16 rows
    apart, one permuted address) and each thread's own fragments, interior and edge tiles, against float64."""
    spec = dataclasses.replace(_dmma_spec(layout, "scale", tm=64, tn=64, pad_ab=0, swizzle=True), block_dim=128)
    M, N, K = 2 * spec.tm + 24, spec.tn + 16, 4 * spec.tk + 8
    lda = _ld2(M) if layout[0] == "T" else _ld2(K)
    ldb = _ld2(K) if layout[1] == "T" else _ld2(N)
    out, ref = _run(spec, M, N, K, _rng(request), lda=lda, ldb=ldb, fibers=True)
    _assert_close(out, ref, "float64")


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("kind,layout,over", [
    ("float64", "NN", dict(tm=128, tn=64, tk=32, mma=8, mma_k=16, pad_ab=0, swizzle=True)),
    ("float64", "TT", dict(tm=128, tn=64, tk=32, mma=8, mma_k=16, pad_ab=0, swizzle=True, interleave=True)),
    ("float64", "NT", dict(stream_k=3, interleave=True)), ("float64", "TN", {}),
    ("float16", "NN", dict(mma=4, block_dim=128, tm=64, tn=64, tk=32, pad_ab=8)),
    ("simt", "TN", dict(block_dim=64, tm=64, tn=64, tk=16))], ids=lambda v: str(v))
def test_edge_copies_on_cpu_fibers(kind, layout, over, request):
    """Predicated edge copies (spec.edge_copy: a tile crossing an operand's last row or column copied in the interior
    path's chunks, each with its source size, zero-filled past the edge) with the CUDA block size of fibers: M, N and
    K edges inside a 16-byte chunk and past whole chunks, rows of odd length (16-byte multiples), swizzled and padded
    stages, interleave, stream-K, the 16-bit mma.sync and SIMT kernels' copies; against float64."""
    M, N, K = 2 * 128 + 37, 2 * 64 + 27, 3 * 32 + 21
    if kind == "float16":
        spec = P.default_spec("float16", "float32", layout=layout, epilogue="axpby", device_is_cpu=True, stages=3,
                              pad_c=0, edge_copy=True, **over)
        ld = _ld8
        lda, ldb = ld(M) if layout[0] == "T" else ld(K), ld(K) if layout[1] == "T" else ld(N)
    elif kind == "simt":
        spec, lda, ldb = _own_case(kind, layout, "axpby", M, N, K, edge_copy=True, **over)
    else:
        spec = _dmma_spec(layout, "axpby", edge_copy=True, **over)
        spec = dataclasses.replace(spec, block_dim=32 * spec.mma)
        lda, ldb = _ld2(M) if layout[0] == "T" else _ld2(K), _ld2(K) if layout[1] == "T" else _ld2(N)
    assert "_ec" in spec.key and P.unfit(spec) == ""
    # the edge path is in the copy of B's stages (the generic chunk loop stays for tiles the fast path does not fit)
    assert "crossing src's edge" in P.snippets._copy_snippet(spec, *spec.b_tile(), spec.stage_cols()[1])
    out, ref = _run(spec, M, N, K, _rng(request), lda=lda, ldb=ldb, fibers=True)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="CPU blocks of several threads need warp-lang >= 1.18")
@pytest.mark.parametrize("dtype,layout,shape", [
    ("float64", "NN", (4095, 4095, 4095)), ("float64", "TN", (4095, 4095, 4095)), ("float64", "NT", (1000, 1000, 1000)),
    ("float64", "TT", (1000, 1000, 1000)), ("float32", "NN", (1000, 1000, 1000))], ids=lambda v: str(v))
def test_edge_copy_defaults_on_cpu_fibers(dtype, layout, shape, request):
    """The CUDA defaults that take edge copies (default_spec at a shape whose tiles cross an edge: float64's 128x64x32
    interleaved large-grid tiles, its 64x64x16 stream-K small-grid tiles, exact float32's stream-K SIMT tiles) run
    with their CUDA block size of fibers on an odd problem (M, N and K edges), two batch entries with A broadcast,
    column views of A, B and D, alpha and beta * C; against float64."""
    spec = P.default_spec(dtype, layout=layout, epilogue="axpby", M=shape[0], N=shape[1], K=shape[2])
    assert spec.edge_copy and (spec.mma or spec.simt) and spec.block_dim > 1 and P.unfit(spec) == ""
    M, N, K = 2 * spec.tm + 19, 2 * spec.tn + 5, 3 * spec.tk + 7
    ld, pad = (_ld2, 2) if dtype == "float64" else (_ld4, 4)  # rows of 16-byte multiples, wider than the views
    lda = ld(M) + pad if layout[0] == "T" else ld(K) + pad
    ldb = ld(K) + pad if layout[1] == "T" else ld(N) + pad
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, a_nb=1, b_nb=2, c_nb=2, lda=lda, ldb=ldb, ldd=N + 3,
                    fibers=True)
    _assert_close(out, ref, dtype)


@pytest.mark.parametrize("kind,layout,over", [
    ("float64", "NN", {}), ("float64", "TT", dict(tk=32, mma_k=16)), ("float64", "NT", dict(mma_k=4)),
    ("float64", "TN", dict(pad_ab=0, swizzle=True, stream_k=2)), ("float64", "NN", dict(tk=8, mma_k=0)),
    ("simt", "NN", {}), ("simt", "TN", dict(stream_k=3)), ("simt", "NT", dict(tk=8))], ids=lambda v: str(v))
def test_interleaved_copies(kind, layout, over, request):
    """Interleaved kernels (spec.interleave: the first half of a K step's product, the next stage's copies, then the
    rest): each K step's k still summed once, in every layout, K depth and sm_90 MMA, with swizzled stages and
    stream-K; M, N, K edges (a partial last K tile), batch broadcast, column views, the axpby epilogue; float64."""
    M, N, K = 77, 133, 61
    if kind == "simt":
        spec, lda, ldb = _own_case(kind, layout, "axpby", M, N, K, interleave=True, **over)
    else:
        spec = _dmma_spec(layout, "axpby", interleave=True, **over)
        lda, ldb = _ld2(M) if layout[0] == "T" else _ld2(K), _ld2(K) if layout[1] == "T" else _ld2(N)
    assert "_il" in spec.key and P.unfit(spec) == ""
    step = 1 if spec.simt else max(4, spec.mma_k)
    assert 0 < P.spec.interleave_split(spec) < spec.tk and P.spec.interleave_split(spec) % step == 0
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, a_nb=1, b_nb=2, c_nb=2, lda=lda, ldb=ldb, ldd=N + 3)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.parametrize("over,match", [
    (dict(tk=8, mma_k=8), "two steps"), (dict(persistent=2), "not persistent"),
    (dict(mma=0, pad_c=4, mma_k=0), "SIMT")])
def test_interleave_refusals_name_the_reason(over, match):
    """Interleaving needs two steps of the product per K tile, a non-persistent SIMT or float64 mma.sync kernel."""
    _assert_refused(dataclasses.replace(_dmma_spec(), interleave=True, **over), match)
    _assert_refused(dataclasses.replace(_mma_spec(), interleave=True), "SIMT")


def test_dmma_staged_store_is_exercised():
    """At least one planner tile of the DMMA kernel stores through the A stage (64x32 and 64x64x32: test above)."""
    assert P.staged_store(_dmma_spec(tm=64, tn=32, mma=2, mma_k=16, epilogue="scale"))
    assert not P.staged_store(_dmma_spec(epilogue="axpby"))


@pytest.mark.parametrize("over,match", [
    (dict(mma_k=16, tk=8), "16-deep"),
    (dict(mma_k=12), "mma_k"),
    (dict(tk=6, mma_k=0), "4-deep"),
    (dict(mma=0, pad_c=4), "mma_k"),
    (dict(pad_ab=1), "16-byte"),
    (dict(block_dim=64), "block_dim 128"),
    (dict(bias=True), "registers"),
    (dict(swizzle=True), "unpadded"),
    (dict(swizzle=True, pad_ab=0, tk=8), "multiples of 16"),
    (dict(swizzle=True, pad_ab=0, mma=0, pad_c=4, mma_k=0), "swizzled stages")])
def test_dmma_refusals_name_the_reason(over, match):
    """float64 mma.sync specs that cannot run are refused before any compile, with the reason; mma_k is float64's."""
    _assert_refused(dataclasses.replace(_dmma_spec(), **over), match)
    _assert_refused(dataclasses.replace(_mma_spec(), mma_k=8), "mma_k")


@pytest.mark.parametrize("cfg,rows", [("pipe/128x128x16/s3/b128/o2/simt", 16), ("pipe/128x128x16/s3/b256/o2/simt", 8),
                                      ("pipe/64x128x16/s3/b128/o3/simt", 8), ("pipe/64x128x16/s3/b64/o4/simt", 16),
                                      ("pipe/128x128x16/s3/b64/o2/simt", 0), ("pipe/128x64x32/s2/b256/o1", 8)])
@pytest.mark.parametrize("size", [4095, 1000])
def test_simt_configurations_over_the_default(cfg, rows, size):
    """A configuration applied over the exact-float32 default (8 x 8 outputs per thread): /simt takes the rows per
    thread its block implies (tm * tn / block_dim / 8), 8 or 16; a block implying neither is refused (rows 0 here),
    naming the block the tile takes; a tile_matmul one keeps 8 (unused)."""
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.families.pipelined.rules import _with_pipe_config, pipe_spec

    base = P.default_spec("float32", M=size, N=size, K=size)
    assert base.simt_rows == 8
    spec = _with_pipe_config(base, PipeConfig.parse(cfg), False)
    if rows == 0:
        assert pipe_spec(base, PipeConfig.parse(cfg)) is None
        _assert_refused(spec, "takes block_dim")
        return
    assert spec.simt_rows == rows and P.unfit(spec) == ""
    assert (spec == base) == (size == 4095 and cfg == "pipe/64x128x16/s3/b128/o3/simt")


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (4095, 4100, 4000), (8192, 8192, 8192), (4096, 4096, 64),
                                   (3968, 4096, 4096), (1536, 1536, 1536)])
def test_simt_16_rows_defaults(layout, M, N, K):
    """Exact float32's large-grid defaults: 16 x 8 outputs per thread on 128x128 tiles (two blocks per SM) where B is
    stored (N, K) (NT, TT), from 32 x 32 tiles of 128 and K 4000 up; on 128x256 tiles (one block per SM) for NN where
    M and N are whole tiles filling at least 95% of whole waves on 132 SMs and K >= 2048 (4096^3: 512 tiles, 4 waves;
    3968 x 4096: 496 tiles, 94%); 8 x 8 on 64x128 tiles otherwise (the grids timed)."""
    spec = P.default_spec("float32", layout=layout, M=M, N=N, K=K)
    r16 = layout[1] == "T" and -(-M // 128) * -(-N // 128) >= 1024 and K >= 4000
    w256 = layout == "NN" and (M, N, K) in ((4096, 4096, 4096), (8192, 8192, 8192))
    assert (spec.tm, spec.tn, spec.block_dim, spec.min_blocks, spec.simt_rows) == (
        (128, 128, 128, 2, 16) if r16 else (128, 256, 256, 1, 16) if w256 else (64, 128, 128, 3, 8))
    assert r16 == ((M, N, K) in ((4096, 4096, 4096), (4095, 4100, 4000), (8192, 8192, 8192)) and layout[1] == "T")
    assert P.unfit(spec) == ""
    assert P.default_spec("float32", M=2048, N=2048, K=2048).tn == 256  # 128 tiles: one wave, 97%
    assert P.default_spec("float32", M=2048, N=2048, K=2048, sm_count=114).tn == 128  # 2 waves, 56%


@pytest.mark.parametrize("cfg,mma_k,swizzle", [("pipe/128x64x16/s3/b128/o2/mma", P.DMMA_DEFAULT_K, True),
                                               ("pipe/128x64x16/s4/b128/o2/mma", P.DMMA_DEFAULT_K, True),
                                               ("pipe/128x64x32/s2/b128/o2/mma", 16, True),
                                               ("pipe/64x64x32/s3/b128/o2/p1/mma", P.DMMA_DEFAULT_K, False),
                                               ("pipe/64x64x32/s2/b128/o2", 0, False)])
def test_dmma_configurations_over_the_default(cfg, mma_k, swizzle):
    """A configuration applied over the float64 default (as the planner and tuner do): /mma takes the DMMA kernel
    with the default's sm_90 MMA and a register accumulator, on the default's swizzled stages where its tile allows
    and it has no persistent loop (else rows padded for float64), its interleaved K steps and edge copies where the
    kernel takes them; the default itself among them; a tile_matmul one drops mma_k."""
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.families.pipelined.rules import _with_pipe_config

    base = P.default_spec("float64", M=4096, N=4096, K=4096)
    spec = _with_pipe_config(base, PipeConfig.parse(cfg), False)
    assert spec.mma_k == mma_k and bool(spec.mma) == bool(mma_k) and P.unfit(spec) == ""
    assert (spec.pad_ab, spec.pad_c, spec.swizzle) == ((0, 0, True) if swizzle else (4, 0, False) if mma_k
                                                      else (4, 4, False))
    assert (spec == base) == (cfg == "pipe/128x64x32/s2/b128/o2/mma")
    # the default's interleaved K steps where the kernel takes them (not persistent, two MMA steps per K tile)
    assert spec.interleave == bool(mma_k and "/p" not in cfg) and not spec.edge_copy
    # over a default with edge copies (tiles crossing an edge): the DMMA configurations keep them, tile_matmul drops
    edged = P.default_spec("float64", M=4095, N=4095, K=4095)
    assert edged.edge_copy and _with_pipe_config(edged, PipeConfig.parse(cfg), False).edge_copy == bool(mma_k)
    small = P.default_spec("float64", M=1000, N=1000, K=1000)  # padded stages: configurations keep them
    assert not _with_pipe_config(small, PipeConfig.parse(cfg), False).swizzle


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("layout,mma_k,over", [("NN", 8, {}), ("TT", 16, {}), ("NT", 4, {}), ("TN", 0, {}),
                                              ("NT", 16, {"stream_k": 2}), ("NN", 8, {"persistent": 2})],
                         ids=lambda v: str(v))
def test_dmma_cuda_build_offline(layout, mma_k, over, tmp_path):
    """The DMMA kernel (plain, stream-K with its float64 workspace, persistent) compiles offline for sm_90 and sm_80;
    the sm_90 PTX issues the m16n8k{mma_k} MMA (mma_k 0: the
    m8n8k4 pairs, as sm_80's does), one per 16 x 8 output tile of a warp per MMA's k, keeps the accumulator in registers (no
    local memory, no calls) and reads fragments with 8-byte shared loads."""
    import re

    spec = _dmma_spec(layout, "axpby", tm=128, tn=64, tk=16, block_dim=128, min_blocks=2, mma_k=mma_k, **over)
    _build_offline(spec, tmp_path / "sm80", arch=80)
    ptx = _offline_ptx(spec, tmp_path)
    if ptx is None:
        return
    assert ".local" not in ptx and not re.search(r"\bcall", ptx)
    shape = f"m16n8k{mma_k}" if mma_k else "m8n8k4"
    n = len(re.findall(rf"mma\.sync\.aligned\.{shape}\.row\.col\.f64\.f64\.f64\.f64", ptx))
    wm, wn = P.mma_warps(spec)
    tiles, steps = (spec.tm // wm // 16) * (spec.tn // wn // 8), spec.tk // (mma_k or 4)  # one warp's, per K tile
    assert n == tiles * steps * (1 if mma_k else 2), n
    assert re.search(r"ld\.shared\.f64", ptx)


@pytest.mark.gpu
@pytest.mark.parametrize("layout,cfg", [
    ("NN", "pipe/128x64x16/s3/b128/o2/mma"), ("NT", "pipe/64x64x32/s3/b128/o2/mma"),
    ("TN", "pipe/64x32x16/s3/b64/o4/mma"), ("TT", "pipe/128x64x16/s3/b128/o2/p2/mma")], ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_dmma_forced_on_cuda(layout, cfg, epilogue, planned, request):
    """The DMMA kernel forced through the API on CUDA in each layout: two batch entries of 1000x1000 (M and N edges),
    K 520 (a partial K tile), alpha and beta * C, a persistent grid among them, against float64."""
    _forced_on_cuda("float64", layout, cfg, epilogue, request)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and spec.mma and spec.in_dtype == "float64", spec
    assert spec.layout_a + spec.layout_b == layout


def _launch_on_cuda(spec: P.PipeSpec, M, N, K, rng, batch=2, alpha=1.25, beta=-0.5, device="cuda"):
    """``spec``'s kernel launched on ``device`` (CUDA) on fresh operands stored in its layouts (B broadcast over
    ``batch``; C for the axpby epilogue), a NaN-prefilled D (and stream-K workspace); returns (D as float64, float64
    reference)."""
    dt, dev = spec.in_dtype, wp.get_device(device)
    a, b = random_operands(M, N, K, dt, rng, batch=batch)
    a_st = np.swapaxes(a, 1, 2) if spec.layout_a == "T" else a
    b_st = np.swapaxes(b[:1], 1, 2) if spec.layout_b == "T" else b[:1]

    def put(x, d=dt):
        return wp.array(np.ascontiguousarray(x.astype(NP[d])), dtype=WP_DTYPES[d], device=dev)

    c = round_to(rng.standard_normal((batch, M, N)), spec.out_dtype) if spec.epilogue == "axpby" else None
    A, B, D = put(a_st), put(b_st), put(np.full((batch, M, N), np.nan), spec.out_dtype)
    C = put(c, spec.out_dtype) if c is not None else None
    grid, n_ws, n_flags = P.stream_k_sizes(spec, M, N, K, batch, dev)
    sk = {}
    if grid:
        sk = {"workspace": put(np.full(n_ws, np.nan), spec.acc_dtype), "flags": wp.zeros(n_flags, dtype=wp.int32,
                                                                                         device=dev)}
    k, dim, inputs, block = P.launch_args(spec, A, B, C, D, alpha, beta, M, N, K, batch, batch, 1,
                                          batch if C is not None else 1, **sk)
    wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=block, device=dev)
    ref = alpha * np.matmul(a, b[:1]) + (beta * c if c is not None else 0.0)
    return D.numpy().astype(np.float64), ref


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NT", "TT"])
def test_simt_16_rows_default_on_cuda(layout, request):
    """Exact float32's NT / TT default for large grids (16 x 8 outputs per thread, 128x128 tiles) on CUDA: 4092 x
    4100 x 4000 (edge tiles on both sides, a partial K tile; rows of whole 16-byte words, as the planner hands the
    kernel), alpha and beta * C, NaN-prefilled, against float64."""
    M, N, K = 4092, 4100, 4000
    spec = P.default_spec("float32", layout=layout, epilogue="axpby", M=M, N=N, K=K)
    assert spec.simt_rows == 16
    out, ref = _launch_on_cuda(spec, M, N, K, _rng(request), batch=1)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_simt_128x256_default_on_cuda(epilogue, request):
    """Exact float32's NN default for whole 128x256 tiles in full waves (16 x 8 outputs per thread, 256 threads,
    32-deep K tiles, interleaved copies) on CUDA: 2048 x 2048 x 2056 (one wave of 128 tiles, a partial K tile), two
    batch entries (B broadcast), alpha and (axpby) beta * C, NaN-prefilled, against float64."""
    M, N, K = 2048, 2048, 2056
    spec = P.default_spec("float32", layout="NN", epilogue=epilogue, M=M, N=N, K=K)
    assert (spec.tm, spec.tn, spec.tk, spec.simt_rows, spec.interleave) == (128, 256, 32, 16, True)
    out, ref = _launch_on_cuda(spec, M, N, K, _rng(request), batch=2)
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("kind,layout,over", [
    ("float64", "NN", dict(stages=4, swizzle=True)), ("float64", "NT", dict(stages=4, swizzle=True)),
    ("float64", "TN", dict(stages=4, swizzle=True)), ("float64", "TT", dict(stages=4, swizzle=True)),
    ("float64", "NN", dict(stages=4, swizzle=True, interleave=True)), ("float64", "TN", dict(interleave=True)),
    ("float64", "NT", dict(tm=64, stream_k=3, interleave=True)), ("simt", "NN", dict(interleave=True)),
    ("simt", "TT", dict(stream_k=3, interleave=True))], ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
def test_swizzled_and_interleaved_on_cuda(kind, layout, over, epilogue, request):
    """Swizzled float64 stages (the 4096^3 default's) in every layout, and interleaved K steps (float64 and SIMT, with
    stream-K) launched on CUDA: two batch entries of 1000x1000 (M and N edges), K 520 (a partial K tile), alpha and
    beta * C, NaN-prefilled, against float64."""
    if kind == "simt":
        spec = dataclasses.replace(P.default_spec("float32", layout=layout, epilogue=epilogue, M=4096, N=4096, K=4096),
                                   **over)
    else:
        base = P.default_spec("float64", layout=layout, epilogue=epilogue, M=4096, N=4096, K=4096)
        pad = dict(pad_ab=0) if over.get("swizzle") else dict(pad_ab=4, swizzle=False, stages=3)
        spec = dataclasses.replace(base, **{**pad, **over})
        if spec.stream_k:
            spec = dataclasses.replace(spec, tn=64, min_blocks=3)
    assert P.unfit(spec) == "", spec
    out, ref = _launch_on_cuda(spec, 1000, 1000, 520, _rng(request))
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("dtype,shape", [("float64", (1100, 1000, 1030)), ("float64", (1000, 1000, 1000)),
                                         ("float64", (1024, 1024, 1024)), ("float32", (1000, 1000, 1000))],
                         ids=lambda v: str(v))
def test_defaults_with_edge_copies_on_cuda(dtype, shape, layout, epilogue, request):
    """float64's and exact float32's CUDA defaults where edge copies apply (spec.edge_copy: the large-grid 128x64x32
    interleaved tiles, the small-grid stream-K tiles; TT's large-grid tiles without) and where no tile crosses an
    edge (1024^3): two batch entries, every layout, alpha and beta * C, NaN-prefilled, against float64."""
    M, N, K = shape
    spec = P.default_spec(dtype, layout=layout, epilogue=epilogue, M=M, N=N, K=K)
    assert spec.edge_copy == (M % spec.tm != 0 and not (layout == "TT" and not spec.stream_k))
    out, ref = _launch_on_cuda(spec, M, N, K, _rng(request))
    _assert_close(out, ref, spec.out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,shape", [("float64", (1000, 1000, 1000)), ("float64", (64, 64, 64)),
                                         ("float64", (33, 17, 65)), ("float32", (1000, 1000, 1000)),
                                         ("float32", (33, 17, 65)), ("float32", (64, 64, 64)),
                                         ("float64", (2048, 2048, 256)), ("float64", (1001, 999, 1003)),
                                         ("float32", (999, 1001, 997)), ("float64", (1100, 1000, 1030)),
                                         ("float64", (333, 4096, 1000))], ids=lambda v: str(v))
def test_snippet_defaults_on_cuda(dtype, shape, planned, request):
    """The default path on CUDA for exact float32 and float64 at every size: the SIMT / DMMA kernels (small grids:
    stream-K for float32 and for float64's 64x64x16 tiles, 64x32 tiles for float64's smallest grids), never
    tile_matmul, correct against float64 with a NaN-prefilled output (row strides not 16-byte aligned staged
    first)."""
    from conftest import make, nan_like, to_f64

    import warp_gemm

    M, N, K = shape
    a, b = random_operands(M, N, K, dtype, _rng(request))
    out = nan_like("warp", (M, N), dtype, "cuda")
    warp_gemm.matmul(make(a, dtype, "warp", "cuda"), make(b, dtype, "warp", "cuda"), out=out)
    _assert_close(to_f64(out), np.matmul(a, b), dtype)
    spec = planned[-1].family_spec
    assert planned[-1].family == "pipelined" and (spec.simt if dtype == "float32" else spec.mma), planned[-1].family
