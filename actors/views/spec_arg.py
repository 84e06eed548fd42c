"""The SPEC a person types into "when will it run?" (`kafkron next`, the web console).

A cron expression, ``every 90s`` (or a bare duration), an instant, a spec object,
or a whole ``schedule.upsert`` command, told apart by their shape.
"""

from __future__ import annotations

from typing import Any

from actors.timespec import SpecError
from actors.timespec.durations import parse_duration_s
from topics.codec import loads

# Command fields that shape when a spec fires (dst, spread, bounds) and may be given
# around a spec object.
_COMMAND_KEYS = ("v", "type", "id", "dst", "spread", "start", "end")


def parse_spec_text(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec object, command fields around it) from the SPEC argument."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = loads(stripped)
        except ValueError as exc:
            raise SpecError(f"SPEC looks like JSON but does not parse: {exc}") from None
        if not isinstance(obj, dict):
            raise SpecError("SPEC: expected a JSON object")
        if "spec" in obj:  # a whole schedule.upsert command
            spec = obj["spec"]
            if not isinstance(spec, dict):
                raise SpecError("spec: expected an object")
            return dict(spec), obj
        command = {k: obj[k] for k in _COMMAND_KEYS if k in obj}
        return {k: v for k, v in obj.items() if k not in _COMMAND_KEYS}, command
    lowered = stripped.lower()
    if lowered.startswith("every "):
        return {"every": stripped[len("every ") :].strip()}, {}
    if ":" in stripped:  # cron never has a colon; an instant always does
        return {"at": stripped}, {}
    try:
        parse_duration_s(stripped)
    except SpecError:
        return {"cron": stripped}, {}
    return {"every": stripped}, {}
