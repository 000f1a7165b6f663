import pytest

import trawl
from trawl.model.errors import InvalidDuration, InvalidInput, UnknownTask


def test_task_declaration_records_its_settings() -> None:
    app = trawl.App(db="sqlite:///x.db")

    @app.task(tags=["product"], version=2, ttl="7d", timeout="60s", retries=5, niceness=-1)
    async def price(ctx: trawl.Context) -> dict[str, float]:
        return {"price": 1.0}

    d = app.get("price")
    assert (d.tags, d.version, d.ttl, d.timeout, d.retries, d.niceness) == (
        ("product",),
        "2",
        604800.0,
        60.0,
        5,
        -1,
    )
    assert d.is_async
    assert d.info().name == "price"


def test_plain_functions_are_tasks_too() -> None:
    app = trawl.App()

    @app.task
    def parse(ctx: trawl.Context) -> None:
        return None

    assert not app.get("parse").is_async
    assert app.get("parse").ttl is None


def test_default_db_comes_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAWL_DB", "postgresql://somewhere/db")
    assert trawl.App().db == "postgresql://somewhere/db"
    monkeypatch.delenv("TRAWL_DB")
    assert trawl.App().db == "sqlite:///trawl.db"


def test_bad_declarations_are_rejected_by_name() -> None:
    app = trawl.App()
    with pytest.raises(InvalidDuration):
        app.task(ttl="a week")(lambda ctx: None)
    with pytest.raises(InvalidInput, match="tags must be a list"):
        app.task(name="t1", tags="product")(lambda ctx: None)
    with pytest.raises(InvalidInput, match="retries"):
        app.task(name="t2", retries=-1)(lambda ctx: None)
    with pytest.raises(InvalidInput, match="timeout must be positive"):
        app.task(name="t3", timeout=0)(lambda ctx: None)
    app.task(name="t4")(lambda ctx: None)
    with pytest.raises(InvalidInput, match="declared twice"):
        app.task(name="t4")(lambda ctx: None)


def test_unknown_task_lists_known_ones() -> None:
    app = trawl.App()
    app.task(name="a")(lambda ctx: None)
    with pytest.raises(UnknownTask, match="this app declares: a"):
        app.select(["b"])
