"""The benchmark runner with module settings changed first: a candidate default measured by the runner itself (same
timing, same cuBLAS row) before it is made the default.

    python3 benchmarks/probes/runner_with.py gemv.BANDS_FUSED=True gemv.BANDS_GROUPS=8 -- --shapes 1x4096x4096 ...

Each setting is ``module.NAME=VALUE`` with module one of plan, pipelined, gemv, skinny (as in round6.py's variants)
and VALUE a Python literal; everything after ``--`` goes to ``benchmarks/run.py``.
"""

import ast
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit(__doc__)
    cut = argv.index("--")
    over: dict = {}
    for item in argv[:cut]:
        name, _, value = item.partition("=")
        module, _, attr = name.partition(".")
        if not attr or not value:
            raise SystemExit(f"runner_with.py: {item!r} is not module.NAME=VALUE")
        over.setdefault(module, {})[attr] = ast.literal_eval(value)
    sys.path.insert(0, HERE)
    from round6 import patch  # the probes' one way of changing module settings

    patch(over)
    print(f"# runner_with: {over}", flush=True)
    sys.argv = [os.path.join(HERE, "..", "run.py")] + argv[cut + 1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
