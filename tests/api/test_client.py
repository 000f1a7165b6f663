"""trawl.Client and trawl.AsyncClient against a real server."""

from __future__ import annotations

import asyncio

import pytest

import trawl
from tests.api.conftest import Served


def test_the_client_adds_reads_pages_and_consumes(served: Served) -> None:
    with trawl.Client(served.base, token=served.tokens["write"]) as client:
        assert client.health()["status"] == "ok"
        added = client.add_items(
            {"id": f"sku:{n}", "tags": ["product"], "data": {"n": n}} for n in range(1500)
        )
        assert len(added["created"]) == 1500
        item = client.item("sku:7")
        assert item["data"] == {"n": 7}
        assert client.patch_data("sku:7", {"n": None, "m": 1})["data"] == {"m": 1}
        assert list(client.tagged("product")) == sorted(f"sku:{n}" for n in range(1500))
        assert len(list(client.due(task="price"))) == 1500
        first = [e["seq"] for e in client.journal(consumer="indexer")]
        assert len(first) >= 1501
        assert list(client.journal(consumer="indexer")) == []  # resumed after its last ack
        client.add_items([{"id": "sku:new"}])
        assert [e["item_id"] for e in client.journal(consumer="indexer")] == ["sku:new"]
        with pytest.raises(trawl.ApiError) as caught:
            client.item("sku:missing")
        assert caught.value.status == 404
        assert "sku:missing" in str(caught.value)
    with trawl.Client(served.base, token="trawl_bad_bad") as bad, pytest.raises(trawl.ApiError):
        bad.tasks()


def test_a_consumer_that_stops_mid_page_sees_that_page_again(served: Served) -> None:
    with trawl.Client(served.base, token=served.tokens["write"]) as client:
        client.add_items({"id": f"k:{n}"} for n in range(10))
        entry = next(iter(client.journal(consumer="crashy")))  # then processing it crashed
        again = next(iter(client.journal(consumer="crashy")))
        assert again["seq"] == entry["seq"]


def test_the_async_client(served: Served) -> None:
    async def go() -> None:
        async with trawl.AsyncClient(served.base, token=served.tokens["write"]) as client:
            await client.add_items([{"id": "a:1", "tags": ["product"]}])
            assert (await client.item("a:1"))["id"] == "a:1"
            assert [i async for i in client.tagged("product")] == ["a:1"]
            kinds = [e["kind"] async for e in client.journal(consumer="async")]
            assert "item.created" in kinds

    asyncio.run(go())
