"""What the command-line tools need to know about devices before they start: is there a CUDA device,
and a one-line reason when a command cannot run where it was asked to."""

from __future__ import annotations


class Unavailable(Exception):
    """A command's device or backend is missing here; ``warp-gemm`` prints the message as one line and
    exits with status 2."""


def quiet_warp():
    """Warp, initialised without its banner and per-module lines (warnings still show); returns ``warp``."""
    import warp as wp

    if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 replaced config.quiet by a log level
        wp.config.log_level = wp.LOG_WARNING
    else:
        wp.config.quiet = True
    from warp_gemm import _compat

    _compat.init()
    return wp


def cuda_count() -> int:
    """CUDA devices Warp sees (0 where its CUDA driver is missing)."""
    return quiet_warp().get_cuda_device_count()


def require_cuda(device: str, what: str) -> None:
    """Raise :class:`Unavailable` unless ``device`` is a CUDA device that exists here."""
    if not str(device).startswith("cuda"):
        raise Unavailable(f"{what} runs on a CUDA device, not --device {device}")
    n = cuda_count()
    if n == 0:
        raise Unavailable(f"{what} needs a CUDA device, and Warp sees none here")
    idx = str(device)[5:]
    if idx and (not idx.isdigit() or int(idx) >= n):
        raise Unavailable(f"--device {device}: this machine has {n} CUDA device(s), cuda:0 to cuda:{n - 1}")
