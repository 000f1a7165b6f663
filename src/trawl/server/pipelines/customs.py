"""The custom effects a pipeline may send by name, and how the server makes each from its
body (the crawler's outcomes, once remote crawling sends them)."""

from __future__ import annotations

from trawl.server.pipelines.effects import CustomDecoder

CUSTOM_EFFECTS: dict[str, CustomDecoder] = {}
