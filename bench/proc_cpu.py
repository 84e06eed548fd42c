"""CPU seconds (user + system) of processes, read from ``/proc/PID/stat``: which process
of the end-to-end path spends the CPU a run costs.

Wall-clock rates on a small shared machine swing by a third from run to run; the CPU
a process spends on the same work swings far less, so `bench/e2e_work.py` reports
each process's CPU over the burst divided by its runs. ``/proc`` (Linux) and no
new dependency: a process whose stat cannot be read counts as unknown (None), never 0.
The figure covers every thread of the process (the kernel sums them for the
thread group), so the broker JVM's network, log and GC threads count too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from actors.broker import process
from actors.broker.layout import BrokerLayout

# utime and stime are fields 14 and 15 of the stat line (1-based); the command name
# (field 2) is in parentheses and may hold spaces and parentheses itself, so the
# fields are counted after its last ")": there utime is the 12th, stime the 13th.
_UTIME_AFTER_COMM = 11
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s_of_stat(line: str) -> float:
    """User + system CPU seconds from one ``/proc/PID/stat`` line."""
    fields = line.rsplit(")", 1)[1].split()
    utime, stime = int(fields[_UTIME_AFTER_COMM]), int(fields[_UTIME_AFTER_COMM + 1])
    return (utime + stime) / _TICKS_PER_S


def cpu_s(pid: int) -> float | None:
    """CPU seconds of ``pid`` so far, or None when it cannot be read (gone, no /proc)."""
    try:
        return cpu_s_of_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return None


def broker_pid(bootstrap: str) -> int | None:
    """The pid of the local broker `kafkron broker` started on ``bootstrap``'s port
    (its pid file), or None: another broker, or none of ours."""
    host, _, port = bootstrap.rpartition(":")
    if host not in ("127.0.0.1", "localhost") or not port.isdigit():
        return None
    return process.running_pid(BrokerLayout.resolve(port=int(port)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """CPU seconds of each named process at one instant (None: unreadable)."""

    cpu_s: dict[str, float | None]

    @classmethod
    def take(cls, pids: dict[str, int]) -> Snapshot:
        return cls({name: cpu_s(pid) for name, pid in pids.items()})

    def spent_since(self, before: Snapshot) -> dict[str, float | None]:
        """CPU seconds each process spent between ``before`` and this snapshot."""
        out: dict[str, float | None] = {}
        for name, now in self.cpu_s.items():
            then = before.cpu_s.get(name)
            out[name] = None if now is None or then is None else now - then
        return out
