"""The custom effects a pipeline may send by name, and how the tracker makes each from its
body after checking it is about the attempt it came with: the crawler's outcomes."""

from __future__ import annotations

from trawl.crawl.remote import decode_fetched, decode_parked, decode_skipped
from trawl.server.pipelines.effects import CustomDecoder

CUSTOM_EFFECTS: dict[str, CustomDecoder] = {
    "crawl.fetched": decode_fetched,
    "crawl.skipped": decode_skipped,
    "crawl.parked": decode_parked,
}
