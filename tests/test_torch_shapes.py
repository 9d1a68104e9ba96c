"""warp_gemm/core/broadcast.py: torch.matmul's shape semantics as 2-D/3-D GEMM views, checked against
torch.matmul itself for every rank combination (1-D to 4-D), broadcast patterns and strided inputs;
and warp_gemm.torch.matmul, which uses it, against float64 torch.matmul, gradients included."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

import warp_gemm._compat as compat  # noqa: E402
import warp_gemm.torch as wgt  # noqa: E402
from warp_gemm.core.broadcast import matmul_shapes  # noqa: E402

F64 = torch.float64
M, K, N = 3, 4, 5


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2**62)))


def operand_shapes(rank, rows, cols, batches):
    if rank == 1:
        return [(cols,)] if rows == "a" else [(rows,)]
    return [tuple(bt) + (rows, cols) for bt in batches[rank - 2]]


# batch shapes by extra rank: (), 1-D batches, 2-D batches (with broadcasting 1s)
BATCH_A = [[()], [(2,), (1,)], [(2, 3), (1, 3), (2, 1), (1, 1)]]
BATCH_B = [[()], [(3,), (1,)], [(2, 3), (2, 1), (1, 3), (1, 1)]]


def cases():
    out = []
    for ra, rb in itertools.product((1, 2, 3, 4), repeat=2):
        sas = [(K,)] if ra == 1 else [tuple(bt) + (M, K) for bt in BATCH_A[ra - 2]]
        sbs = [(K,)] if rb == 1 else [tuple(bt) + (K, N) for bt in BATCH_B[rb - 2]]
        for sa, sb in itertools.product(sas, sbs):
            try:
                torch.broadcast_shapes(sa[:-2] if len(sa) > 1 else (), sb[:-2] if len(sb) > 1 else ())
            except RuntimeError:
                continue
            out.append((sa, sb))
    return out


CASES = cases()


def layouts(t, kind):
    """The same values in different memory layouts: contiguous, last two dims transposed in memory,
    a strided slice of a larger tensor, batch-transposed storage."""
    if kind == "contiguous" or t.dim() < 2:
        return t.contiguous()
    if kind == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if kind == "sliced":
        big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        big[..., ::2] = t
        return big[..., ::2]
    if kind == "batch_permuted" and t.dim() >= 4:
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    return t.contiguous()


def present(t, view, is_a):
    """The operand as the GEMM sees it: a strided view of its own memory, or the copy it asks for."""
    p = t.unsqueeze(0) if (is_a and t.dim() == 1) else (t.unsqueeze(-1) if t.dim() == 1 else t)
    expected = p.expand(view.expand_shape).reshape(view.shape)
    if view.copy:
        return expected, None
    v = torch.as_strided(t, view.shape, view.strides, t.storage_offset())
    return v, expected


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "batch_permuted"])
@pytest.mark.parametrize("sa,sb", CASES, ids=[f"{list(a)}@{list(b)}" for a, b in CASES])
def test_views_compute_torch_matmul(sa, sb, layout, gen):
    a = layouts(torch.randn(*sa, generator=gen, dtype=F64), layout)
    b = layouts(torch.randn(*sb, generator=gen, dtype=F64), layout)
    want = torch.matmul(a, b)
    plan = matmul_shapes(a.shape, a.stride(), b.shape, b.stride())
    assert plan.result_shape == tuple(want.shape)
    av, a_exp = present(a, plan.a, True)
    bv, b_exp = present(b, plan.b, False)
    for v, exp in ((av, a_exp), (bv, b_exp)):
        assert v.dim() in (2, 3)
        if exp is not None:  # the zero-copy view reads exactly the values it stands for
            assert torch.equal(v, exp)
    if av.dim() == 3 and bv.dim() == 3:
        assert av.shape[0] == bv.shape[0]
    out = torch.matmul(av, bv)
    assert tuple(out.shape) == plan.out_shape
    torch.testing.assert_close(out.reshape(plan.result_shape), want, rtol=1e-12, atol=1e-12)


def test_contiguous_full_batches_never_copy():
    for sa, sb in CASES:
        ba, bb = sa[:-2], sb[:-2]
        a = torch.empty(sa)
        b = torch.empty(sb)
        plan = matmul_shapes(a.shape, a.stride(), b.shape, b.stride())
        partial = lambda own: 1 < torch.Size(own).numel() < torch.Size(plan.batch_shape).numel()  # noqa: E731
        assert plan.a.copy == (len(sa) > 1 and partial(ba)), (sa, sb, plan)
        assert plan.b.copy == (len(sb) > 1 and partial(bb)), (sa, sb, plan)


def test_fold_and_vector_cases():
    p = matmul_shapes((2, 3, M, K), (3 * M * K, M * K, K, 1), (K, N), (N, 1))
    assert p.a.kind == "fold" and p.a.shape == (6 * M, K) and p.a.strides == (K, 1)
    assert p.out_shape == (6 * M, N) and p.result_shape == (2, 3, M, N)
    p = matmul_shapes((K,), (1,), (K,), (3,))
    assert p.out_shape == (1, 1) and p.result_shape == ()
    p = matmul_shapes((K,), (1,), (7, K, N), (K * N, N, 1))
    assert p.a.kind == "matrix" and p.b.kind == "batch" and p.result_shape == (7, N)
    p = matmul_shapes((7, M, K), (M * K, K, 1), (K,), (1,))
    assert p.a.kind == "fold" and p.result_shape == (7, M)
    # a batch dimension of stride 0 (an expanded operand) is still a view
    p = matmul_shapes((4, M, K), (0, K, 1), (4, K, N), (K * N, N, 1))
    assert not p.a.copy and p.a.strides == (0, K, 1)


@pytest.mark.parametrize("sa,sb,msg", [
    ((), (K,), "at least one dimension"),
    ((M, K), (K + 1, N), "inner dimensions differ"),
    ((K,), (K + 1,), "inner dimensions differ"),
    ((2, M, K), (3, K, N), "do not broadcast"),
])
def test_errors_where_torch_raises(sa, sb, msg):
    with pytest.raises(RuntimeError):
        torch.matmul(torch.empty(sa), torch.empty(sb))
    with pytest.raises(ValueError, match=msg):
        matmul_shapes(sa, torch.empty(sa).stride(), sb, torch.empty(sb).stride())


def test_zero_sized_dimensions():
    for sa, sb in [((0, M, K), (K, N)), ((2, 0, K), (2, K, N)), ((M, 0), (0, N)), ((0, 1, M, K), (3, K, N))]:
        a, b = torch.empty(sa), torch.empty(sb)
        p = matmul_shapes(sa, a.stride(), sb, b.stride())
        assert p.result_shape == tuple(torch.matmul(a, b).shape)


# --- warp_gemm.torch.matmul with torch.matmul semantics ---------------------------------------------------
TORCH_CASES = [c for c in CASES if len(c[0]) not in (2, 3) or len(c[1]) not in (2, 3)]


@pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")
@pytest.mark.parametrize("sa,sb", TORCH_CASES, ids=[f"{list(a)}@{list(b)}" for a, b in TORCH_CASES])
def test_wgt_matmul_any_rank_matches_float64_torch(sa, sb, gen):
    a = torch.randn(*sa, generator=gen, dtype=F64, requires_grad=True)
    b = torch.randn(*sb, generator=gen, dtype=F64, requires_grad=True)
    out = wgt.matmul(a, b)
    want = torch.matmul(a, b)
    assert out.shape == want.shape
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    g = torch.randn(want.shape, generator=gen, dtype=F64)
    ga, gb = torch.autograd.grad(out, (a, b), g)
    wa, wb = torch.autograd.grad(want, (a, b), g)
    torch.testing.assert_close(ga, wa, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gb, wb, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")
def test_wgt_matmul_attention_shapes_compile_fullgraph(gen):
    """(B, H, S, D) @ (B, H, D, S), then a matrix-vector product, under torch.compile(fullgraph=True)."""
    torch._dynamo.reset()

    def attn(q, k, v, w):
        return wgt.matmul(wgt.matmul(torch.softmax(wgt.matmul(q, k.transpose(-1, -2)), -1), v), w)

    f = torch.compile(attn, fullgraph=True, backend="aot_eager")
    q, k, v = (torch.randn(2, 3, 4, 5, generator=gen, dtype=F64, requires_grad=True) for _ in range(3))
    w = torch.randn(5, generator=gen, dtype=F64, requires_grad=True)
    out = f(q, k, v, w)
    want = torch.softmax(q @ k.transpose(-1, -2), -1) @ v @ w
    assert out.shape == want.shape == (2, 3, 4)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad(out.sum(), (q, k, v, w))
    wants = torch.autograd.grad(want.sum(), (q, k, v, w))
    for g, x in zip(grads, wants):
        torch.testing.assert_close(g, x, rtol=1e-12, atol=1e-12)
