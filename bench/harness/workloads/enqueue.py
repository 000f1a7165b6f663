"""``enqueue batch`` and ``enqueue single``: items per second into a prepared database.

Each item carries the tag ``noop``, which selects the one registered task, so adding it also
creates its job. ``enqueue batch`` is ``trawl add --file`` on a JSON Lines file, timed from
the command's start to its exit (process start-up included: it is what a user waits for),
and ``Store.add_items`` with the whole list in-process. ``enqueue single`` is one
``add_items`` call, hence one transaction, per item. The raw-SQL rows insert the same rows
(items, aliases, tags, jobs, journal) with the driver alone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from harness import raw, trawl_db, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from harness.seed import TAG
from trawl.model.records import NewItem
from trawl.store.store import Store

BATCH = "enqueue batch"
SINGLE = "enqueue single"


def run(plan: Plan, backend: Backend) -> list[Row]:
    batch_raw = measure(
        plan,
        backend,
        BATCH,
        "raw-sql",
        "one transaction",
        plan.enqueue_batch,
        raw_adder(backend, per_item=False),
    )
    single_raw = measure(
        plan,
        backend,
        SINGLE,
        "raw-sql",
        "one transaction per item",
        plan.enqueue_single,
        raw_adder(backend, per_item=True),
    )
    rows = [batch_raw, single_raw]
    if workers.cli_options() is not None:
        row = measure(plan, backend, BATCH, "trawl", "trawl add --file", plan.enqueue_batch, cli)
        rows.append(row)
        set_ratio(row, batch_raw)
    in_process = measure(
        plan,
        backend,
        BATCH,
        "trawl",
        "Store.add_items, one call",
        plan.enqueue_batch,
        _store(per_item=False),
    )
    single = measure(
        plan,
        backend,
        SINGLE,
        "trawl",
        "Store.add_items per item",
        plan.enqueue_single,
        _store(per_item=True),
    )
    set_ratio(in_process, batch_raw)
    set_ratio(single, single_raw)
    return [*rows, in_process, single]


Adder = Callable[[str, list[tuple[str, str]]], float]  # (url, items) -> seconds taken


def measure(
    plan: Plan,
    backend: Backend,
    workload: str,
    system: str,
    variant: str,
    count: int,
    add: Adder,
) -> Row:
    rates = []
    items = bench_items(count)
    for i in range(plan.runs):
        with backend.database("enqueue") as url:
            trawl_db.prepare(url)
            seconds = add(url, items)
            check(url, count)
        rates.append(count / seconds)
        say(
            f"  {system} {backend.name} {workload} ({variant}) run {i + 1}: "
            f"{rates[-1]:,.0f} items/s"
        )
    return Row(
        system=system,
        backend=backend.name,
        workload=workload,
        variant=variant,
        unit="items/s",
        better="higher",
        runs=rates,
        params={"items": count},
    )


def bench_items(count: int) -> list[tuple[str, str]]:
    """The rows every enqueue row adds: (id, JSON data)."""
    return [(f"bench:{n}", json.dumps({"n": n})) for n in range(count)]


def check(url: str, count: int) -> None:
    store = Store(url)
    try:
        jobs = sum(c.queued for c in store.status())
    finally:
        store.close()
    if jobs != count:
        raise RuntimeError(f"added {count} items but {jobs} jobs are queued")


def cli_adder(*options: str) -> Adder:
    """``trawl add --file`` with *options*, timed from its start to its exit."""

    def add(url: str, items: list[tuple[str, str]]) -> float:
        with items_file(items) as path:
            started = time.perf_counter()
            subprocess.run(add_command(url, path, *options), check=True, capture_output=True)
            return time.perf_counter() - started

    return add


@contextlib.contextmanager
def items_file(items: list[tuple[str, str]]) -> Iterator[Path]:
    """*items* as the JSON Lines file ``trawl add --file`` reads, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="trawl-bench-") as tmp:
        path = Path(tmp) / "items.jsonl"
        with path.open("w") as file:
            for item_id, data in items:
                file.write(f'{{"id": "{item_id}", "tags": ["{TAG}"], "data": {data}}}\n')
        yield path


def add_command(url: str, path: Path, *options: str) -> list[str]:
    return [str(workers.VENV_BIN / "trawl"), "--db", url, "add", "--file", str(path), *options]


cli = cli_adder()


def _store(*, per_item: bool) -> Adder:
    def add(url: str, items: list[tuple[str, str]]) -> float:
        new = [NewItem(id=i, tags=((TAG, None),), data=json.loads(d)) for i, d in items]
        groups = [[item] for item in new] if per_item else [new]
        store = Store(url)
        try:
            started = time.perf_counter()
            for group in groups:
                store.add_items(group)
            return time.perf_counter() - started
        finally:
            store.close()

    return add


def raw_copier(backend: Backend) -> Adder:
    """The rows of :func:`raw_adder` by COPY (PostgreSQL only)."""

    def add(url: str, items: list[tuple[str, str]]) -> float:
        conn = backend.raw(url)
        try:
            started = time.perf_counter()
            raw.copy_enqueue(conn, items)
            return time.perf_counter() - started
        finally:
            conn.close()

    return add


def raw_adder(backend: Backend, *, per_item: bool = False) -> Adder:
    def add(url: str, items: list[tuple[str, str]]) -> float:
        conn = backend.raw(url)
        try:
            started = time.perf_counter()
            raw.enqueue(conn, backend.dialect, items, per_item)
            return time.perf_counter() - started
        finally:
            conn.close()

    return add
