"""The layers of docs/DESIGN.md §4.2, enforced: no module imports upwards.

From the bottom up::

    topics                      the wire contract (names, formats, codec)
    actors.timespec, .wheel     time rules and the timer wheel: topics + stdlib/deps
    pure cores                  actors.shard, actors.audit, actors.worker.core, actors.scheduler.
                                lifecycle / .skew / .oversize: load no aiokafka
    Kafka runtimes, simulation  runtimes drive the cores on aiokafka; the simulation
                                drives them on a simulated Kafka, never aiokafka
    actors.demo, actors.cli     on top: the demo is a command of the CLI
    kafkron                     the public face (the client, job authors' names):
                                imports any of the above, none of them imports it

Two kinds of check. The static one reads every module with `ast` (every import
statement counts, lazy ones inside functions and ``TYPE_CHECKING`` ones included: an
import hidden in a function is still a dependency). The dynamic one imports modules
in a fresh interpreter and looks at ``sys.modules``, because "loads no aiokafka" is
about the whole import closure, package ``__init__`` files included.

A violation that lives in code being reworked elsewhere is listed in
``KNOWN_EXCEPTIONS`` with its reason and the issue it waits for. The list can only
shrink: an entry that no longer matches a real import fails the test, so whoever
removes the import removes the entry too.

Import-linter would state the same contracts in configuration; a page of `ast`
keeps the check free of a dependency and lets it report the exact line.
"""

from __future__ import annotations

import ast
import functools
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit.paths import REPO as ROOT

PACKAGES = ("kafkron", "topics", "actors", "simulation")

PURE_CORES = (
    "actors.shard",
    "actors.audit",
    "actors.worker.core",
    "actors.scheduler.lifecycle",
    "actors.scheduler.skew",
    "actors.scheduler.oversize",
)
# Everything a Kafka runtime or a person-facing front end is made of: nothing below
# the runtimes may import these.
FRONT_ENDS = ("actors.cli", "actors.demo", "actors.web")
RUNTIME_ONLY = (
    "aiokafka",
    "actors.scheduler.runtime",
    "actors.scheduler.shard_runner",
    "actors.scheduler.restore",
    "actors.worker.runtime",
    "actors.history",
    "actors.observe",
    "actors.broker",
    *FRONT_ENDS,
)


@dataclass(frozen=True, slots=True)
class Contract:
    """Modules under any of ``sources`` import nothing under ``forbidden``,
    unless the imported module is also under ``allowed``."""

    name: str
    sources: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()
    """Source modules the contract does not apply to (the layer's own top)."""


CONTRACTS = (
    Contract(
        "topics is the bottom layer",
        sources=("topics",),
        forbidden=("actors", "simulation", "kafkron"),
    ),
    Contract(
        "kafkron, the public face, is on top: the layout beneath never imports it",
        sources=("actors", "simulation"),
        forbidden=("kafkron",),
    ),
    Contract(
        "time rules and the wheel stand on topics and the standard library only",
        sources=("actors.timespec", "actors.wheel"),
        forbidden=("actors", "simulation"),
        allowed=("actors.timespec", "actors.wheel"),
    ),
    Contract(
        "the pure cores reach nothing above them",
        sources=PURE_CORES,
        forbidden=(*RUNTIME_ONLY, "simulation", "actors.examples"),
    ),
    Contract(
        "the simulation drives the cores, never a runtime or a front end",
        sources=("simulation",),
        forbidden=(*RUNTIME_ONLY, "actors.examples"),
    ),
    Contract(
        "the runtimes, the console and the client never import the command line or the demo",
        sources=("topics", "actors", "simulation", "kafkron"),
        forbidden=("actors.cli", "actors.demo"),
        exempt=("actors.cli", "actors.demo"),
    ),
    Contract(
        "the demo is a command of the CLI, not the other way round",
        sources=("actors.demo",),
        forbidden=("actors.cli",),
    ),
    Contract(
        "the worker and the scheduler are independent actors",
        sources=("actors.worker",),
        forbidden=("actors.scheduler", "actors.shard"),
    ),
    Contract(
        "the scheduler and the shard core know nothing of the worker's insides",
        sources=("actors.scheduler", "actors.shard"),
        forbidden=("actors.worker",),
    ),
)


@dataclass(frozen=True, slots=True)
class Violation:
    contract: str
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        path = self.importer.replace(".", "/")
        return f"{path} line {self.line} imports {self.imported} ({self.contract})"


