"""The scenarios kafkron ships, by name: ``kafkron simulate midnight-reboot``.

A bundled scenario is a TOML file under ``simulation/scenarios/``, named by its
stem. They are found through `importlib.resources`, never a path relative to the
checkout, so an installed wheel finds them inside its package wherever that is.
`resolve` takes what the user typed: an existing file is a path (a scenario of
one's own, or one of the checkout's), else a bare name is looked up here; an
error names the bundled scenarios, so a typo is answered with the right spelling.
"""

from __future__ import annotations

import dataclasses
import tomllib
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

from simulation.scenario import Scenario, ScenarioError, load

SUFFIX = ".toml"
WIDTH = 100  # a --list description is cut to this many characters


def bundled() -> dict[str, Traversable]:
    """Every bundled scenario, by name."""
    folder = files("simulation").joinpath("scenarios")
    return {
        entry.name.removesuffix(SUFFIX): entry
        for entry in folder.iterdir()
        if entry.name.endswith(SUFFIX) and entry.is_file()
    }


def resolve(typed: str) -> Scenario:
    """The scenario at path `typed`, else the bundled scenario named `typed`."""
    if Path(typed).is_file():
        return load(typed)
    name = typed.removesuffix(SUFFIX)
    scenarios = bundled()
    # Only a bare name is looked up: a path that does not exist is a mistake in the
    # path, and quietly running a bundled file of the same stem would hide it.
    if name in scenarios and Path(typed).name == typed:
        with as_file(scenarios[name]) as path:
            scenario = load(path)
        # Replayed by its name, which works from any directory (`Outcome.replay`).
        return dataclasses.replace(scenario, path=name)
    raise ScenarioError(
        f"{typed}: neither a scenario file nor a bundled scenario; bundled: "
        f"{', '.join(sorted(scenarios))} (`kafkron simulate --list` describes them)"
    )


def describe(entry: Traversable) -> str:
    """One line about a scenario: the first sentence of its story, if it has one."""
    try:
        story = tomllib.loads(entry.read_text(encoding="utf-8")).get("story", "")
    except tomllib.TOMLDecodeError as error:
        return f"(not valid TOML: {error})"
    text = " ".join(str(story).split())
    end = text.find(". ")
    first = text if end < 0 else text[: end + 1]
    if len(first) <= WIDTH:
        return first
    # Cut at a word, without the comma or colon the cut would leave dangling.
    return first[:WIDTH].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def listing() -> str:
    """What `kafkron simulate --list` prints: a name and a line per bundled scenario."""
    scenarios = bundled()
    pad = max(map(len, scenarios), default=0)
    return "".join(
        f"{name:<{pad}}  {describe(scenarios[name])}".rstrip() + "\n" for name in sorted(scenarios)
    )
