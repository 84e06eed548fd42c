"""A job author's ``import kafkron`` (and every process importing ``actors``) does not
load the worker's state machine: the registry names `Outcome` from a module of its own."""

from __future__ import annotations

import subprocess
import sys

from actors.worker.core import Outcome as CoreOutcome
from actors.worker.outcome import Outcome
from tests.kit.paths import REPO


def test_importing_kafkron_leaves_the_worker_core_unloaded() -> None:
    code = "import sys, kafkron\nprint('actors.worker.core' in sys.modules)\n"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "False"


def test_the_core_names_the_same_outcome() -> None:
    assert CoreOutcome is Outcome
