"""Start, stop and inspect the local broker process.

The broker runs detached (its own session) so it outlives the command that
started it; the pid file in the data dir is how later commands find it. A pid is
only trusted if that process's command line names this data dir's
``server.properties``, so a recycled pid is never signalled.

Guarantees:

- `start` returns only once a metadata request succeeds, and succeeds at once
  when this data dir's broker already answers.
- `stop` sends SIGTERM (Kafka shuts down cleanly, flushing its logs), waits
  `grace_s`, then SIGKILLs the process group; it returns once the process is gone.
- Every failure is a `BrokerError` whose message says what to do next.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from actors.broker import config, probe, provision
from actors.broker import secure as broker_secure
from actors.broker.errors import BrokerError
from actors.broker.layout import HOST, BrokerLayout

DEFAULT_START_TIMEOUT_S = 120.0
DEFAULT_STOP_GRACE_S = 30.0
_POLL_S = 0.25

# Children started by this interpreter, kept so they are reaped (not left as zombies
# that still look alive to os.kill) and so Popen does not warn when collected.
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """What `start` and `status` found. `answering` is the only proof of life."""

    answering: bool
    pid: int | None
    layout: BrokerLayout
    already_running: bool = False

    def describe(self) -> str:
        where = f"{self.layout.bootstrap} (pid {self.pid}, data {self.layout.data_dir})"
        if self.answering:
            return f"broker running on {where}"
        if self.pid is not None:
            return f"broker process alive but not answering on {where}; see {self.layout.log_file}"
        return f"no broker answering on {self.layout.bootstrap}"


def _alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _children[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        # A zombie still accepts signal 0; its state letter follows the "(comm)" field.
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _is_our_broker(pid: int, layout: BrokerLayout) -> bool:
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        # No /proc (macOS): trust the pid file as long as the process lives.
        return _alive(pid)
    return str(layout.server_properties).encode() in args and _alive(pid)


def _read_pid(layout: BrokerLayout) -> int | None:
    """The pid of this data dir's running broker, clearing a stale pid file."""
    try:
        pid = int(layout.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if _is_our_broker(pid, layout):
        return pid
    if not _alive(pid):
        # Only a dead pid's file is removed: a live process whose command line does
        # not (or not yet: it was seen mid-exec) name this data dir keeps the file,
        # so a broker is never orphaned by a look at it at the wrong instant.
        layout.pid_file.unlink(missing_ok=True)
    return None


def status(layout: BrokerLayout) -> BrokerStatus:
    pid = _read_pid(layout)
    return BrokerStatus(
        answering=probe.answers(layout.bootstrap, **broker_secure.probe_kwargs(layout)),
        pid=pid,
        layout=layout,
    )


def new_cluster_id() -> str:
    """A fresh cluster id in the form ``kafka-storage format -t`` takes."""
    return _cluster_id()


def _cluster_id() -> str:
    # Kafka's Uuid.toString: url-safe base64 of 16 random bytes without padding.
    # Kafka refuses ids that start with "-" (they read as a command-line flag).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# The broker runs for hours: full JIT and G1. A tool runs for a second: the client
# compiler and serial GC start it in about half the time on a busy two-core machine.
_BROKER_JVM = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
_TOOL_JVM = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def _java_command(
    java: str, lib: Path, layout: BrokerLayout, main: str, broker_jvm: tuple[str, ...] = _BROKER_JVM
) -> list[str]:
    if main == "kafka.Kafka":
        # Later options win in the JVM, so a user's KAFKRON_BROKER_JAVA_OPTS override ours.
        jvm = [*broker_jvm, *shlex.split(os.environ.get("KAFKRON_BROKER_JAVA_OPTS", ""))]
    else:
        jvm = list(_TOOL_JVM)
    return [
        java,
        *jvm,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={layout.log4j2_config}",
        "-cp",
        str(lib / "*"),
        main,
    ]


def _format_storage(
    java: str, lib: Path, layout: BrokerLayout, cluster_id: str, secret_args: Sequence[str] = ()
) -> None:
    """Format KRaft storage once; a formatted dir (meta.properties) is reused as is.

    The nodes of one cluster are formatted with the same `cluster_id`; a node whose
    disk was lost is formatted again with it and rebuilt by its peers.
    `secret_args` (the SCRAM users of a secure broker) reach the JVM through a 0600
    argfile, never the command line.
    """
    if (layout.log_dirs / "meta.properties").exists():
        return
    command = [
        *_java_command(java, lib, layout, "kafka.tools.StorageTool"),
        "format",
        "-t",
        cluster_id,
        "-c",
        str(layout.server_properties),
    ]
    with contextlib.ExitStack() as stack:
        if secret_args:
            main_at = command.index("kafka.tools.StorageTool")
            argfile = stack.enter_context(
                broker_secure.java_argfile(layout, [*command[main_at:], *secret_args])
            )
            command = [*command[:main_at], argfile]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise BrokerError(
            f"formatting Kafka storage in {layout.log_dirs} failed: {last[0].strip()}"
            f" (remove {layout.data_dir} to start from scratch)"
        )


def _wait_until_answering(layout: BrokerLayout, pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            layout.pid_file.unlink(missing_ok=True)
            raise BrokerError(f"the broker exited while starting; see {layout.log_file}")
        if probe.answers(layout.bootstrap, timeout_s=2.0, **broker_secure.probe_kwargs(layout)):
            return
        time.sleep(_POLL_S)
    _terminate(pid, DEFAULT_STOP_GRACE_S)
    layout.pid_file.unlink(missing_ok=True)
    raise BrokerError(
        f"the broker did not answer on {layout.bootstrap} within {timeout_s:.0f} s and was"
        f" stopped; see {layout.log_file} (a busy machine may need --timeout)"
    )


def start(
    layout: BrokerLayout, timeout_s: float = DEFAULT_START_TIMEOUT_S, secure: bool = False
) -> BrokerStatus:
    """Start the broker of `layout` (or find it running) and wait until it answers.

    `secure` (or a data dir set up secure before) adds TLS, SCRAM and ACLs (`actors.broker.secure`).
    """
    secure = secure or broker_secure.is_secure(layout)
    pid = _read_pid(layout)
    if pid is not None:
        already = probe.answers(layout.bootstrap, **broker_secure.probe_kwargs(layout))
        if not already:  # Started by someone else a moment ago: wait for it.
            _wait_until_answering(layout, pid, timeout_s)
        return BrokerStatus(answering=True, pid=pid, layout=layout, already_running=already)
    pid = launch(layout, config.server_properties(layout), _cluster_id(), secure=secure)
    _wait_until_answering(layout, pid, timeout_s)
    return BrokerStatus(answering=True, pid=pid, layout=layout)


def launch(
    layout: BrokerLayout,
    properties: str,
    cluster_id: str,
    jvm: tuple[str, ...] = _BROKER_JVM,
    secure: bool = False,
) -> int:
    """Write `properties`, format storage if new, start the JVM; return its pid at once.

    Does not wait for the broker to answer: the nodes of a cluster answer only once a
    majority of controllers is up, so a cluster launches every node first.
    """
    for port in (layout.port, layout.controller_port):
        if probe.port_in_use(HOST, port):
            raise BrokerError(
                f"port {port} on {HOST} is in use by another process (not the broker of"
                f" {layout.data_dir}): stop it, or pick another port with --port or"
                " KAFKRON_BROKER_PORT (the controller takes port + 1)"
            )

    java = provision.find_java()
    lib = provision.ensure_jars()
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    if secure:
        broker_secure.refuse_unsecured_storage(layout)
        properties += broker_secure.prepare(layout, java)
        layout.server_properties.unlink(missing_ok=True)  # recreated 0600: it holds secrets
        layout.server_properties.touch(mode=0o600)
    layout.server_properties.write_text(properties)
    layout.log4j2_config.write_text(config.log4j2_properties())
    _format_storage(
        java,
        lib,
        layout,
        cluster_id,
        broker_secure.scram_format_arguments(layout) if secure else (),
    )

    command = [
        *_java_command(java, lib, layout, "kafka.Kafka", jvm),
        str(layout.server_properties),
    ]
    with layout.log_file.open("ab") as log:
        log.write(f"\n=== kafkron broker start {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
        log.flush()
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=layout.data_dir,
            start_new_session=True,
        )
    _children[child.pid] = child
    layout.pid_file.write_text(f"{child.pid}\n")
    return child.pid


def wait_until_answering(
    layout: BrokerLayout, pid: int | None = None, timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> None:
    """Wait until the broker of `layout`, already launched (as `pid`, if this process
    launched it), answers a metadata request."""
    # The pid `launch` returned is used as is: the pid file is only re-read for a
    # broker some other command launched.
    pid = pid if pid is not None else _read_pid(layout)
    if pid is None:
        raise BrokerError(f"no broker process runs from {layout.data_dir}; see {layout.log_file}")
    _wait_until_answering(layout, pid, timeout_s)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(_POLL_S)
    return not _alive(pid)


def _terminate(pid: int, grace_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, grace_s):
        return
    _kill_hard(pid)


def _kill_hard(pid: int) -> None:
    """SIGKILL the broker and its process group; wait until it is gone."""
    # The broker runs in its own session, so its process group id is its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not _wait_gone(pid, 10.0):
        raise BrokerError(f"broker pid {pid} survived SIGKILL; check it with ps")


def stop(layout: BrokerLayout, grace_s: float = DEFAULT_STOP_GRACE_S) -> int | None:
    """Stop this data dir's broker; return its pid, or None if none was running."""
    pid = _read_pid(layout)
    if pid is None:
        return None
    _terminate(pid, grace_s)
    layout.pid_file.unlink(missing_ok=True)
    return pid


def kill(layout: BrokerLayout) -> int | None:
    """SIGKILL this data dir's broker at once (a crash, for tests); its pid, or None.

    Nothing is flushed: the node comes back through Kafka's log recovery, as after
    a power cut.
    """
    pid = _read_pid(layout)
    if pid is None:
        return None
    _kill_hard(pid)
    layout.pid_file.unlink(missing_ok=True)
    return pid


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    """Send `sig` to each pid that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def running_pid(layout: BrokerLayout) -> int | None:
    """The pid of this data dir's broker process if it runs (answering or not)."""
    return _read_pid(layout)
