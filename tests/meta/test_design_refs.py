"""Every citation of the design points into docs/DESIGN.md, at a section that exists.

Code, tests and docs cite the design as ``docs/DESIGN.md §3.4`` (several sections:
``§3.4, §5.5``). The check reads every text file of the repository, finds each
mention of the design's file name and demands that its sections are headings of
docs/DESIGN.md; so renumbering a section, or citing one that was never written,
fails here with the file and line.

A few files cite it without the ``docs/`` folder because they are being reworked
elsewhere right now; they are listed in `BARE_CITATIONS` (their sections must still
exist), and the list can only shrink. This file, which names the pattern it looks
for, is not read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.kit.paths import REPO as ROOT

DESIGN = ROOT / "docs" / "DESIGN.md"
_THIS_FILE = Path(__file__).resolve()
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "node_modules", "build", "dist"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".html", ".json", ".cfg", ".ini", ""}

# "DESIGN.md" then its section list: "§2", "§3.4, §5.5", "§3.4 and §5.5".
_CITATION = re.compile(r"(?P<path>[\w./-]*)DESIGN\.md(?P<sections>(?:,?\s*(?:and\s+)?§[\d.]*\d)*)")
_SECTION = re.compile(r"§([\d.]*\d)")
_HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.MULTILINE)

BARE_CITATIONS: dict[str, str] = {}
"""Files that may still cite the design without ``docs/``, and why."""


def design_sections() -> set[str]:
    return set(_HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def text_files(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and path not in (DESIGN, _THIS_FILE):
                found.append(path)
    return found


def citations(root: Path) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, cited path, sections) of every mention of DESIGN.md under ``root``."""
    found = []
    for path in text_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in _CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            sections = _SECTION.findall(match["sections"])
            rel = path.relative_to(root).as_posix()
            found.append((rel, line, match["path"] + "DESIGN.md", sections))
    return found


def test_the_design_has_numbered_sections() -> None:
    sections = design_sections()
    assert {"2", "2.1", "3.1", "4.2", "5.3", "7", "10.6"} <= sections


def test_every_citation_names_sections_that_exist() -> None:
    sections = design_sections()
    wrong = [
        f"{file}:{line} cites §{s}, which docs/DESIGN.md does not have"
        for file, line, _, cited in citations(ROOT)
        for s in cited
        if s not in sections
    ]
    assert wrong == []


def test_every_citation_is_of_the_file_in_this_repository() -> None:
    wrong = [
        f"{file}:{line} cites {path!r}; write docs/DESIGN.md"
        for file, line, path, _ in citations(ROOT)
        if path != "docs/DESIGN.md" and file not in BARE_CITATIONS
    ]
    assert wrong == []


def test_bare_citations_only_shrink() -> None:
    bare = {file for file, _, path, _ in citations(ROOT) if path != "docs/DESIGN.md"}
    fixed = sorted(set(BARE_CITATIONS) - bare)
    assert fixed == [], f"remove these from BARE_CITATIONS, they cite docs/DESIGN.md now: {fixed}"


def test_a_citation_of_a_missing_section_is_caught(tmp_path: Path) -> None:
    name = "DESIGN" + ".md"
    (tmp_path / "a.py").write_text(
        f'"""Kept (docs/{name} §3.4, §99.1) and (see {name} §2 and §5)."""\n', encoding="utf-8"
    )
    found = citations(tmp_path)
    assert found == [
        ("a.py", 1, f"docs/{name}", ["3.4", "99.1"]),
        ("a.py", 1, name, ["2", "5"]),
    ]
    assert "99.1" not in design_sections()
