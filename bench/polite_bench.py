"""bench/polite: how close a polite crawl of one host comes to its delay, trawl beside wget.

A crawl held to ``--delay D`` on a single host can at best start a request every D
seconds; the figure that matters is how near it gets to that, and what keeping to it costs
the crawler's CPU (a gate that puts pages aside and takes them back again and again burns
CPU while the host stands idle). Each row crawls the same one-host site (``random_graph``,
every page reachable) served in this process with the kernel's receive stamps
(:mod:`trawl.demo.httpd`), and reads the request starts from the server's log:

- ``of_delay``: the mean gap between request starts over D (1.0 = a start every delay
  exactly; trawl adds a little slack by design, ``politeness.slack``);
- ``min_gap``: the closest two starts, over D (below 1.0 the host's delay was broken,
  beyond the clock stamps' jitter);
- ``cpu_ms``: the crawler's CPU (its process tree) per request;
- ``vs wget``: the row's request rate over wget's (``wget -r --wait D``, one request at a
  time, the delay after each answer) in the same run.

``--connections close`` answers every request with ``Connection: close``, as servers past
their keep-alive do, so each request sets up a connection of its own; ``--latency S``
holds every response S seconds, as a distant or busy server does (wget waits its delay
after each answer, so its gaps grow by S; a crawler with requests in flight need not).

Rows go to stdout and bench/results/polite-latest.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from crawl_bench import TRAWL, measured, postgres_url

from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import random_graph

HERE = Path(__file__).resolve().parent
SYSTEMS = ("trawl-sqlite", "trawl-postgresql", "wget")
DEPTH = 10
CONCURRENCY = 16
OUT_DEGREE = 20  # random links a page: every page is reachable within a few hops


def run_one(system: str, pages: int, delay: float, script: Script, work: Path) -> dict[str, Any]:
    site = random_graph(pages, seed=1, out_degree=OUT_DEGREE, hosts=1)
    with SiteServer(site, script, hosts=1) as server:
        root = server.origin["main"] + "/"
        cleanup: Any = None
        row: dict[str, Any]
        try:
            if system == "wget":
                row = measured(_wget(root, delay, work), work / "wget.log")
            else:
                if system == "trawl-sqlite":
                    db = f"sqlite:///{work / 'crawl.db'}"
                else:
                    db, cleanup = postgres_url()
                row = measured(_trawl(db, root, delay, system.endswith("-x2")), work / "t.log")
        finally:
            if cleanup is not None:
                pg, database = cleanup
                pg.drop(database)
        starts = sorted(r.at for r in server.requests("main") if r.path != "/robots.txt")
    if row["code"] != 0:
        raise SystemExit(f"{system} exited {row['code']}: see {work}")
    about = {"system": system, "delay": delay, "close": script.close, "latency": script.latency}
    return _rated(about | row, starts, delay)


def _trawl(db: str, root: str, delay: float, two: bool) -> list[str]:
    args = [str(TRAWL), "--db", db, "crawl", root, "--depth", str(DEPTH), "--delay", str(delay)]
    args += ["--concurrency", str(CONCURRENCY), "--no-robots", "--no-progress"]
    return args + (["--processes", "2"] if two else [])


def _wget(root: str, delay: float, work: Path) -> list[str]:
    args = ["wget", "-r", "-l", str(DEPTH), "--wait", str(delay), "-e", "robots=off"]
    return [*args, "-P", str(work / "files"), "-nv", root]


def _rated(row: dict[str, Any], starts: list[float], delay: float) -> dict[str, Any]:
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    row["requests"] = len(starts)
    row["rate"] = len(gaps) / (starts[-1] - starts[0]) if gaps else 0.0
    row["of_delay"] = sum(gaps) / len(gaps) / delay if gaps else 0.0
    row["min_gap"] = min(gaps) / delay if gaps else 0.0
    row["cpu_ms"] = 1000 * row["cpu_s"] / len(starts) if starts else 0.0
    return row


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['system']:<20} delay {row['delay']:5.2f}  "
        f"{'close' if row['close'] else 'keep-alive':<10} latency {row['latency']:4.2f}  "
        f"requests {row['requests']:5}  "
        f"{row['rate']:6.2f}/s  mean gap {row['of_delay']:5.3f}x delay  "
        f"min gap {row['min_gap']:5.3f}x  {row['cpu_ms']:6.2f} CPU ms/request  "
        f"vs wget {row.get('vs_wget', '-')}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=120, help="pages of the one host")
    parser.add_argument("--delay", type=float, default=0.25, help="seconds (--delay, --wait)")
    parser.add_argument("--connections", choices=("keep-alive", "close"), default="keep-alive")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--only",
        default=",".join(SYSTEMS),
        help="comma-separated: trawl-sqlite, trawl-postgresql, trawl-postgresql-x2, wget",
    )
    args = parser.parse_args()
    systems = args.only.split(",")
    unknown = set(systems) - {*SYSTEMS, "trawl-postgresql-x2"}
    if unknown:
        raise SystemExit(f"unknown systems: {', '.join(sorted(unknown))}")
    if "wget" in systems and shutil.which("wget") is None:
        print("wget is missing (Debian: apt-get install -y wget): skipping it", file=sys.stderr)
        systems.remove("wget")
    script = Script(close=args.connections == "close", latency=args.latency)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="trawl-polite-bench-"))
    try:
        for i, system in enumerate(systems):
            place = work / f"{i}-{system}"
            place.mkdir()
            rows.append(run_one(system, args.pages, args.delay, script, place))
            print(_line(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wget = next((r for r in rows if r["system"] == "wget"), None)
    if wget is not None and wget["rate"]:
        for row in rows:
            row["vs_wget"] = f"{row['rate'] / wget['rate']:.2f}x"
        print("\n".join(_line(r) for r in rows))
    meta = {"cpus": os.cpu_count(), "depth": DEPTH, "concurrency": CONCURRENCY, "at": time.time()}
    meta |= {"pages": args.pages, "delay": args.delay, "connections": args.connections}
    meta |= {"latency": args.latency}
    (HERE / "results").mkdir(exist_ok=True)
    out = HERE / "results" / "polite-latest.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
