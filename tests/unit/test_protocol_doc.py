"""docs/protocol.md carries the JSON Schema of every pipeline message, as the code has it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from trawl.model import wire

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_protocol_schemas.py"
    spec = importlib.util.spec_from_file_location("gen_protocol_schemas", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schemas_in_the_docs_are_current() -> None:
    current = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert current == _generator().render(current), (
        "docs/protocol.md's schemas are out of date: run "
        "`.venv/bin/python scripts/gen_protocol_schemas.py` and commit the result"
    )


def test_every_request_type_and_advisory_is_described() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    for kind in [*wire.REQUESTS, *wire.ADVISORIES]:
        assert f"`{kind}`" in text.split("## Schemas")[0], f"{kind} is not described"


def test_the_schemas_are_json_with_a_definition_per_message() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    body = text.split("```json\n")[-1].split("```")[0]
    components = json.loads(body)["$defs"]
    for name in ("Hello", "Welcome", "ClaimRequest", "ClaimReply", "Attempt", "PatchData"):
        assert name in components
