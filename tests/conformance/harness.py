"""The conformance suite's harness: any worker command as a child process
(docs/WORKER-PROTOCOL.md §13).

`KAFKRON_CONFORMANCE_WORKER` names the worker under test: a command whose words may
hold `{worker_id}`, `{concurrency}` and `{session_timeout_ms}` (and `{python}`,
`{go_worker}`), or the word ``python`` (the default) or ``go``. `KAFKRON_GO_WORKER`
names a built Go worker; without it the Go worker is built once per session with
`go build` (the Go toolchain must be installed).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

from tests.kit.paths import REPO
from topics.messages import Result
from topics.names import Settings

PYTHON_WORKER = (
    "{python} -m actors.cli worker --jobs tests.jobs.worker --worker-id {worker_id}"
    " --concurrency {concurrency} --session-timeout-ms {session_timeout_ms}"
)
GO_WORKER = (
    "{go_worker} --test-jobs --worker-id {worker_id} --concurrency {concurrency}"
    " --session-timeout-ms {session_timeout_ms}"
)
GO_SOURCE = REPO / "workers" / "go"


@cache
def go_worker_binary() -> str:
    """The Go worker: `KAFKRON_GO_WORKER`, else built (go build) into a temporary folder."""
    given = os.environ.get("KAFKRON_GO_WORKER")
    if given:
        return given
    out = Path(tempfile.mkdtemp(prefix="kafkron-go-worker-")) / "kafkron-worker"
    subprocess.run(
        ["go", "build", "-o", str(out), "./cmd/kafkron-worker"],
        cwd=GO_SOURCE,
        check=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    return str(out)


def template(name: str) -> str:
    """The command template of ``name`` (``python``, ``go``) or a command itself."""
    if name == "python":
        return PYTHON_WORKER
    if name == "go":
        return GO_WORKER
    return name


def under_test() -> str:
    """The template of the worker under test."""
    return template(os.environ.get("KAFKRON_CONFORMANCE_WORKER") or "python")


def other_than(tmpl: str) -> str:
    """The other implementation, for the handover tests."""
    return GO_WORKER if tmpl == PYTHON_WORKER else PYTHON_WORKER


def argv(tmpl: str, worker_id: str, concurrency: int, session_timeout_ms: int) -> list[str]:
    words = shlex.split(tmpl)
    values = {
        "worker_id": worker_id,
        "concurrency": str(concurrency),
        "session_timeout_ms": str(session_timeout_ms),
        "python": sys.executable,
    }
    if any("{go_worker}" in w for w in words):
        values["go_worker"] = go_worker_binary()
    return [w.format(**values) for w in words]


class Worker:
    """One worker process of a template, its output in a file."""

    def __init__(
        self,
        settings: Settings,
        tmp: Path,
        name: str,
        tmpl: str,
        *,
        concurrency: int = 4,
        session_timeout_ms: int = 6_000,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = tmp / f"{name}.log"
        full_env = {
            **os.environ,
            "KAFKRON_NAMESPACE": settings.namespace,
            "KAFKRON_BOOTSTRAP": settings.bootstrap,
            "PYTHONPATH": str(REPO),
            "KAFKRON_TEST_MARKS": str(tmp / "marks.log"),
            **(env or {}),
        }
        command = argv(tmpl, name, concurrency, session_timeout_ms)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            command, cwd=REPO, env=full_env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited {self.proc.returncode}:\n{self.log()}")

    def kill(self) -> None:
        """kill -9: no drain, no leave, a transaction left as it was."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


async def probe(
    settings: Settings, partitions: int, prefix: str, timeout_s: float = 90
) -> dict[int, str]:
    """Once every runs partition answers a `test.noop` probe: which worker answered
    each (the owner then). Probes are results of schedules named ``probe-...``."""
    import asyncio
    import time

    from tests.kit.worker import key_for_partition, produce, results, run_record

    keys = {p: key_for_partition(f"probe-{prefix}", p, partitions) for p in range(partitions)}
    await produce(settings, [run_record(keys[p], "test.noop") for p in range(partitions)])
    deadline = time.monotonic() + timeout_s
    while True:
        found = {r.schedule_id: r.worker for r in await results(settings)}
        if all(k in found for k in keys.values()):
            return {p: found[k] for p, k in keys.items()}
        if time.monotonic() > deadline:
            raise AssertionError(f"probes {prefix} not all answered: {found}")
        await asyncio.sleep(0.3)


async def probe_until(
    settings: Settings, partitions: int, owners: set[str], timeout_s: float = 90
) -> dict[int, str]:
    """Probe again until the partitions are shared by exactly ``owners`` (a worker
    that joined later gets its share at the next rebalance)."""
    import time

    deadline = time.monotonic() + timeout_s
    round_ = 0
    while True:
        round_ += 1
        found = await probe(settings, partitions, f"r{round_}", timeout_s)
        if set(found.values()) == owners:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions never shared by {sorted(owners)}: {found}")


async def wait_results(
    settings: Settings,
    done: Callable[[list[Result]], bool],
    *,
    workers: Sequence[Worker],
    timeout_s: float = 120,
) -> list[Result]:
    """Poll the results topic (read_committed outcomes) until ``done(results)``; fail
    at once if a worker exited."""
    import asyncio
    import time

    from tests.kit.worker import results

    deadline = time.monotonic() + timeout_s
    while True:
        found = await results(settings)
        if done(found):
            return found
        for worker in workers:
            worker.check_alive()
        if time.monotonic() > deadline:
            shown = ", ".join(f"{r.run_id}#{r.attempt}={r.status}" for r in found[:20])
            raise AssertionError(f"results not complete after {timeout_s:.0f} s: {shown}")
        await asyncio.sleep(0.5)
