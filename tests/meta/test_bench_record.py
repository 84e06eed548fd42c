"""A benchmark records its figures only where it is told to (`--record [PATH]`).

`kafkron plan` answers from ``bench/measured.json``, a tracked file: a benchmark
that rewrote it on every run left a dirty checkout behind a user who only
measured, and changed the plan's answer without anyone asking. So `record`
writes nothing unless given a path, and a benchmark run without ``--record``
leaves the checkout as it was. No timing is asserted here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.kit.paths import REPO

BENCH = REPO / "bench"


def _measured(monkeypatch: pytest.MonkeyPatch, default: Path) -> ModuleType:
    """bench/measured.py (not a package: the scripts import it from their folder),
    with its default file moved to `default` so a wrong write cannot reach the checkout."""
    spec = importlib.util.spec_from_file_location("bench_measured", BENCH / "measured.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "PATH", default)
    monkeypatch.delenv("KAFKRON_MEASURED", raising=False)
    return module


def test_record_writes_nothing_unless_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    default = tmp_path / "measured.json"
    measured = _measured(monkeypatch, default)
    measured.record("shard_core", {"schedules": 10}, argv=["--schedules", "10"])
    assert list(tmp_path.iterdir()) == [], "figures were written without --record"


def test_record_writes_where_asked_and_keeps_the_other_benchmarks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    measured = _measured(monkeypatch, tmp_path / "default.json")
    target = tmp_path / "mine.json"
    target.write_text(json.dumps({"e2e_work": {"figures": {"workers": 2}}}))
    measured.record(
        "shard_core",
        {"schedules": 10},
        argv=["--schedules", "10", "--record", str(target)],
        to=target,
    )
    data = json.loads(target.read_text())
    assert data["e2e_work"] == {"figures": {"workers": 2}}
    assert data["shard_core"]["figures"] == {"schedules": 10}
    # The command says how to measure again, not where this run happened to record.
    assert data["shard_core"]["command"] == "python bench/shard_core.py --schedules 10"
    assert not (tmp_path / "default.json").exists()


def test_record_without_a_path_means_the_committed_file() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "shard_core.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--record [PATH]" in done.stdout
    assert "bench/measured.json" in " ".join(done.stdout.split())


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--", "bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_a_benchmark_run_without_record_leaves_the_checkout_as_it_was() -> None:
    before = _git_status(), (BENCH / "measured.json").read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "KAFKRON_MEASURED"}
    done = subprocess.run(
        [sys.executable, str(BENCH / "shard_core.py"), "--schedules", "2000"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    after = _git_status(), (BENCH / "measured.json").read_bytes()
    assert done.returncode == 0, done.stderr[-2000:]
    assert after == before, "bench/shard_core.py without --record changed bench/"
    assert "--record" in done.stderr  # it says how to keep the figures
