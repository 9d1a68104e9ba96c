"""The skinny family: one output side of at most 16, split K with a finishing pass."""

from .kernel import (
    _SPLIT_BLOCKS,
    MAX_SMALL,
    SPLIT_PIPE,
    SkinnySpec,
    _finish_kernel,
    choose_spec,
    finish_kernel,
    finish_launch,
    get_kernel,
    launch_args,
    split_k_views,
    split_pipe_config,
    split_pipe_workspace_shape,
    workspace_shape,
)
