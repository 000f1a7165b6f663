"""bench/polite: how close a polite crawl comes to its hosts' delay, trawl beside wget.

A crawl held to ``--delay D`` on a single host can at best start a request every D
seconds; the figure that matters is how near it gets to that, and what keeping to it costs
the crawler's CPU (a gate that puts pages aside and takes them back again and again burns
CPU while the host stands idle). Each row crawls the same site (``random_graph``, every
page reachable; one host, or ``--hosts N``) served in this process with the kernel's
receive stamps (:mod:`trawl.demo.httpd`), and reads the request starts from the server's
log:

- ``of_delay``: the mean gap between request starts on a host over D (1.0 = a start every
  delay exactly; trawl adds a little slack by design, ``politeness.slack``);
- ``min_gap``: the closest two starts on a host, over D (below 1.0 the host's delay was
  broken, beyond the clock stamps' jitter);
- ``of_ideal``: the crawl's span, first request to last, over the least it could be at
  one request a delay per host with instant answers (:func:`ideal_span`). Over many hosts
  this is the figure: a crawler whose pages wait for their host's start while holding
  its requests leaves the other hosts idle;
- ``cpu_ms``: the crawler's CPU (its process tree) per request;
- ``vs wget``: the row's request rate over wget's (``wget -r --wait D``, one request at a
  time, the delay after each answer, whatever the host) in the same run.

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
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from crawl_bench import TRAWL, measured, postgres_url

from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import Key, Site, random_graph

HERE = Path(__file__).resolve().parent
SYSTEMS = ("trawl-sqlite", "trawl-postgresql", "wget")
# The same crawl made by `trawl crawl start` and fetched by `trawl worker --crawl` (a second's
# poll where `trawl crawl` has a tenth's), as a fleet's workers fetch it.
WORKER_SYSTEMS = ("trawl-sqlite-worker", "trawl-postgresql-worker")
DEPTH = 10
CONCURRENCY = 16
OUT_DEGREE = 20  # random links a page: every page is reachable within a few hops


def run_one(
    system: str,
    pages: int,
    delay: float,
    script: Script,
    work: Path,
    hosts: int,
    concurrency: int,
    out_degree: int = OUT_DEGREE,
) -> dict[str, Any]:
    site = random_graph(pages, seed=1, out_degree=out_degree, hosts=hosts)
    with SiteServer(site, script, hosts=hosts) as server:
        root = server.origin["main"] + "/"
        cleanup: Any = None
        row: dict[str, Any]
        try:
            if system == "wget":
                row = measured(_wget(root, delay, work), work / "wget.log")
            else:
                if system.startswith("trawl-sqlite"):
                    db = f"sqlite:///{work / 'crawl.db'}"
                else:
                    db, cleanup = postgres_url()
                if system in WORKER_SYSTEMS:
                    start = [str(TRAWL), "--db", db, "crawl", "start", root, "--depth", str(DEPTH)]
                    start += ["--delay", str(delay), "--concurrency", str(concurrency)]
                    subprocess.run([*start, "--no-robots"], check=True, capture_output=True)
                    args = [str(TRAWL), "--db", db, "worker", "--crawl", "--exit-when-idle"]
                    args += ["--concurrency", str(concurrency), "--no-progress"]
                else:
                    args = _trawl(db, root, delay, system.endswith("-x2"), concurrency)
                row = measured(args, work / "t.log")
        finally:
            if cleanup is not None:
                pg, database = cleanup
                pg.drop(database)
        starts = {
            label: sorted(r.at for r in server.requests(label) if r.path != "/robots.txt")
            for label in server.labels
        }
    if row["code"] != 0:
        raise SystemExit(f"{system} exited {row['code']}: see {work}")
    about = {"system": system, "delay": delay, "close": script.close, "latency": script.latency}
    about |= {"hosts": hosts, "concurrency": 1 if system == "wget" else concurrency}
    return _rated(about | row, starts, delay, ideal_span(site, delay))


def ideal_span(site: Site, delay: float) -> float:
    """The least time from the first request to the last of a crawl of *site* to DEPTH at
    one request a *delay* per host, were every answer instant: a page can go once a fetched
    page links to it and its host's last request is a delay old. With many hosts the
    hosts' delays are not the only bound: pages are found as the crawl goes."""
    want = site.truth(DEPTH)
    seen = {("main", "/")}
    known: dict[str, deque[tuple[float, Key]]] = {}
    known.setdefault("main", deque()).append((0.0, ("main", "/")))
    free: dict[str, float] = {}
    last = 0.0
    while any(known.values()):
        host, at = min(
            ((h, max(q[0][0], free.get(h, 0.0))) for h, q in known.items() if q),
            key=lambda pair: pair[1],
        )
        _, key = known[host].popleft()
        free[host] = at + delay
        last = at
        for child in site.links(key):
            if child in want and child not in seen:
                seen.add(child)
                known.setdefault(child[0], deque()).append((at, child))
    return last


