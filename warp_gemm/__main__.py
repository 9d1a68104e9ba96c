"""``python -m warp_gemm <command>``: the ``warp-gemm`` console script."""

import sys

from warp_gemm.tools.cli import main

sys.exit(main())
