"""A call's first loads (warp_gemm.core.launches.Deferred, preload) and the sm_90a suffix gate (_compat)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import DEVICES

import warp as wp

from warp_gemm import _compat
from warp_gemm.core import launches


def _nan3(shape, device):
    return wp.array(np.full(shape, np.nan, np.float32), dtype=wp.float32, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_deferred_launches_in_order_on_exit(device):
    """Inside the block nothing runs; on exit every launch runs in the order made (the convert reads the fill)."""
    a, b = _nan3((2, 3, 5), device), _nan3((2, 3, 5), device)
    with launches.Deferred() as d:
        launches.fill(a, "float32", 3.0)
        launches.convert(b, a, "float32", "float32", 2.0)
        assert len(d.todo) == 2
        assert np.isnan(a.numpy()).all() and np.isnan(b.numpy()).all()
    np.testing.assert_array_equal(a.numpy(), 3.0)
    np.testing.assert_array_equal(b.numpy(), 6.0)


@pytest.mark.parametrize("device", DEVICES)
def test_deferred_error_launches_nothing(device):
    a = _nan3((1, 4, 4), device)
    with pytest.raises(RuntimeError, match="in the block"):
        with launches.Deferred():
            launches.fill(a, "float32", 1.0)
            raise RuntimeError("in the block")
    assert np.isnan(a.numpy()).all()
    launches.fill(a, "float32", 1.0)  # this thread launches directly again
    np.testing.assert_array_equal(a.numpy(), 1.0)


def test_deferred_nested_hands_launches_to_the_outer_block():
    a = _nan3((1, 2, 2), "cpu")
    with launches.Deferred() as outer:
        with launches.Deferred():
            launches.fill(a, "float32", 5.0)
        assert len(outer.todo) == 1 and np.isnan(a.numpy()).all()
    np.testing.assert_array_equal(a.numpy(), 5.0)


def test_suffix_gate_keeps_plain_loads_out_of_an_arch_load():
    """A plain load waits while an arch-specific one holds the gate; plain loads share it."""
    gate = _compat._SuffixGate()
    entered = threading.Event()

    def plain():
        with gate.plain():
            entered.set()

    with gate.plain():
        t = threading.Thread(target=plain)
        t.start()
        assert entered.wait(10), "a second plain load must not wait for the first"
        t.join()
    entered.clear()
    with gate.arch():
        t = threading.Thread(target=plain)
        t.start()
        assert not entered.wait(0.3), "a plain load entered while an arch-specific load held the gate"
    assert entered.wait(10)
    t.join()


def _fresh_kernel(tag: str):
    def add(x: wp.array(dtype=wp.float32), v: float):
        i = wp.tid()
        x[i] = x[i] + v

    return _compat.make_kernel(add, f"wg_test_preload_{tag}_{np.random.randint(1 << 30)}")


@pytest.mark.gpu
def test_preload_builds_new_modules_once_then_launches():
    dev = wp.get_device("cuda")
    k1, k2 = _fresh_kernel("a"), _fresh_kernel("b")
    assert launches.preload([(k1, dev, None), (k2, dev, None), (k1, dev, None)]) == 2
    for k in (k1, k2):
        assert (id(k), str(dev), None) in launches._ready
    assert launches.preload([(k1, dev, None), (k2, dev, None)]) == 0
    x = wp.zeros(7, dtype=wp.float32, device=dev)
    launches.launch(k1, (7,), [x, 1.5], dev, None, tiled=False)
    launches.launch(k2, (7,), [x, 2.0], dev, None, tiled=False)
    np.testing.assert_array_equal(x.numpy(), 3.5)


def test_preload_leaves_the_cpu_to_first_launches():
    k1, k2 = _fresh_kernel("c"), _fresh_kernel("d")
    assert launches.preload([(k1, wp.get_device("cpu"), None), (k2, wp.get_device("cpu"), None)]) == 0


def test_eager_torch_calls_leave_symbolic_shapes_unimported():
    # torch._check_value and its kin import torch.fx.experimental.symbolic_shapes (and sympy) on first use: 0.3 s of a
    # first eager call; the torch ops check plain bools themselves (torch/ops.py: _check)
    import subprocess
    import sys

    code = ("import sys, torch, warp, warp_gemm\nwarp.config.quiet = True\n"
            "a = torch.randn(8, 8)\nwarp_gemm.linear(a, a, torch.randn(8))\nwarp_gemm.gemm(a, a)\n"
            "warp_gemm.matmul(a, a)\n"
            "print('symbolic_shapes' if 'torch.fx.experimental.symbolic_shapes' in sys.modules else 'clean')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "clean"