def _trawl(db: str, root: str, delay: float, two: bool, concurrency: int) -> list[str]:
    args = [str(TRAWL), "--db", db, "crawl", root, "--depth", str(DEPTH), "--delay", str(delay)]
    args += ["--concurrency", str(concurrency), "--no-robots", "--no-progress"]
    return args + (["--processes", "2"] if two else [])


def _wget(root: str, delay: float, work: Path) -> list[str]:
    args = ["wget", "-r", "-l", str(DEPTH), "--wait", str(delay), "-e", "robots=off"]
    return [*args, "-P", str(work / "files"), "-nv", root]


def _rated(
    row: dict[str, Any], starts: dict[str, list[float]], delay: float, ideal: float
) -> dict[str, Any]:
    """The row's figures from each host's request starts. The gaps are each host's own;
    the rate and the span are the whole crawl's, first request to last."""
    gaps = [b - a for host in starts.values() for a, b in itertools.pairwise(host)]
    every = sorted(at for host in starts.values() for at in host)
    span = every[-1] - every[0] if len(every) > 1 else 0.0
    row["requests"] = len(every)
    row["rate"] = (len(every) - 1) / span if span else 0.0
    row["of_delay"] = sum(gaps) / len(gaps) / delay if gaps else 0.0
    row["min_gap"] = min(gaps) / delay if gaps else 0.0
    row["of_ideal"] = span / ideal if ideal else 0.0
    row["cpu_ms"] = 1000 * row["cpu_s"] / len(every) if every else 0.0
    return row


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['system']:<20} hosts {row['hosts']:3}  c {row['concurrency']:3}  "
        f"delay {row['delay']:5.2f}  "
        f"{'close' if row['close'] else 'keep-alive':<10} latency {row['latency']:4.2f}  "
        f"requests {row['requests']:5}  "
        f"{row['rate']:6.2f}/s  mean gap {row['of_delay']:5.3f}x delay  "
        f"span {row['of_ideal']:5.2f}x ideal  "
        f"min gap {row['min_gap']:5.3f}x  {row['cpu_ms']:6.2f} CPU ms/request  "
        f"vs wget {row.get('vs_wget', '-')}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=120, help="pages of the site")
    parser.add_argument("--hosts", type=int, default=1, help="hosts the pages are spread over")
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="trawl's --concurrency"
    )
    parser.add_argument("--delay", type=float, default=0.25, help="seconds (--delay, --wait)")
    parser.add_argument(
        "--out-degree",
        type=int,
        default=OUT_DEGREE,
        help="random links a page (a few: a thin frontier, pages found as the crawl goes)",
    )
    parser.add_argument("--connections", choices=("keep-alive", "close"), default="keep-alive")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--only",
        default=",".join(SYSTEMS),
        help="comma-separated: trawl-sqlite, trawl-postgresql, trawl-postgresql-x2, wget,"
        " trawl-sqlite-worker, trawl-postgresql-worker",
    )
    args = parser.parse_args()
    systems = args.only.split(",")
    unknown = set(systems) - {*SYSTEMS, *WORKER_SYSTEMS, "trawl-postgresql-x2"}
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
            rows.append(
                run_one(
                    system,
                    args.pages,
                    args.delay,
                    script,
                    place,
                    args.hosts,
                    args.concurrency,
                    args.out_degree,
                )
            )
            print(_line(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wget = next((r for r in rows if r["system"] == "wget"), None)
    if wget is not None and wget["rate"]:
        for row in rows:
            row["vs_wget"] = f"{row['rate'] / wget['rate']:.2f}x"
        print("\n".join(_line(r) for r in rows))
    meta = {"cpus": os.cpu_count(), "depth": DEPTH, "concurrency": args.concurrency}
    meta |= {"at": time.time(), "hosts": args.hosts}
    meta |= {"pages": args.pages, "delay": args.delay, "connections": args.connections}
    meta |= {"latency": args.latency, "out_degree": args.out_degree}
    (HERE / "results").mkdir(exist_ok=True)
    out = HERE / "results" / "polite-latest.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
