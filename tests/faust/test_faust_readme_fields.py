"""The README's tables of `ResultRecord` and `RunRecord` fields are the models' own.

A user writes an agent from those tables alone, so each lists every field of its
model, in the model's order, with the model's type (and the result's row of
``status`` names every status of the contract).
"""

from __future__ import annotations

import types
import typing
from typing import Any

import faust
import pytest

from actors.faust import ResultRecord, RunRecord
from tests.kit.faust_readme import field_table, readme_section
from topics.vocabulary import RunStatus


def spelled(hint: Any) -> str:
    """A type as the README writes it: ``str | None``, ``dict[str, int]``, ``JobRecord``."""
    if isinstance(hint, types.UnionType):
        return " | ".join(spelled(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if hint is Any:
        return "Any"
    origin = typing.get_origin(hint)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(spelled(arg) for arg in typing.get_args(hint))}]"
    return str(hint.__name__)


def model_table(model: type[faust.Record]) -> list[tuple[str, str]]:
    hints = typing.get_type_hints(model)
    return [(name, spelled(hints[name])) for name in model._options.fields]


@pytest.mark.parametrize("model", [ResultRecord, RunRecord], ids=lambda model: model.__name__)
def test_the_readme_lists_every_field_with_its_type(model: type[faust.Record]) -> None:
    assert field_table(model.__name__) == model_table(model)


def test_the_readme_names_every_status() -> None:
    row = next(
        line for line in readme_section().splitlines() if line.startswith("| `status` | `str` |")
    )
    assert {status.value for status in RunStatus} <= set(row.replace("`", " ").split())


def test_spelled_writes_types_as_python_does() -> None:
    assert spelled(str | None) == "str | None"
    assert spelled(dict[str, int] | None) == "dict[str, int] | None"
    assert spelled(dict[str, Any]) == "dict[str, Any]"
    assert spelled(ResultRecord) == "ResultRecord"
