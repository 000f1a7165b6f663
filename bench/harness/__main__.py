"""``bench/run [--quick]``: run trawl's benchmarks, print one table, write results/latest.json."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable

from harness import backends, environment, profile, report
from harness.plan import FULL, HUGE_SIZE, QUICK, Plan
from harness.progress import say
from harness.rows import Row, set_best_peer
from harness.workloads import (
    api,
    bulk,
    claim,
    compare,
    enqueue,
    journal,
    live,
    peers,
    pipelines,
    policies,
    process,
    scheduling,
    versus,
)

WORKLOADS = (
    "enqueue", "bulk", "api", "live", "pipelines", "claim", "scheduling", "policies", "process",
    "versus", "compare", "journal",
)  # fmt: skip
BACKENDS = ("sqlite", "sqlite-full", "postgresql")
# Syncing the WAL at every commit (sqlite-full) is measured where it changes the comparison
# with the peers: processing no-op jobs. Everything else runs at trawl's default level.
AT_FULL_SYNC = ("process", "compare")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    plan = QUICK if args.quick else FULL
    chosen = [b for b in BACKENDS if b in args.backend]
    if args.profile:
        return profile.main(chosen, plan)
    sizes = tuple(s for s in plan.claim_sizes if s < HUGE_SIZE or not args.no_10m)
    environment.compile_trawl()
    started = time.monotonic()
    rows, errors = _run_all(plan, chosen, args.only, sizes)
    set_best_peer(rows)
    meta = environment.describe(plan, chosen, started, errors)
    try:
        meta["peers"] = peers.versions()
    except Exception as error:  # the table matters more than the version list
        meta["peers"] = {"error": str(error)}
    path = report.write(rows, meta)
    print(report.table(rows))
    print(
        f"\n{len(rows)} rows in {meta['elapsed_s']:.0f}s ({plan.name} run); "
        f"written to {path.relative_to(path.parent.parent.parent)}"
    )
    load = environment.LOAD_AT_START[0]
    if load > 0.5:
        print(
            f"note: load average was {load:.1f} at the start: other work on this machine "
            "makes these figures noisy"
        )
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, under 3 minutes")
    parser.add_argument(
        "--no-10m",
        action="store_true",
        help="full run without the 10M not-due claim size (its set-up takes about 3 min)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=WORKLOADS,
        default=list(WORKLOADS),
        help="run only these workloads",
    )
    parser.add_argument(
        "--backend",
        nargs="+",
        choices=BACKENDS,
        default=list(BACKENDS),
        help="run only on these backends (sqlite: synchronous=NORMAL, trawl's default; "
        "sqlite-full: synchronous=FULL)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead: profile one worker on the no-op workload with py-spy",
    )
    return parser


def _run_all(
    plan: Plan, chosen: list[str], only: list[str], sizes: tuple[int, ...]
) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    errors: list[str] = []
    steps: list[tuple[str, Callable[[Plan, backends.Backend], list[Row]]]] = [
        ("enqueue", enqueue.run),
        ("bulk", bulk.run),
        ("api", api.run),
        ("live", live.run),
        ("pipelines", pipelines.run),
        ("claim", lambda p, b: claim.run(p, b, sizes)),
        ("scheduling", scheduling.run),
        ("policies", policies.run),
        # process, versus (trawl and pgqueuer in alternating rounds), then compare, which
        # starts with the peers' no-op rows: the machine's speed drifts over minutes, so
        # the rows compared with each other run back to back
        ("process", process.run),
        ("versus", versus.run),
        ("compare", compare.run),
        ("journal", journal.run),
    ]
    for name in chosen:
        backend = _open(name)
        try:
            for workload, step in steps:
                if workload not in only or (name == "sqlite-full" and workload not in AT_FULL_SYNC):
                    continue
                say(f"{workload} on {name}")
                try:
                    rows.extend(step(plan, backend))
                except Exception as error:
                    traceback.print_exc()
                    errors.append(f"{workload} on {name}: {type(error).__name__}: {error}")
        finally:
            backend.close()
    return rows, errors


def _open(name: str) -> backends.SQLite | backends.PostgreSQL:
    backend = backends.open_backend(name)
    if isinstance(backend, backends.PostgreSQL):
        environment.note_postgres(backend.server)
    return backend


if __name__ == "__main__":
    sys.exit(main())
