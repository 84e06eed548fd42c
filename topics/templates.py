"""Templates: text with ``{name}`` placeholders, ``{{`` and ``}}`` for literal braces.

The one parser of every template of a command (docs/DESIGN.md §6.7, §8.2): a target's
fields (`topics.targets`, names from its ``PLACEHOLDERS``) and a concurrency or
rate-limit key (`topics.key_templates`, ``{schedule_id}`` and ``{args.NAME}``). Each
caller judges the names; this module finds them and renders them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# A name may hold letters, digits, '_', '-' and '.': the targets know only lower-case
# names, a key also ``args.NAME``; anything else in braces is a lone brace, refused.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z0-9_.-]*)\}|[{}]")


def template_names(text: str) -> list[tuple[str, str | None]]:
    """Each placeholder of ``text`` as (token, name); a lone brace or a name with other
    characters is (token, None); ``{{`` and ``}}`` (literal braces) are left out. The one
    parser of every template: targets' fields and the keys of `topics.key_templates`."""
    found: list[tuple[str, str | None]] = []
    for match in _PLACEHOLDER.finditer(text):
        token = match.group(0)
        if token not in ("{{", "}}"):
            found.append((token, match.group(1)))
    return found


_LONE = re.compile(r"\{([a-z_]*)\}")
_LONE_CACHE_MAX = 4096
# template -> the name when the whole template is one placeholder (``{schedule_id}``,
# the usual key), else "" (a name is never empty: an empty one is refused at upsert).
_lone_names: dict[str, str] = {}


def _lone_name(text: str) -> str:
    name = _lone_names.get(text)
    if name is None:
        if len(_lone_names) >= _LONE_CACHE_MAX:
            _lone_names.clear()
        whole = _LONE.fullmatch(text)
        name = _lone_names[text] = whole.group(1) if whole is not None else ""
    return name


def render(text: str, values: Callable[[str], str]) -> str:
    """``text`` with each placeholder replaced by ``values(name)``; ``{{``/``}}`` unbraced."""
    if "{" not in text and "}" not in text:
        return text
    lone = _lone_name(text)  # rendered per fire: skip the substitution when it is all
    if lone:
        return values(lone)

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values(match.group(1) or "")

    return _PLACEHOLDER.sub(one, text)


def render_json(value: Any, values: Callable[[str], str]) -> Any:
    """Every string of a JSON value rendered (object keys are left as written)."""
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, list):
        return [render_json(item, values) for item in value]
    if isinstance(value, dict):
        return {name: render_json(item, values) for name, item in value.items()}
    return value
