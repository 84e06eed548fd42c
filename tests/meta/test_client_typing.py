"""A user's program that calls the client passes ``mypy --strict`` (the package ships
``py.typed``), and a mistake in such a program is an error mypy reports: the
client's types reach the program, they are not silently ``Any``.

mypy runs with a configuration of its own, not the project's (whose
``ignore_missing_imports`` would let an unfound ``kafkron`` pass as ``Any``), on
tests/fixtures/client_program.py; the errors of the modules it imports are the
project's own mypy run's business (``--follow-imports=silent``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.kit.paths import REPO

PROGRAM = REPO / "tests" / "fixtures" / "client_program.py"


def _mypy(tmp_path: Path, program: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n", encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(program),
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_program_calling_the_client_passes_mypy_strict(tmp_path: Path) -> None:
    done = _mypy(tmp_path, PROGRAM)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_argument_in_such_a_program_is_reported(tmp_path: Path) -> None:
    broken = tmp_path / "broken_program.py"
    text = PROGRAM.read_text(encoding="utf-8")
    assert 'overlap="skip",' in text and "timeout_s=1800," in text
    broken.write_text(
        text.replace('overlap="skip",', 'overlap="sometimes",').replace(
            "timeout_s=1800,", 'timeout_s="30 minutes",'
        ),
        encoding="utf-8",
    )
    done = _mypy(tmp_path, broken)
    assert done.returncode == 1, done.stdout
    assert done.stdout.count("[arg-type]") == 2, done.stdout
    assert 'Argument "overlap"' in done.stdout and 'Argument "timeout_s"' in done.stdout