@dataclass(frozen=True, slots=True)
class KnownException:
    importer: str
    imported: str
    reason: str
    waits_for: str


KNOWN_EXCEPTIONS: tuple[KnownException, ...] = ()
"""(importer, imported) prefixes: every violation from under the first to under the second."""

KNOWN_CYCLES: tuple[tuple[frozenset[str], str], ...] = ()


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports (absolute names), with its line; ``from p import m``
    counts as importing ``p.m`` when ``p.m`` is a module of the tree, else ``p``."""
    module = module_name(root, path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                as_module = root.joinpath(*sub.split("."))
                is_module = as_module.with_suffix(".py").is_file() or as_module.is_dir()
                found.append((sub if is_module else target, node.lineno))
    return found


@functools.cache
def import_table(root: Path) -> dict[str, tuple[tuple[str, int], ...]]:
    """Every module of the tree under ``root`` with its imports (parsed once per root)."""
    table: dict[str, tuple[tuple[str, int], ...]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            table[module_name(root, path)] = tuple(imports_of(root, path))
    return table


def check_layers(root: Path, contracts: tuple[Contract, ...] = CONTRACTS) -> list[Violation]:
    """Every import of the tree under ``root`` that breaks one of ``contracts``."""
    violations: list[Violation] = []
    for module, imports in import_table(root).items():
        for imported, line in imports:
            for c in contracts:
                if not _under(module, c.sources) or _under(module, c.exempt):
                    continue
                if _under(imported, c.forbidden) and not _under(imported, c.allowed):
                    violations.append(Violation(c.name, module, imported, line))
    return violations


def _known(v: Violation) -> KnownException | None:
    for k in KNOWN_EXCEPTIONS:
        if _under(v.importer, (k.importer,)) and _under(v.imported, (k.imported,)):
            return k
    return None


def import_cycles(root: Path) -> list[frozenset[str]]:
    """Sets of modules of the tree that import one another (Tarjan's strongly
    connected components over module-to-module imports, lazy ones included)."""
    graph = {module: {m for m, _ in imports} for module, imports in import_table(root).items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v] & graph.keys()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                cycles.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_module_imports_upwards() -> None:
    unknown = [str(v) for v in check_layers(ROOT) if _known(v) is None]
    assert unknown == [], "imports against the layers of docs/DESIGN.md §4.2:\n" + "\n".join(
        unknown
    )


def test_every_known_exception_is_still_real() -> None:
    """The exceptions list only shrinks: a fixed import must leave the list too."""
    seen = {_known(v) for v in check_layers(ROOT)}
    stale = [k for k in KNOWN_EXCEPTIONS if k not in seen]
    assert stale == [], f"remove these from KNOWN_EXCEPTIONS, they are fixed: {stale}"
    cycles = import_cycles(ROOT)
    stale_cycles = [c for c, _ in KNOWN_CYCLES if c not in cycles]
    assert stale_cycles == [], f"remove these from KNOWN_CYCLES, they are broken: {stale_cycles}"


def test_no_import_cycles() -> None:
    known = {c for c, _ in KNOWN_CYCLES}
    unknown = [sorted(c) for c in import_cycles(ROOT) if c not in known]
    assert unknown == [], f"modules that import each other (break the cycle): {unknown}"


def _copy_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return tmp_path


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    """The real tree, copied, plus one import from the wire layer up into a runtime."""
    root = _copy_tree(tmp_path)
    names = root / "topics" / "names.py"
    names.write_text(
        names.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n"
        "    from actors.scheduler import runtime  # noqa: F401\n",
        encoding="utf-8",
    )
    before = {str(v) for v in check_layers(ROOT)}
    planted = [v for v in check_layers(root) if str(v) not in before]
    assert [(v.importer, v.imported) for v in planted] == [
        ("topics.names", "actors.scheduler.runtime")
    ]
    assert planted[0].contract == "topics is the bottom layer"


def test_a_planted_import_of_the_public_face_is_caught(tmp_path: Path) -> None:
    """The real tree, copied, plus a runtime importing the client above it."""
    root = _copy_tree(tmp_path)
    sending = root / "actors" / "sending.py"
    sending.write_text(
        sending.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n"
        "    import kafkron  # noqa: F401\n",
        encoding="utf-8",
    )
    before = {str(v) for v in check_layers(ROOT)}
    planted = [v for v in check_layers(root) if str(v) not in before]
    assert [(v.importer, v.imported) for v in planted] == [("actors.sending", "kafkron")]
    assert planted[0].contract.startswith("kafkron, the public face, is on top")


def test_a_planted_import_cycle_is_caught(tmp_path: Path) -> None:
    """The real tree, copied, with the cycle this layout once had put back (a lazy
    import of the DAG definitions from the schedule definitions)."""
    root = _copy_tree(tmp_path)
    definition = root / "actors" / "shard" / "definition.py"
    definition.write_text(
        definition.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n"
        "    from actors.shard import dag_definition  # noqa: F401\n",
        encoding="utf-8",
    )
    assert import_cycles(ROOT) == []
    assert import_cycles(root) == [
        frozenset({"actors.shard.definition", "actors.shard.dag_definition"})
    ]


def test_relative_and_lazy_imports_are_resolved(tmp_path: Path) -> None:
    """A synthetic tree: a relative import out of the cores and a lazy one into the CLI."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("", encoding="utf-8")
    shard = tmp_path / "actors" / "shard"
    shard.mkdir()
    (shard / "__init__.py").write_text("", encoding="utf-8")
    (shard / "core.py").write_text("from ..history import store\n", encoding="utf-8")
    (tmp_path / "actors" / "history").mkdir()
    (tmp_path / "actors" / "history" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "actors" / "history" / "store.py").write_text(
        "def f():\n    import actors.cli.output\n", encoding="utf-8"
    )
    (tmp_path / "actors" / "cli").mkdir()
    (tmp_path / "actors" / "cli" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "actors" / "cli" / "output.py").write_text(
        "from actors.shard import core\n", encoding="utf-8"
    )
    found = {(v.importer, v.imported, v.line) for v in check_layers(tmp_path)}
    assert found == {
        ("actors.shard.core", "actors.history.store", 1),
        ("actors.history.store", "actors.cli.output", 2),
    }
    cycle = {"actors.shard.core", "actors.history.store", "actors.cli.output"}
    assert import_cycles(tmp_path) == [frozenset(cycle)]


