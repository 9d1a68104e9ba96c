"""The host family: CPU products on the BLAS that NumPy or torch already have."""

from .kernel import _blas_ready, _onednn, bf16_bits_to_f32, calls, f32_to_bf16_bits, run_numpy, run_torch
