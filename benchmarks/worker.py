"""One side of a comparison in its own process, driven over a pipe by ``harness.Contestant``.

    python -m benchmarks.worker SIDE THREADS IDLE TARGET CLOCK [--keep-freed-memory]

Messages are pickled tuples: the parent sends ``("build", name, sizes)``, then ``("round",)`` as
often as it likes; the worker answers each. It first says ``("ready", info)`` (library, BLAS and
thread counts as this process sees them). ``build`` checks nothing itself: it returns the side's
float64 results (``Bench.results``) for the parent to compare, then builds the float32 workload,
runs it twice to warm up and picks `inner`, the calls per sample that make a sample last about
TARGET seconds. ``round`` idles IDLE seconds (OpenBLAS's threads spin for about 0.1 s after a
call and would slow whatever runs next on a small machine), then times `inner` calls and
answers the seconds per call, by CLOCK: "wall" (time.perf_counter) or "cpu" (this process's
CPU time, time.process_time: a loaded machine's waits for a core are left out, which is fair
between sides only when each runs one thread). Closing the pipe ends the worker. Anything the
side prints goes to stderr: stdout carries only the messages.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import time
import traceback


def _info(side: str, threads: int) -> dict:
    import numpy as np

    from .harness import openblas_threads

    info = {"numpy": np.__version__, "openblas_threads": openblas_threads()}
    if side == "torch":
        import torch
        torch.set_num_threads(threads)
        info.update(version=torch.__version__, intra_op_threads=torch.get_num_threads())
    elif side == "ours":
        from tinygrad_attn.kernels import threads
        info["batch_threads"] = threads.get_threads()
    elif side == "mygrad":
        import mygrad
        info["version"] = mygrad.__version__
    return info


def serve(side: str, threads: int, idle: float, target: float, clock: str) -> None:
    from .sides import SIDES

    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr

    def send(*message: object) -> None:
        pickle.dump(message, channel_out)
        channel_out.flush()

    try:
        send("ready", _info(side, threads))
        module = importlib.import_module(f"benchmarks.sides.{SIDES[side]}")
    except Exception:
        send("error", traceback.format_exc())
        return
    import numpy as np

    bench, inner = None, 1
    now = time.process_time if clock == "cpu" else time.perf_counter
    while True:
        try:
            message = pickle.load(channel_in)
        except EOFError:
            return
        try:
            if message[0] == "build":
                _, name, sizes = message
                checked = module.build(name, sizes, np.float64)
                if checked is None:
                    send("absent")
                    continue
                results = None if checked.results is None else checked.results()
                bench = module.build(name, sizes, np.float32)
                bench.step()
                start = now()
                bench.step()
                inner = max(1, round(target / max(now() - start, 1e-6)))
                send("built", results, bench.note, inner)
            elif message[0] == "round":
                time.sleep(idle)
                start = now()
                for _ in range(inner):
                    bench.step()
                send("time", (now() - start) / inner)
        except Exception:
            send("error", traceback.format_exc())


if __name__ == "__main__":
    side, threads, clock = sys.argv[1], int(sys.argv[2]), sys.argv[5]
    idle, target = float(sys.argv[3]), float(sys.argv[4])
    if "--keep-freed-memory" in sys.argv[6:]:
        from tinygrad_attn.training.host_memory import keep_freed_memory
        keep_freed_memory()
    serve(side, threads, idle, target, clock)
