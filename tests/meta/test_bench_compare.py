"""`bench/compare.py`'s arithmetic: a benchmark's last line read into figures, and the
new/old ratio of each figure round by round. Pure: nothing is measured here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.kit.bench import load_bench


def _compare() -> ModuleType:
    return load_bench("compare")


def test_the_last_bench_line_gives_the_numeric_figures() -> None:
    stdout = (
        "bench e2e_work: workers=1 burst_runs_per_s=10\n"
        "kafkron burst of 30000: 29,900 runs/s\n"
        "bench e2e_work: workers=2 burst_runs_per_s=29900 ratio_vs_apscheduler=0.73 "
        "loop=uvloop complete=True\n"
    )
    figures = _compare().parse_bench_line("e2e_work", stdout)
    assert figures == {"workers": 2.0, "burst_runs_per_s": 29900.0, "ratio_vs_apscheduler": 0.73}


def test_a_run_without_its_bench_line_has_no_figures() -> None:
    assert _compare().parse_bench_line("shard_core", "bench e2e_work: a=1\n") is None


def test_ratios_pair_rounds_and_skip_what_one_side_lacks_or_is_zero() -> None:
    new = [{"rate": 110.0, "p99_ms": 9.0, "extra": 1.0}, {"rate": 99.0, "p99_ms": 5.0}, {}]
    old = [{"rate": 100.0, "p99_ms": 10.0}, {"rate": 100.0, "p99_ms": 0.0}, {"rate": 50.0}]
    assert _compare().ratios(new, old) == {"rate": [1.1, 0.99], "p99_ms": [0.9]}


def _checkouts(tmp_path: Path) -> tuple[Path, Path]:
    this, other = tmp_path / "this", tmp_path / "other"
    (this / "bench").mkdir(parents=True)
    (other / "bench").mkdir(parents=True)
    for name in ("e2e_fire.py", "midnight_e2e.py", "measured.py"):
        (this / "bench" / name).write_text(f"# this {name}\n")
    (other / "bench" / "e2e_fire.py").write_text("# other e2e_fire.py\n")
    (other / "bench" / "measured.py").write_text("# other measured.py\n")
    return this, other


def test_a_benchmark_the_old_side_lacks_is_copied_into_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copied, so it starts that side's processes from that side's checkout."""
    this, other = _checkouts(tmp_path)
    compare = _compare()
    monkeypatch.setattr(compare, "REPO", this)
    compare.copy_scripts(other, ["e2e_fire", "midnight_e2e"], every=False)
    texts = {p.name: p.read_text() for p in (other / "bench").iterdir()}
    assert texts == {
        "e2e_fire.py": "# other e2e_fire.py\n",  # its own, kept
        "measured.py": "# other measured.py\n",
        "midnight_e2e.py": "# this midnight_e2e.py\n",
    }


def test_this_scripts_replace_the_old_sides_scripts_and_their_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    this, other = _checkouts(tmp_path)
    compare = _compare()
    monkeypatch.setattr(compare, "REPO", this)
    compare.copy_scripts(other, ["e2e_fire"], every=True)
    texts = {p.name: p.read_text() for p in (other / "bench").iterdir()}
    assert texts == {name: f"# this {name}\n" for name in texts}
    assert sorted(texts) == ["e2e_fire.py", "measured.py", "midnight_e2e.py"]
