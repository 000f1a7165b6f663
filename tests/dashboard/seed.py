"""Database states the dashboard tests start from, made through the engine's own paths (a
claim and a commit, as a worker makes them), not by writing rows."""

from __future__ import annotations

import msgspec

from tests.integration.helpers import claim_one, commit_one, failure, item
from trawl.engine import edit
from trawl.model import effects as fx
from trawl.model.records import FailureInfo
from trawl.store.store import Store

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "shop.py", line 9, in price\n'
    "ValueError: no price on the page"
)


def failed(
    url: str, item_id: str, *, error_type: str = "ValueError", message: str = "no price"
) -> int:
    """*item_id* (tagged product) added, its price job claimed and failed once; the job id."""
    with Store(url) as store:
        store.add_items([item(item_id, "product")])
        job = claim_one(store, "price")
        info = FailureInfo(error_type=error_type, message=message, traceback=TRACEBACK)
        commit_one(store, msgspec.structs.replace(failure(job), failure=info))
        return job.job_id


def aliased(url: str, item_id: str, alias: str) -> None:
    with Store(url) as store:
        store.add_items([item(item_id, "product", title="a kettle")])
        edit.apply(store, [fx.CreateAlias(alias=alias, to=item_id)], by="test")
