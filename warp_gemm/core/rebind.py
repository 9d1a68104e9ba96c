"""Plans re-bound to new operands: a call on operands of a shape, layout, dtype and alignment class already
planned replays that plan's launches with the new addresses patched in, without validating or planning again.

A kept call plan (core/execute.py) is keyed on its operands' addresses, so a call on new buffers of planned
shapes paid validation, planning and launch packing again: 401-623 us of host time per call against
torch.matmul's 15-18 (H200 host, pools of 400-1000 operand sets). A :class:`Template` holds its own copies
of a plan's recorded launches and, for every array parameter that points into an operand, which operand
and at what byte offset; re-binding writes ``new base + offset`` into those parameters (a ctypes field each)
before replaying them.

What makes this safe:

- The key (``fastpath.template_key``) holds everything the fast path's key holds except the addresses:
  each operand's container type, shape, strides, dtype and device, the largest power of two up to 16
  dividing its address (every alignment rule of the planner and the families -- copy chunks of 2-16
  bytes, 16-byte vector loads, TMA's 16 -- is decided by it), and how the operands relate: disjoint, or the same view (``c is out``). Operands that overlap
  otherwise, or are empty, take the full path.
- A template is built only where every array parameter of every launch points into an operand or into a
  cached workspace (core/workspaces.py: the same buffer for every call of this thread and stream), and no
  parameter is a 64-bit integer or a struct (either may hold an address: the Hopper family passes its tensor
  maps' addresses so): anything else (a per-call temporary, a family's own table of addresses) is refused and
  that call shape keeps the full path.
- Templates are per thread and stream (in the key), like the plans they come from, so one template is never
  patched and launched by two threads at once. Warp's API capture records launches from their argument
  lists, which re-bound copies do not keep, so while it captures, calls take the full path.
"""

from __future__ import annotations

import copy
import ctypes

from warp_gemm.core import launches
from warp_gemm.core.lru import LRU


class Template:
    """A plan's launches (own copies) and where the operands' addresses go in them."""

    __slots__ = ("cmds", "relocs", "recipe", "d_align")

    def __init__(self, cmds: tuple, relocs: tuple):
        self.cmds = cmds
        self.relocs = relocs  # ((array_t parameter, operand index, byte offset), ...)
        self.recipe = None  # calls without ``out``: how to make the result (fastpath._NewResult)
        self.d_align = 0  # ... and its address's alignment (fastpath.align_class) when the template was built

    def run(self, bases, stream) -> None:
        """Patch ``bases`` (each operand's lowest address, in key order) in and launch."""
        for param, j, off in self.relocs:
            param.data = bases[j] + off
        launches.replay(self.cmds, stream)


_templates = LRU(512)


def clear() -> None:
    _templates.clear()


def _is_array_param(p) -> bool:
    return type(p).__name__ == "array_t" and isinstance(p, ctypes.Structure)


def _clone(cmd):
    """A copy of a recorded launch whose array parameters are its own (scalars and bounds shared: never patched)."""
    out = copy.copy(cmd)
    out.__dict__.pop("_wg_native", None)  # the original's native arguments name its own parameter block
    params = [type(p).from_buffer_copy(p) if _is_array_param(p) else p for p in cmd.params]
    out.params = params
    if getattr(cmd, "params_addr", None):
        out.params_addr = (ctypes.c_void_p * len(params))(*[ctypes.c_void_p(ctypes.addressof(x)) for x in params])
    if hasattr(out, "fwd_args"):
        out.fwd_args = None
        out.adj_args = None
    return out


_WIDE = (ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_longlong)


def build(cmds: tuple, ranges: list, owned) -> Template | None:
    """A template of ``cmds`` for operands spanning ``ranges`` ([(lo, hi)] in key order, the result last), or None
    where a launch names memory that is neither an operand nor ``owned(ptr)`` (a cached workspace)."""
    clones, relocs = [], []
    for cmd in cmds:
        if not hasattr(cmd, "params") or not isinstance(cmd.params, list):
            return None
        c = _clone(cmd)
        for p in c.params[1:]:
            if _is_array_param(p):
                if p.grad:
                    return None
                d = int(p.data)
                if not d:
                    continue
                j = _inside(d, ranges)
                if j is None:
                    if not owned(d):
                        return None
                    continue
                relocs.append((p, j, d - ranges[j][0]))
            elif isinstance(p, _WIDE) or isinstance(p, ctypes.Structure):
                return None  # a 64-bit scalar or a struct may hold an address (the Hopper family's tensor maps)
        clones.append(c)
    return Template(tuple(clones), tuple(relocs))


def _inside(addr: int, ranges: list) -> int | None:
    for j, (lo, hi) in enumerate(ranges):
        if lo <= addr < hi:
            return j
    return None


def put(key: tuple, t: Template) -> None:
    _templates.put(key, t)


def get(key: tuple) -> Template | None:
    return _templates.peek(key)
