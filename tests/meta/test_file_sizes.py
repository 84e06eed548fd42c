"""Long files are a stated choice: docs/DESIGN.md §10.7 lists each with its reason.

A file of the product's packages over `LONG_LINES` lines must be in that table, and
every file the table names must exist, so the list neither grows silently nor
keeps files that were split or removed.
"""

from __future__ import annotations

import re

from tests.kit.paths import REPO as ROOT
from tests.meta.test_design_refs import DESIGN

PACKAGES = ("actors", "topics", "simulation")
LONG_LINES = 450


def _listed() -> set[str]:
    design = DESIGN.read_text()
    section = design.split("### 10.7 ", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([^`]+\.py)` \|", section, flags=re.MULTILINE))


def _long_files() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            with path.open() as source:
                if sum(1 for _ in source) > LONG_LINES:
                    found.add(path.relative_to(ROOT).as_posix())
    return found


def test_every_long_file_states_why_it_is_one_file() -> None:
    unlisted = sorted(_long_files() - _listed())
    assert not unlisted, f"over {LONG_LINES} lines and not in docs/DESIGN.md §10.7: {unlisted}"


def test_the_list_names_only_files_that_exist() -> None:
    missing = sorted(f for f in _listed() if not (ROOT / f).is_file())
    assert not missing, f"docs/DESIGN.md §10.7 lists files that do not exist: {missing}"
