"""Twenty clients adding items through the API while workers run them: every item and job
is there once, and every job runs."""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import trawl
from tests.api.conftest import Served
from tests.support.procs import Procs, running, wait_for
from trawl.store.store import Store

CLIENTS = 20
PER_CLIENT = 200
APP = """
import trawl

app = trawl.App()

@app.task(tags=["product"])
def price(ctx: trawl.Context) -> dict:
    return {"seen": ctx.id}
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


@pytest.mark.slow
def test_twenty_clients_add_while_workers_run(served: Served, tmp_path: Path, procs: Procs) -> None:
    app_file = tmp_path / "app.py"
    app_file.write_text(textwrap.dedent(APP))
    workers = [procs.worker(f"{app_file}:app", served.db, concurrency=8) for _ in range(2)]
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            with trawl.Client(served.base, token=served.tokens["write"]) as c:
                for start in range(0, PER_CLIENT, 20):
                    # neighbours overlap by half: the same id sent by two clients at once
                    ids = [(n * PER_CLIENT // 2) + start + k for k in range(20)]
                    c.add_items({"id": f"sku:{i}", "tags": ["product"]} for i in ids)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    expected = {
        f"sku:{i}"
        for n in range(CLIENTS)
        for i in range(n * PER_CLIENT // 2, n * PER_CLIENT // 2 + PER_CLIENT)
    }

    def counts() -> dict[str, int]:
        with Store(served.db) as store:
            return {r.task: r.done for r in store.status() if r.task == "price"}

    wait_for(lambda: counts().get("price") == len(expected), "every job done", timeout=120)
    for w in workers:
        w.kill()
    with Store(served.db) as store:
        found: list[str] = []
        after = ""
        while batch := store.tagged("product", after=after, limit=1000):
            found += batch
            after = batch[-1]
        assert sorted(found) == sorted(expected)  # each once
        row = next(r for r in store.status() if r.task == "price")
        assert (row.done, row.queued, row.running, row.failed) == (len(expected), 0, 0, 0)
