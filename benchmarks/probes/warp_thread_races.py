"""Open question: does a Warp release still have the two thread-safety defects behind issue 14 (Warp alone)?

Both seen on Warp 1.19; warp_gemm works around them (docs/reliability.md#threads).

    WARP_CACHE_PATH=$(mktemp -d) python benchmarks/probes/warp_thread_races.py load     # Module.load race
    python benchmarks/probes/warp_thread_races.py context                              # lazy context race
    python benchmarks/probes/warp_thread_races.py window                               # the same, made certain

``load``: eight threads make the first ``wp.launch(..., record_cmd=True)`` of one kernel at once (cold
kernel cache). ``wp.launch`` takes the kernel hooks from the executable *its* ``Module.load`` returned;
``Launch.__init__`` calls ``Module.load`` again and retains whatever is cached *now*. When two threads
loaded the module, the second replaced the first in ``Module.execs``; the first executable is then
referenced by nobody, is collected, and unloads its CUDA module: replaying the recorded launch fails with
"Warp CUDA error 400: invalid resource handle".

``context``: ``wp.init()`` in the main thread, then eight threads create their first CUDA arrays at once.
``Device.context`` acquires the primary context lazily and publishes it before ``_init_streams`` has
created the device's stream, so a thread can see ``device.stream`` None (AttributeError
'NoneType' object has no attribute 'cuda_stream').

``window``: the ``context`` race with its window held open: ``Device._init_streams`` is wrapped to sleep
0.5 s first (standing for the scheduler switching threads between Warp's two steps); one thread acquires
the context while the main thread, 0.1 s later, asks for the device's stream. Expected on every run:
AttributeError 'NoneType' object has no attribute 'cuda_stream'.

Prints one line: ``RESULT {"mode": ..., "errors": [...]}`` (empty errors: the race did not show).
"""
import gc
import json
import sys
import threading
import time

import warp as wp

MODE = sys.argv[1] if len(sys.argv) > 1 else "load"
THREADS = 8
wp.config.quiet = True
wp.init()
errors = []
barrier = threading.Barrier(THREADS)

if MODE == "load":
    dev = wp.get_device("cuda:0")
    dev.context  # noqa: B018 -- acquire the context first: only the module-load race is left

    @wp.kernel
    def add_one(x: wp.array(dtype=float)):
        x[wp.tid()] += 1.0

    x = wp.zeros(THREADS, dtype=float, device=dev)
    cmds = [None] * THREADS

    def first_launch(i):
        try:
            barrier.wait()
            cmds[i] = wp.launch(add_one, dim=THREADS, inputs=[x], device=dev, record_cmd=True)
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i} record: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=first_launch, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()  # executables nobody retains unload their CUDA modules here
    for i, cmd in enumerate(cmds):
        if cmd is None:
            continue
        try:
            cmd.launch()
            wp.synchronize_device(dev)
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i} replay: {type(e).__name__}: {str(e)[:160]}")
    if not errors and (x.numpy() != THREADS).any():
        errors.append(f"wrong sums {x.numpy().tolist()}")
elif MODE == "context":

    def first_array(i):
        try:
            barrier.wait()
            a = wp.array([1.0, 2.0, 3.0], dtype=float, device="cuda:0")
            wp.synchronize_device("cuda:0")
            assert a.numpy().sum() == 6.0
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {str(e)[:160]}")

    threads = [threading.Thread(target=first_array, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
elif MODE == "window":
    dev = wp.get_device("cuda:0")
    real_init_streams = type(dev)._init_streams

    def slow_init_streams(self):
        time.sleep(0.5)
        real_init_streams(self)

    type(dev)._init_streams = slow_init_streams
    first = threading.Thread(target=lambda: dev.context)  # publishes the context, then sleeps, then streams
    first.start()
    time.sleep(0.1)
    for what, use in (("wp.get_stream", lambda: wp.get_stream("cuda:0").cuda_stream),
                      ("wp.zeros", lambda: wp.zeros(3, dtype=float, device="cuda:0"))):
        try:
            use()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{what}: {type(e).__name__}: {str(e)[:160]}")
    first.join()
else:
    sys.exit(f"unknown mode {MODE!r}: load | context | window")
print("RESULT " + json.dumps({"mode": MODE, "warp": wp.config.version, "errors": errors}))
