"""``warp_gemm.torch.Linear``: a drop-in ``torch.nn.Linear`` with a fused-able activation."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from ..families.common.epilogue import check_activation
from .ops import linear


class Linear(nn.Module):
    """``y = activation(x @ weight.T + bias)`` through the ``warp_gemm::linear`` operator.

    Parameters, shapes and initialisation are those of ``torch.nn.Linear`` (``weight`` of shape
    ``(out_features, in_features)`` from ``kaiming_uniform_(a=sqrt(5))``, ``bias`` of shape
    ``(out_features,)`` from ``uniform(-1/sqrt(in_features), 1/sqrt(in_features))``), so with the same
    seed the tensors are the same as ``torch.nn.Linear``'s. ``activation``: None, "relu", "gelu" (erf),
    "gelu_tanh", "silu" or "tanh"; an unknown name raises ValueError.
    """

    __constants__ = ["in_features", "out_features", "activation"]

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation: Optional[str] = None, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.activation = check_activation(activation)
        self.weight = nn.Parameter(torch.empty((out_features, in_features), **factory_kwargs))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # As torch.nn.Linear.reset_parameters (the same draws in the same order).
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, activation=self.activation)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, activation={self.activation!r}")
