"""trawl against pgqueuer on PostgreSQL no-op jobs, in interleaved rounds.

Two rows measured minutes apart compare two states of a machine whose speed drifts (other
work, frequency): two quick runs an hour apart gave trawl/pgqueuer 1.27 and 0.71. Here a
round is a run of each contender back to back, each on a fresh database: trawl's one
process with 100 jobs in flight on one connection and on two, and with 400 on two
(``TRAWL``), and pgqueuer's batch 100 and batch 400 (``PEERS``), in the opposite order
every other round, with enough jobs (``Plan.versus_jobs``) that a run lasts seconds, not
tenths. A trawl row's ratio is the median of its rounds' ratios to the faster pgqueuer
variant of each round, so a slow minute slows both sides of the rounds it falls in.

Each run also records the CPU it cost per job, on the client side (``extra.cpu_us``) and in
its PostgreSQL backends (``extra.server_cpu_us``; harness/cpu.py): load from other work
changes wall time more than CPU seconds, though both rise with it. trawl's is taken over
the span its rate is (first to last commit); pgqueuer's over its timed span
(``QueueManager.run``, which includes its start-up and its last empty dequeue).
"""

from __future__ import annotations

import statistics
from typing import Any

from harness import cpu, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row
from harness.workloads import costs, peers, process

# trawl's contenders: (variant, connections, jobs in flight). The first holds 100 jobs in
# flight on one claim/commit lane, as pgqueuer's batch 100 does. The second holds 400 on two
# lanes of 200 (--connections 2): per job, a lane's round trips and COMMIT weigh less in a
# larger batch, and one lane's round trips and WAL flush overlap the other's batch. The
# third holds 1,000 on two lanes of 500 (before 2026-11-29 a fenced commit's cost grew with
# the square of its batch, and this row ran two lanes of 50 instead).
TRAWL = (
    ("1 process x100, rounds", 1, 100),
    ("1 process x400, 2 connections, rounds", 2, 400),
    ("1 process x1000, 2 connections, rounds", 2, 1000),
)
# pgqueuer's contenders: (variant, batch). A trawl row's ratio in a round is to the faster
# of them in that round, its best variant then.
PEERS = (("batch 100, rounds", 100), ("batch 400, rounds", 400), ("batch 1000, rounds", 1000))


def _peer_row(variant: str, batch: int, jobs: int) -> peers.PeerRow:
    return peers.PeerRow(
        system="pgqueuer",
        workload=process.WORKLOAD,
        variant=variant,
        jobs=jobs,
        script="noop",
        params={"batch": batch},
        batch=batch,
    )


def run(plan: Plan, backend: Backend) -> list[Row]:
    """trawl's rows and pgqueuer's, measured in alternation (PostgreSQL only: pgqueuer has
    no other backend)."""
    if backend.dialect != "postgresql":
        return []
    jobs = plan.versus_jobs
    trawl = {name: (lanes, slots) for name, lanes, slots in TRAWL}
    peer = {name: _peer_row(name, batch, jobs) for name, batch in PEERS}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in [*trawl, *peer]}
    with process._template(backend, jobs) as template:
        for i in range(plan.versus_rounds):
            order = list(runs)
            # ABC, CBA: who goes first alternates, so a steady drift favours no one.
            for name in order[::-1] if i % 2 else order:
                if name in peer:
                    runs[name].append(costs.peer_run(backend, peer[name], jobs))
                else:
                    lanes, slots = trawl[name]
                    runs[name].append(_trawl(backend, template, jobs, lanes, slots))
            say(f"  round {i + 1}: " + "; ".join(_run_text(n, r[-1]) for n, r in runs.items()))
    each = zip(*(runs[name] for name in peer), strict=True)  # the peers' runs, round by round
    best = [max(rounds, key=lambda r: r["rate"]) for rounds in each]
    rows = [_compared(name, runs[name], best, plan) for name in trawl]
    for name, batch in PEERS:
        row = _row("pgqueuer", name, runs[name], plan, {"batch": batch})
        row.ratio_to_best_peer = statistics.median(
            r["rate"] / b["rate"] for r, b in zip(runs[name], best, strict=True)
        )
        rows.append(row)
    return rows


def _compared(
    variant: str, trawl: list[dict[str, Any]], other: list[dict[str, Any]], plan: Plan
) -> Row:
    """trawl's row, with the median of its rounds' ratios to pgqueuer's best variant of each
    round (*other*) as its ratio."""
    lanes, slots = trawl[0]["connections"], trawl[0]["concurrency"]
    params = {"processes": 1, "concurrency": slots, "connections": lanes}
    row = _row("trawl", variant, trawl, plan, params | {"driver": workers.driver()})
    costs.compare(row, trawl, other, f"trawl {variant}", "a job")
    return row


def _run_text(name: str, run: dict[str, Any]) -> str:
    return f"{name.removesuffix(', rounds')} {run['rate']:,.0f} jobs/s ({_cpu_text(run)})"


def _trawl(
    backend: Backend, template: str, jobs: int, connections: int, concurrency: int
) -> dict[str, Any]:
    with backend.clone(template, "versus") as url:
        with cpu.Sampler(url) as sampler:
            wall = workers.run(url, 1, concurrency, connections=connections, on_start=sampler.watch)
        steady = process._steady(backend, url, jobs)
    client, server = sampler.between(steady.first, steady.last)
    return {
        "rate": steady.rate,
        "wall_s": round(wall, 3),
        "cpu_us": costs.per_unit(client, steady.jobs),
        "server_cpu_us": None if server is None else costs.per_unit(server, steady.jobs),
        "connections": connections,
        "concurrency": concurrency,
    }


def _cpu_text(run: dict[str, Any]) -> str:
    total = costs.total(run)
    if total is None:
        return f"client {run['cpu_us']:.0f} us/job"
    return f"{total:.0f} us CPU/job: {run['cpu_us']:.0f} + server {run['server_cpu_us']:.0f}"


def _row(
    system: str, variant: str, runs: list[dict[str, Any]], plan: Plan, more: dict[str, Any]
) -> Row:
    extra: dict[str, Any] = {
        key: [r[key] for r in runs] for key in ("cpu_us", "server_cpu_us") if key in runs[0]
    }
    if "wall_s" in runs[0]:
        extra["wall_s"] = [r["wall_s"] for r in runs]
    params: dict[str, Any] = {"jobs": plan.versus_jobs, "rounds": plan.versus_rounds} | more
    return Row(
        system=system,
        backend="postgresql",
        workload=process.WORKLOAD,
        variant=variant,
        unit="jobs/s",
        better="higher",
        runs=[r["rate"] for r in runs],
        params=params,
        extra=extra,
    )
