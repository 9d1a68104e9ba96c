"""``python -m warp_gemm <command>``: the ``warp-gemm`` console script."""

import sys

from .cli import main

sys.exit(main())
