"""The README's benchmark table is what `bench/table.py` writes from `bench/measured.json`.

Pure: no benchmark runs here and no timing is read; only the committed figures and
the committed README are compared, so a figure recorded without the table rewritten
(or a table edited by hand) fails here.
"""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from tests.kit.paths import REPO


def _table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_table", REPO / "bench" / "table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_what_the_command_writes_from_measured_json() -> None:
    table = _table()
    readme = (REPO / "README.md").read_text()
    measured = json.loads((REPO / "bench" / "measured.json").read_text())
    assert table.rewrite(readme, table.render(measured)) == readme
    for bench in measured:
        assert f"| `{bench}.py` |" in readme


def test_a_row_says_whether_each_figure_meets_its_target() -> None:
    table = _table()
    rendered = table.render(
        {
            "shard_core": {
                "measured_at": "2026-12-04T05:00:00Z",
                "cpus": 2,
                "python": "3.11.7",
                "command": "python bench/shard_core.py",
                "figures": {"advance_due_per_s": 201_000, "bytes_per_schedule": 251},
            }
        }
    )
    assert "advance_due_per_s 201,000 (target ≥ 200,000 due/s: met)" in rendered
    assert "bytes_per_schedule 251 (target ≤ 250 B: missed)" in rendered
    assert "`python bench/shard_core.py`" in rendered


def test_a_readme_without_the_markers_is_refused() -> None:
    with pytest.raises(SystemExit, match="no"):
        _table().rewrite("# no table here\n", "")
