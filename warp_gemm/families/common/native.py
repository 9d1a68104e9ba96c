"""Native CUDA snippets: loaded from the ``.cuh`` files beside each family, filled, registered.

A family keeps its CUDA in ``native/*.cuh`` files. Each file holds named snippets::

    //! snippet copy template          <- a section: its name, "template" when it has ${FIELDS}, "nonl" when
    //! What it assumes (comment).        the text has no final newline; the //! lines are documentation
    ...CUDA text (the CPU twin in the same snippet's #else branch)...

``load`` returns ``{name: text}``; ``fill(text, **fields)`` substitutes ``${NAME}`` fields (``$$`` is a
literal ``$``); ``func(snippet, name, stub)`` registers one ``wp.func_native`` under a unique name.
"""

from __future__ import annotations

import functools
import pathlib
import string

import warp as wp

#: C++ element types of Warp's scalar types, by dtype name.
C_TYPES = {"float16": "wp::float16", "bfloat16": "wp::bfloat16", "float32": "wp::float32", "float64": "wp::float64"}
#: Unsigned integer types of a vector store, by its width in bytes.
VEC_TYPES = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long", 16: "::uint4"}


@functools.cache
def _parse(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name, flags, body, in_doc = None, (), [], False

    def close():
        if name is not None:
            text = "".join(body)
            if "nonl" in flags and text.endswith("\n"):
                text = text[:-1]
            out[name] = text

    for line in pathlib.Path(path).read_text().splitlines(keepends=True):
        if line.startswith("//! snippet "):
            close()
            words = line.split()[2:]
            name, flags, body, in_doc = words[0], tuple(words[1:]), [], True
            continue
        if name is None or (in_doc and line.startswith("//!")):
            continue
        in_doc = False
        body.append(line)
    close()
    return out


def load(module_file: str, cuh: str) -> dict[str, str]:
    """The snippets of ``native/<cuh>`` beside the module file ``module_file`` (``__file__``)."""
    return _parse(str(pathlib.Path(module_file).resolve().parent / "native" / cuh))


def fill(template: str, **fields) -> str:
    """``template`` with its ``${NAME}`` fields replaced (extra fields are ignored, a missing one raises)."""
    return string.Template(template).substitute(**fields)


def func(snippet: str, name: str, stub):
    """``wp.func_native(snippet)`` on ``stub`` under ``name``: Warp keys native functions by qualified name
    within the Python module, so two kernels' snippets must not share one."""
    stub.__name__ = stub.__qualname__ = name
    return wp.func_native(snippet)(stub)
