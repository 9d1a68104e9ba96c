"""The one spelling of dtypes on every command line (``warp-gemm check/bench/tune/precompile``, the examples).

Short names ``fp16``, ``bf16``, ``tf32``, ``fp32``, ``fp64`` and the long ones ``float16``, ``bfloat16``,
``float32``, ``float64`` (also ``f16``, ``half``, ``f32``, ``float``, ``f64``, ``double``), case-insensitive,
comma-separated. ``tf32`` is float32 data multiplied on TF32 tensor cores (``allow_tf32=True``).
"""

from __future__ import annotations

#: The canonical names: the four storage dtypes and ``tf32``.
NAMES = ("float16", "bfloat16", "float32", "tf32", "float64")

ALIASES: dict[str, str] = {
    **dict.fromkeys(("fp16", "f16", "half", "float16"), "float16"),
    **dict.fromkeys(("bf16", "bfloat16"), "bfloat16"),
    **dict.fromkeys(("fp32", "f32", "float", "float32"), "float32"),
    "tf32": "tf32",
    **dict.fromkeys(("fp64", "f64", "double", "float64"), "float64"),
}

#: What a ``--dtype`` help text or error names.
SPELLINGS = "fp16, bf16, tf32, fp32, fp64 (or float16, bfloat16, float32, float64)"

SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "tf32": "tf32", "float64": "fp64"}


def canon(name: str) -> str:
    """The canonical name (:data:`NAMES`) of one spelling; ValueError naming the accepted ones."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        raise ValueError(f"unknown dtype {name!r}; use {SPELLINGS}")
    return ALIASES[key]


def parse_list(text: str) -> list[str]:
    """Canonical names of a comma-separated list, in order, without duplicates."""
    names = [canon(part) for part in str(text).split(",") if part.strip()]
    if not names:
        raise ValueError(f"no dtype given; use {SPELLINGS}")
    return list(dict.fromkeys(names))


def storage(name: str) -> tuple[str, bool]:
    """(the operands' dtype, whether TF32 products are allowed) of a canonical name."""
    return ("float32", True) if name == "tf32" else (name, False)


def storage_arg(text: str) -> str:
    """An ``argparse`` ``type=`` for one storage dtype (any spelling; ``tf32`` refused: it is a product mode)."""
    import argparse

    try:
        name = canon(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if name == "tf32":
        raise argparse.ArgumentTypeError("tf32 is float32 data with TF32 products: pass fp32 (and --allow-tf32 "
                                         "where the program has it)")
    return name
