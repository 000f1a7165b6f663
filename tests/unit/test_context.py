from typing import Any

import pytest

import trawl
from trawl.model import effects as fx
from trawl.model.errors import InvalidData, InvalidItemId
from trawl.model.records import ItemView
from trawl.runtime.context import asks


class NoReads:
    async def get_item(self, alias: str) -> ItemView | None:
        return None

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        return None


def make() -> trawl.Context:
    return trawl.Context(
        id="sku:1",
        data={"a": 1},
        tags={"product": None},
        attempt=1,
        task="price",
        reader=NoReads(),
    )


def test_requests_are_buffered_in_order_with_defaults_filled_in() -> None:
    ctx = make()
    ctx.create_item("sku:2", tags=["review", ("lang", "en")], data={"u": 1})
    ctx.update_data(lambda old: old)
    ctx.expire()
    ctx.set_ttl("1d", task="other")
    ctx.log("info", "hello")
    kinds = [type(e) for e in asks(ctx).effects]
    assert kinds == [fx.CreateItem, fx.UpdateData, fx.Expire, fx.SetTTL, fx.Log]
    create = asks(ctx).effects[0]
    assert isinstance(create, fx.CreateItem)
    assert create.created_by == "sku:1"
    assert [(t.name, t.value) for t in create.tags] == [("review", None), ("lang", "en")]
    expire, ttl = asks(ctx).effects[2], asks(ctx).effects[3]
    assert isinstance(expire, fx.Expire)
    assert (expire.id, expire.task) == ("sku:1", "price")
    assert isinstance(ttl, fx.SetTTL)
    assert (ttl.task, ttl.ttl) == ("other", 86400.0)


def test_allow_failure_toggles() -> None:
    ctx = make()
    assert not asks(ctx).allow_failure
    ctx.allow_failure()
    assert asks(ctx).allow_failure
    ctx.allow_failure(False)
    assert not asks(ctx).allow_failure


def test_bad_requests_fail_inside_the_task_where_they_were_made() -> None:
    ctx = make()
    with pytest.raises(InvalidItemId, match="empty"):
        ctx.create_item("")
    with pytest.raises(InvalidData, match="JSON object"):
        ctx.create_item("sku:3", data=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidData, match="not JSON-serialisable"):
        ctx.create_item("sku:3", data={"x": object()})
    with pytest.raises(InvalidItemId, match="control character"):
        ctx.create_alias("bad\nalias")
    with pytest.raises(TypeError, match="expected a function"):
        ctx.update_data("not callable")  # type: ignore[arg-type]
    assert asks(ctx).effects == []


def test_sync_reads_need_an_event_loop() -> None:
    with pytest.raises(RuntimeError, match="no event loop"):
        make().get_item_sync("x")
