"""The README's Faust section, as the tests that keep it true read it."""

from __future__ import annotations

import re

from tests.kit.paths import REPO

SECTION = "## Consuming results and dead letters from Faust"


def readme_section() -> str:
    """The section's text, up to the next ``## `` heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def code_block(start: str) -> str:
    """The section's fenced code block that starts with ``start``."""
    for block in re.findall(r"^```\w*\n(.*?)^```$", readme_section(), re.MULTILINE | re.DOTALL):
        if block.startswith(start):
            return str(block)
    raise AssertionError(f"README, {SECTION!r}: no code block starts with {start!r}")


def field_table(record: str) -> list[tuple[str, str]]:
    """(field, type) of each row of the table after the paragraph that opens with
    ```record```, as written (``\\|`` read as ``|``)."""
    table = readme_section().split(f"\n`{record}`, ", 1)[1].split("\n\n")[1]
    rows = re.findall(r"^\| `(\w+)` \| `(.+?)` \|", table, re.MULTILINE)
    if not rows:
        raise AssertionError(f"README, {SECTION!r}: no field table after `{record}`")
    return [(name, kind.replace("\\|", "|")) for name, kind in rows]
