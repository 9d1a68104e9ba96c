"""GPU time of one call, for the probes: the call captured in a CUDA graph (after one call on a side
stream, as capture requires) and the graph replayed; no host time, no launch gaps."""

from __future__ import annotations


def replay_us(fn, warm: int = 10, rounds: int = 7, reps: int = 50) -> float:
    """Median over ``rounds`` of the mean time of ``reps`` back-to-back replays of ``fn`` captured once,
    in microseconds, after ``warm`` replays."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        e0.record()
        for _ in range(reps):
            g.replay()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) / reps * 1e3)
    return sorted(ts)[len(ts) // 2]
