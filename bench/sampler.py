"""Run a module as ``python -m`` would, sampling where its CPU goes (a profile in CPU time).

``python bench/sampler.py OUT.txt -m actors.cli worker ...``: every millisecond of the
process's CPU, or the kernel's timer tick if coarser (``ITIMER_PROF``: user and
system time, so a system call's kernel work counts where it was made), a signal
records the main thread's stack; when the
module ends (a SIGTERM'd process returns from its stop as usual) OUT.txt gets the
functions by their own samples and by the samples under them. Unlike cProfile,
which times every call on the wall clock, this costs a few µs per sample, not per
call, and a process preempted by others on a busy machine is not charged for the
wait. Only the main thread is seen (the event loop's: the worker's job threads run
sync jobs alone). `bench/e2e_work.py --profile-worker DIR` runs its first worker so.
"""

from __future__ import annotations

import collections
import runpy
import signal
import sys
import time
from pathlib import Path
from types import FrameType

INTERVAL_S = 0.001
DEPTH = 40  # frames kept per sample: deeper ones are counted under their caller
SHOWN = 60


def _where(frame: FrameType) -> str:
    code = frame.f_code
    path = code.co_filename
    for marker in ("site-packages/", "/lib/python3", "/actors/", "/topics/", "/bench/"):
        if marker in path:
            path = path.split(marker, 1)[1] if marker != "/lib/python3" else path.rsplit("/", 1)[1]
            break
    return f"{path}:{code.co_firstlineno}({code.co_name})"


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "-m":
        raise SystemExit("usage: sampler.py OUT -m MODULE [ARGS...]")
    out, module = Path(argv[0]), argv[2]
    own: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    samples = [0]

    def sample(signum: int, frame: FrameType | None) -> None:
        samples[0] += 1
        if frame is None:
            return
        own[_where(frame)] += 1
        seen = set()
        depth = 0
        while frame is not None and depth < DEPTH:
            where = _where(frame)
            if where not in seen:  # a recursive function counts once per sample
                seen.add(where)
                under[where] += 1
            frame = frame.f_back
            depth += 1

    signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL_S, INTERVAL_S)
    sys.argv = [module, *argv[3:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        total = max(1, samples[0])
        # The kernel's timer may tick coarser than asked (every 4 ms at HZ=250).
        cpu_s = time.process_time()
        lines = [f"{samples[0]} samples over {cpu_s:.1f} s of CPU", "", "own:"]
        lines += [f"{n:7d} {100 * n / total:5.1f}%  {w}" for w, n in own.most_common(SHOWN)]
        lines += ["", "under (inclusive):"]
        lines += [f"{n:7d} {100 * n / total:5.1f}%  {w}" for w, n in under.most_common(SHOWN)]
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
