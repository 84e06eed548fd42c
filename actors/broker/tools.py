"""Kafka's own admin tools (ACLs, SCRAM users) run from the cached jars.

aiokafka has no API for ACLs or SCRAM credentials, so `kafkron users add` runs
Kafka's ``AclCommand`` and ``ConfigCommand`` with the jars ``kafkron broker start``
fetched. They work against any cluster, not only the local broker.

Secrets never reach a command line: the admin's connection settings go to a
``--command-config`` file and a new user's password to a java ``@argfile``, both
0600 in a private temporary directory that is removed when the tools are done.
Two tools run at once (each is a JVM start, the slow part).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from actors.broker import provision
from actors.broker.errors import BrokerError
from actors.broker.layout import cache_dir
from topics.security import ClientSecurity

ACL_MAIN = "org.apache.kafka.tools.AclCommand"
CONFIG_MAIN = "kafka.admin.ConfigCommand"
SCRAM_ITERATIONS = 8192
# Each tool is a JVM start, mostly CPU: two at once overlap the I/O without starving
# a small machine (more only time out waiting for the broker).
MAX_PARALLEL_TOOLS = 2
_TOOL_JVM = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_TOOLS_LOG4J = "\n".join(
    [
        "status = error",
        "appender.console.type = Console",
        "appender.console.name = STDERR",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %p %m (%c)%n",
        "rootLogger.level = error",
        "rootLogger.appenderRef.stderr.ref = STDERR",
        "",
    ]
)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def command_config(security: ClientSecurity) -> str:
    """The admin's connection as Kafka client properties (the tools' ``--command-config``)."""
    lines = [f"security.protocol={security.protocol}"]
    if security.uses_sasl:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if security.mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        password = (security.password or "").replace("\\", "\\\\").replace('"', '\\"')
        lines += [
            f"sasl.mechanism={security.mechanism}",
            f'sasl.jaas.config={module} required username="{security.username}"'
            f' password="{password}";',
        ]
    if security.uses_tls and security.cafile:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={security.cafile}"]
    return "\n".join(lines) + "\n"


def _argfile_token(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool invocation: main class and arguments (which may hold a secret)."""

    main: str
    args: tuple[str, ...]
    what: str  # for messages: "the SCRAM credential of alice", never the arguments


class KafkaTools:
    """Runs Kafka tools against `bootstrap` as the admin described by `security`."""

    def __init__(self, bootstrap: str, security: ClientSecurity) -> None:
        self.bootstrap = bootstrap
        self.security = security

    @contextlib.contextmanager
    def _workdir(self) -> Iterator[Path]:
        work = Path(tempfile.mkdtemp(prefix="kafkron-tools-"))
        work.chmod(stat.S_IRWXU)
        try:
            _write_private(work / "admin.properties", command_config(self.security))
            (work / "log4j2.properties").write_text(_TOOLS_LOG4J)
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _spawn(
        self, java: str, lib: Path, work: Path, index: int, run: ToolRun
    ) -> subprocess.Popen[str]:
        argfile = work / f"args-{index}"
        tokens = [
            run.main,
            "--bootstrap-server",
            self.bootstrap,
            "--command-config",
            str(work / "admin.properties"),
            *run.args,
        ]
        _write_private(argfile, "\n".join(_argfile_token(t) for t in tokens) + "\n")
        command = [
            java,
            *_TOOL_JVM,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
            "-cp",
            str(lib / "*"),
            f"@{argfile}",
        ]
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def _reap(self, spawned: tuple[ToolRun, subprocess.Popen[str]]) -> list[str]:
        run, child = spawned
        output, _ = child.communicate()
        if child.returncode == 0:
            return []
        return [f"{run.what}: {_last_line(output, self.security)}"]

    def run(self, runs: Sequence[ToolRun]) -> None:
        """Run `runs` concurrently; `BrokerError` naming the first that failed."""
        java = provision.find_java()
        lib = provision.ensure_jars()
        cache_dir().mkdir(parents=True, exist_ok=True)
        with self._workdir() as work:
            failures: list[str] = []
            running: list[tuple[ToolRun, subprocess.Popen[str]]] = []
            for index, run in enumerate(runs):
                if len(running) >= MAX_PARALLEL_TOOLS:
                    failures += self._reap(running.pop(0))
                running.append((run, self._spawn(java, lib, work, index, run)))
            for child in running:
                failures += self._reap(child)
        if failures:
            raise BrokerError("; ".join(failures))


def _last_line(output: str, security: ClientSecurity) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    interesting = [line for line in lines if "Error" in line or "Exception" in line]
    text = (interesting or lines or ["no output"])[0]
    if security.password:
        text = text.replace(security.password, "***")
    return text[:400]


def scram_user_run(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> ToolRun:
    """Create or replace `user`'s SCRAM credential (the password is in the argfile only)."""
    return ToolRun(
        CONFIG_MAIN,
        (
            "--alter",
            "--add-config",
            f"{mechanism}=[iterations={SCRAM_ITERATIONS},password={password}]",
            "--entity-type",
            "users",
            "--entity-name",
            user,
        ),
        f"the {mechanism} credential of {user}",
    )


def acl_run(arguments: Sequence[str], what: str) -> ToolRun:
    return ToolRun(ACL_MAIN, tuple(arguments), what)
