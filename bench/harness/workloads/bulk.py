"""``enqueue batch 1M``: the bulk path at a million items (full run only).

The same rows as ``enqueue batch`` (each item tagged ``noop``, so it gets its job), at a size
where start-up no longer hides the per-item cost and where the file cannot be held in memory
whole: ``trawl add --file`` timed from start to exit, the raw-SQL insert of the same rows in
one transaction, and on PostgreSQL ``trawl add --file --writers 1`` (the default is two),
the same rows by COPY (what the server's work for them
costs at the least: no conflict handling, nothing checked) and pgqueuer's one ``enqueue()``
call, run back to back. A run takes minutes, so each row gets ``plan.large_runs`` runs (1 by
default) instead of three.
"""

from __future__ import annotations

import dataclasses

from harness.backends import Backend
from harness.plan import Plan, human
from harness.rows import Row, set_ratio
from harness.workloads import enqueue, peers


def workload(plan: Plan) -> str:
    return f"{enqueue.BATCH} {human(plan.enqueue_large or 0)}"


def run(plan: Plan, backend: Backend) -> list[Row]:
    count = plan.enqueue_large
    if not count:
        return []
    large = dataclasses.replace(plan, runs=plan.large_runs)
    name = workload(plan)
    raw = enqueue.measure(
        large, backend, name, "raw-sql", "one transaction", count, enqueue.raw_adder(backend)
    )
    trawl = enqueue.measure(large, backend, name, "trawl", "trawl add --file", count, enqueue.cli)
    set_ratio(trawl, raw)
    rows = [raw, trawl]
    if backend.dialect == "postgresql":
        # The default is two writers on PostgreSQL: one, as before it, in the same run.
        one = enqueue.measure(
            large,
            backend,
            name,
            "trawl",
            "trawl add --file --writers 1",
            count,
            enqueue.cli_adder("--writers", "1"),
        )
        set_ratio(one, raw)
        rows.append(one)
        copy = enqueue.measure(
            large,
            backend,
            name,
            "raw-sql",
            "COPY, one transaction",
            count,
            enqueue.raw_copier(backend),
        )
        set_ratio(copy, raw)
        rows.append(copy)
        peer = peers.PeerRow(
            system="pgqueuer",
            workload=name,
            variant="one enqueue() call",
            jobs=count,
            script="enqueue-batch",
        )
        rows.append(peers.measure(large, backend, peer))
    return rows
