"""A benchmark script of ``bench/`` loaded as a module, for the tests of its arithmetic."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.kit.paths import REPO


def load_bench(name: str) -> ModuleType:
    """``bench/{name}.py`` as the module ``bench_{name}`` (its siblings importable)."""
    bench = str(REPO / "bench")
    if bench not in sys.path:  # the scripts import their siblings (measured, proc_cpu)
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
