"""``enqueue batch 1M``: the bulk path at a million items (full run only).

The same rows as ``enqueue batch`` (each item tagged ``noop``, so it gets its job), at a size
where start-up no longer hides the per-item cost and where the file cannot be held in memory
whole: ``trawl add --file`` timed from start to exit, the raw-SQL insert of the same rows in
one transaction, and on PostgreSQL ``trawl add --file --writers 1`` (the default is two),
the same rows by COPY (what the server's work for them costs at the least: no conflict
handling, nothing checked) and pgqueuer's one ``enqueue()`` call.

A run takes half a minute, so the rows that are only context get one run each
(``plan.large_runs``). The comparison the issue sets, ``trawl add --file`` against
pgqueuer on PostgreSQL, runs in alternating rounds instead (``plan.bulk_rounds``, the
order swapped every other round), and trawl's ratio is the median of its rounds' ratios:
one run each, back to back, moved by 10-13 % between two runs of the benchmark here.
Every PostgreSQL run starts after a ``CHECKPOINT``: a million items write over a gigabyte of
WAL, and the checkpoint it sets off could otherwise land in whichever run comes next.
"""

from __future__ import annotations

import dataclasses
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import cpu, trawl_db
from harness.backends import Backend
from harness.plan import Plan, human
from harness.progress import say
from harness.rows import Row, set_ratio
from harness.workloads import costs, enqueue, peers

TRAWL = "trawl add --file"
PEER = "one enqueue() call"


def workload(plan: Plan) -> str:
    return f"{enqueue.BATCH} {human(plan.enqueue_large or 0)}"


def run(plan: Plan, backend: Backend) -> list[Row]:
    count = plan.enqueue_large
    if not count:
        return []
    large = dataclasses.replace(plan, runs=plan.large_runs)
    name = workload(plan)
    _checkpoint(backend)
    raw = enqueue.measure(
        large, backend, name, "raw-sql", "one transaction", count, enqueue.raw_adder(backend)
    )
    if backend.dialect != "postgresql":
        trawl = enqueue.measure(large, backend, name, "trawl", TRAWL, count, enqueue.cli)
        set_ratio(trawl, raw)
        return [raw, trawl]
    trawl, peer = _rounds(plan, backend, name, count)
    set_ratio(trawl, raw)
    # The default is two writers on PostgreSQL: one, as before it, in the same run.
    _checkpoint(backend)
    one = enqueue.measure(
        large,
        backend,
        name,
        "trawl",
        f"{TRAWL} --writers 1",
        count,
        enqueue.cli_adder("--writers", "1"),
    )
    set_ratio(one, raw)
    _checkpoint(backend)
    copy = enqueue.measure(
        large, backend, name, "raw-sql", "COPY, one transaction", count, enqueue.raw_copier(backend)
    )
    set_ratio(copy, raw)
    return [raw, trawl, one, copy, peer]


def _rounds(plan: Plan, backend: Backend, name: str, count: int) -> tuple[Row, Row]:
    """``trawl add --file`` and pgqueuer's ``enqueue()``, a run of each per round (who goes
    first alternates); trawl's row carries the median of its rounds' ratios."""
    peer = peers.PeerRow(
        system="pgqueuer", workload=name, variant=PEER, jobs=count, script="enqueue-batch"
    )
    runs: dict[str, list[dict[str, Any]]] = {"trawl": [], "pgqueuer": []}
    with enqueue.items_file(enqueue.bench_items(count)) as path:
        for i in range(plan.bulk_rounds):
            for who in ("pgqueuer", "trawl") if i % 2 else ("trawl", "pgqueuer"):
                _checkpoint(backend)
                if who == "trawl":
                    runs[who].append(_trawl(backend, path, count))
                else:
                    runs[who].append(costs.peer_run(backend, peer, count))
            mine, theirs = runs["trawl"][-1], runs["pgqueuer"][-1]
            say(
                f"  {name} round {i + 1}: trawl {_text(mine)}; pgqueuer {_text(theirs)}"
                f" ({mine['rate'] / theirs['rate']:.2f}x)"
            )
    params = {"items": count, "rounds": plan.bulk_rounds}
    trawl = _row("trawl", f"{TRAWL}, rounds", name, runs["trawl"], params)
    costs.compare(trawl, runs["trawl"], runs["pgqueuer"], TRAWL, "an item")
    other = _row("pgqueuer", f"{PEER}, rounds", name, runs["pgqueuer"], params)
    return trawl, other


def _trawl(backend: Backend, path: Path, count: int) -> dict[str, Any]:
    """One ``trawl add --file`` on a fresh database, timed from start to exit, with the CPU
    it cost: the command's own and its PostgreSQL backends'."""
    with backend.database("enqueue") as url:
        trawl_db.prepare(url)
        # A reading every 0.1 s, each also looking for new backends: a run lasts seconds,
        # and a backend that came and went between two looks would go uncounted.
        with cpu.Sampler(url, poll=0.1, find_every=1) as sampler:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started, timer = time.time(), time.perf_counter()
            subprocess.run(enqueue.add_command(url, path), check=True, capture_output=True)
            wall = time.perf_counter() - timer
            ended = time.time()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        enqueue.check(url, count)
    client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    server = sampler.between(started, ended)[1]
    return {
        "rate": count / wall,
        "cpu_us": costs.per_unit(client, count),
        "server_cpu_us": None if server is None else costs.per_unit(server, count),
    }


def _text(run: dict[str, Any]) -> str:
    total = costs.total(run)
    cost = (
        "" if total is None else f", {total:.1f} us CPU an item ({run['server_cpu_us']:.1f} server)"
    )
    return f"{run['rate']:,.0f} items/s{cost}"


def _row(
    system: str, variant: str, workload: str, runs: list[dict[str, Any]], params: dict[str, Any]
) -> Row:
    return Row(
        system=system,
        backend="postgresql",
        workload=workload,
        variant=variant,
        unit="items/s",
        better="higher",
        runs=[r["rate"] for r in runs],
        params=params,
        extra={key: [r[key] for r in runs] for key in ("cpu_us", "server_cpu_us")},
    )


_WARNED: set[str] = set()


def _checkpoint(backend: Backend) -> None:
    if backend.checkpoint() or backend.dialect != "postgresql" or backend.name in _WARNED:
        return
    _WARNED.add(backend.name)
    say("  (this PostgreSQL user may not CHECKPOINT: a run may pay for the one before's)")
