"""Java and Kafka's jars: check the JVM, fetch the jars once into the cache.

The jars come from Maven Central through ``mvn dependency:copy-dependencies`` on
``actors/broker/pom.xml``. They land in a directory named after a hash of the pom, filled
through a temporary directory and renamed into place, so a download interrupted
half-way is never mistaken for a complete one and a changed pom fetches afresh.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from actors.broker.errors import BrokerError
from actors.broker.layout import cache_dir

MIN_JAVA_MAJOR = 17
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def pom_path() -> Path:
    """The pom that names Kafka's jars; shipped as package data of `broker`."""
    return Path(str(resources.files("actors.broker").joinpath("pom.xml")))


def find_java() -> str:
    """Path of a Java 17+ ``java``; `BrokerError` saying how to get one otherwise."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else None
    java = candidate if candidate and Path(candidate).exists() else shutil.which("java")
    if java is None:
        raise BrokerError(
            "java not found: install Java 17 or newer"
            " (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    try:
        probe = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(
            f"could not run {java} -version ({exc}); check your Java install"
        ) from exc
    match = _JAVA_VERSION.search(probe.stderr + probe.stdout)
    if match is None:
        raise BrokerError(f"could not read the Java version from {java} -version; need Java 17+")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" style
        major = int(match.group(2))
    if major < MIN_JAVA_MAJOR:
        raise BrokerError(
            f"{java} is Java {major}; Kafka 4 needs Java {MIN_JAVA_MAJOR}+:"
            " install a newer JDK and put it first on PATH or set JAVA_HOME"
        )
    return java


def jars_dir() -> Path:
    """Where the jars of the current pom live once fetched (may not exist yet)."""
    digest = hashlib.sha256(pom_path().read_bytes()).hexdigest()[:12]
    return cache_dir() / f"jars-{digest}"


def ensure_jars() -> Path:
    """Return the directory of Kafka's jars, downloading them on the first call.

    Announces the download on stderr, since the first one fetches ~90 jars and can
    take a minute; later calls return at once.
    """
    target = jars_dir()
    if (target / "lib").is_dir() and (target / "complete").exists():
        return target / "lib"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "mvn not found: install Apache Maven (e.g. apt-get install maven) so kafkron can"
            " fetch Kafka's jars, or set KAFKRON_BOOTSTRAP to a Kafka cluster you already run"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"kafkron: first start, downloading Apache Kafka 4.1.1 and log4j2 jars from Maven"
        f" Central into {target} (once) ...",
        file=sys.stderr,
        flush=True,
    )
    staging = Path(tempfile.mkdtemp(prefix="jars-", dir=target.parent))
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom_path()),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging / 'lib'}",
    ]
    maven_repo = os.environ.get("KAFKRON_MAVEN_REPO")
    if maven_repo:
        command.append(f"-Dmaven.repo.local={Path(maven_repo).expanduser().resolve()}")
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not any((staging / "lib").glob("kafka_2.13-*.jar")):
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise BrokerError(
                "mvn could not fetch Kafka's jars (is Maven Central reachable?): "
                + " | ".join(line.strip() for line in tail)
            )
        (staging / "complete").write_text("ok\n")
        try:
            staging.rename(target)
        except OSError:
            # Another start finished first; its copy is as good as ours.
            if not (target / "complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"kafkron: jars ready in {target / 'lib'}", file=sys.stderr, flush=True)
    return target / "lib"