# The dynamic check: what an import really loads, package __init__ files included.
_PROBE = """
import importlib, json, pkgutil, sys
loaded = []
for name in sys.argv[1:]:
    walk = name.endswith("/*")
    name = name.removesuffix("/*")
    module = importlib.import_module(name)
    names = [name]
    if walk:
        names += [m.name for m in pkgutil.walk_packages(module.__path__, name + ".")]
    for each in names:
        importlib.import_module(each)
        if "aiokafka" in sys.modules:
            loaded.append(each)
            break
    if loaded:
        break
print(json.dumps(loaded))
"""


def first_to_load_aiokafka(root: Path, *modules: str) -> list[str]:
    """Import ``modules`` in order in a fresh interpreter (``pkg/*``: the package and
    every module in it); the first whose import brought aiokafka in, or []."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize("core", PURE_CORES)
def test_pure_cores_load_no_aiokafka(core: str) -> None:
    assert first_to_load_aiokafka(ROOT, core) == []


def test_simulation_loads_no_aiokafka() -> None:
    assert first_to_load_aiokafka(ROOT, "simulation/*") == []


def test_a_planted_aiokafka_import_in_the_simulation_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "simulation" / "zz_planted.py").write_text(
        "from actors.scheduler import runtime  # noqa: F401\n", encoding="utf-8"
    )
    assert first_to_load_aiokafka(root, "simulation/*") == ["simulation.zz_planted"]


def test_topics_alone_cannot_compile_specs_and_says_so() -> None:
    """The wire layer has no spec compiler of its own; without the time rules
    installed, decoding a timed command is a wiring error, never a rejection."""
    probe = (
        "from topics.commands import decode_command\n"
        "from topics.spec_compiler import NoSpecCompiler\n"
        'body = b\'{"v":1,"type":"schedule.upsert","id":"a",\'\n'
        'body += b\'"spec":{"every":"1m"},"job":{"name":"x"}}\'\n'
        "try:\n"
        "    decode_command(b'a', body, 0)\n"
        "except NoSpecCompiler:\n"
        "    print('refused')\n"
        "import actors.timespec\n"
        "print(type(decode_command(b'a', body, 0)).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["refused", "ScheduleUpsert"], done.stderr
