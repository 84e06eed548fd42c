"""`kafkron simulate NAME`: the bundled scenarios by name, from anywhere.

An installed kafkron (a wheel, outside any checkout) ships the scenarios inside its
package, where no user would type the path: so a bundled scenario is named by its
file's stem, `--list` says which there are, and a wrong name is answered with the
names. A path still works. Every test runs from a directory outside the checkout,
as a user of the wheel would (.ci/wheel_check.sh runs the real wheel).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.kit.paths import REPO
from topics.codec import loads

SCENARIOS = REPO / "simulation" / "scenarios"


def _simulate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", "simulate", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_a_bundled_scenario_runs_by_its_name(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "midnight-reboot", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "verdict: every invariant held (seed 1)" in done.stdout


def test_the_replay_command_of_a_named_scenario_uses_the_name(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "midnight-reboot", "--sweep", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert loads(done.stdout.splitlines()[0])["replay"] == (
        "kafkron simulate midnight-reboot --seed 1"
    )


def test_a_path_still_works_and_is_replayed_as_given(tmp_path: Path) -> None:
    path = str(SCENARIOS / "midnight-reboot.toml")
    done = _simulate(tmp_path, path, "--sweep", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert loads(done.stdout.splitlines()[0])["replay"] == (f"kafkron simulate {path} --seed 1")


def test_list_names_every_bundled_scenario_with_a_line_of_its_story(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "--list")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    shipped = sorted(p.stem for p in SCENARIOS.glob("*.toml"))
    assert sorted(lines) == shipped
    for name in shipped:
        story = " ".join(tomllib.loads((SCENARIOS / f"{name}.toml").read_text())["story"].split())
        description = lines[name].split(None, 1)[1].removesuffix("…")
        assert story.startswith(description), (name, description)
        assert len(lines[name]) <= 140, lines[name]


def test_an_unknown_scenario_is_answered_with_the_known_ones(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "midnight-reboo")
    assert done.returncode == 2
    assert "midnight-reboo:" in done.stderr
    assert "midnight-reboot" in done.stderr.replace("midnight-reboo:", "")
    assert "worker-dies-0020" in done.stderr
    assert "kafkron simulate --list" in done.stderr


def test_no_scenario_at_all_is_a_usage_error_naming_them(tmp_path: Path) -> None:
    done = _simulate(tmp_path)
    assert done.returncode == 2
    assert "midnight-reboot" in done.stderr
