"""bench/crawl: pages per second and peak RSS crawling a generated site, trawl beside peers.

For each site size the site is served by its own process (``python -m trawl.demo.httpd``)
and crawled to depth 5 by: trawl on SQLite and on PostgreSQL (WARC on; on PostgreSQL also
with ``--processes 2``, two processes sharing the frontier, and as a remote pipeline:
``trawl worker --crawl --server`` fetching through a tracker, ``trawl serve``), trawl with
``--browser`` (every page rendered in headless Chromium), ``wget -r --warc-file`` and Scrapy
(breadth-first settings, no WARC: it has none). Each system runs under a wrapper that
reports its peak RSS (``ru_maxrss`` of the process tree's largest process); the bench also
samples the whole tree's memory (PSS, so pages Chromium's processes share count once),
which is what a browser crawl costs. Rows go to stdout and bench/results/crawl-latest.json.
With ``--instructions`` the SQLite crawls run under callgrind instead, and a page's cost
is counted in instructions (crawl_instructions.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crawl_instructions
import crawl_summary

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = ROOT / ".venv" / "bin" / "python"
TRAWL = ROOT / ".venv" / "bin" / "trawl"
SCRAPY_VENV = HERE / ".venv-scrapy"
DEPTH = 5
CONCURRENCY = 16
# Pages a remote pipeline holds per request the crawl allows, as `trawl crawl` runs
# (trawl.crawl.inflight.SLOTS_PER_REQUEST): a page fetched and waiting for its commit, or
# waiting for its turn, holds a slot, so with one slot a request the requests in flight
# fall below the crawl's concurrency (docs/pipelines.md).
PIPELINE_SLOTS = 2 * CONCURRENCY
RSS = (
    "import resource, subprocess, sys, time; t = time.monotonic();"
    " code = subprocess.run(sys.argv[1:]).returncode;"
    " u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    " print('BENCH', code, time.monotonic() - t, u.ru_maxrss, u.ru_utime + u.ru_stime,"
    " file=sys.stderr)"
)


def measured(
    argv: list[str], log: Path, env: dict[str, str] | None = None, database: str | None = None
) -> dict[str, float]:
    """Run *argv*; wall seconds, peak RSS (MiB) of its largest process and peak PSS of its
    whole process tree (MiB), exit code, CPU seconds; its output goes to *log*. With a
    PostgreSQL *database* URL, also the CPU seconds its server processes spent meanwhile
    (``db_cpu_s``): a crawl's database work, which SQLite does inside the crawler."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w"))
        err = stack.enter_context(tempfile.TemporaryFile("w+"))
        sampler = stack.enter_context(_server_cpu(database)) if database else None
        started = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-c", RSS, *argv], stdout=out, stderr=err, text=True, env=env
        )
        tree = 0
        while proc.poll() is None:  # a sample every 0.2 s: the bench's own cost stays small
            tree = max(tree, _tree_pss(proc.pid))
            time.sleep(0.2)
        ended = time.time()
        if sampler is not None:
            time.sleep(2 * SERVER_POLL)  # a reading after the end, to interpolate to it
        err.seek(0)
        stderr = err.read()
    line = [x for x in stderr.splitlines() if x.startswith("BENCH ")][-1].split()
    log.open("a").write(stderr)
    row = {
        "code": int(line[1]),
        "wall_s": float(line[2]),
        "rss_mib": int(line[3]) / 1024,
        "tree_mib": tree / 1024,
        "cpu_s": float(line[4]),
    }
    if sampler is not None:
        server = sampler.between(started, ended)[1]
        if server is not None:  # None: a server whose processes this user cannot read
            row["db_cpu_s"] = server
    return row


# How often the database's processes are read: a crawl keeps its connections, so a reading
# every tenth of a second loses little of a backend that ends, at little cost to the bench.
SERVER_POLL = 0.1


@contextlib.contextmanager
def _server_cpu(database: str) -> Iterator[Any]:
    sys.path.insert(0, str(HERE))
    from harness import cpu

    with cpu.Sampler(database, poll=SERVER_POLL, find_every=1) as sampler:
        yield sampler


def _tree_pss(root: int) -> int:
    """KiB of proportional set size of *root* and every process under it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        grown = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= grown
        grew = bool(grown)
    total = 0
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        found = re.search(r"^Pss:\s+(\d+) kB", rollup, re.M)
        total += int(found.group(1)) if found else 0
    return total


def serve(pages: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [str(PY), "-m", "trawl.demo.httpd", "--pages", str(pages)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def trawl(
    db: str,
    root: str,
    work: Path,
    *extra: str,
    binary: Path = TRAWL,
    prefix: list[str] | None = None,
) -> dict[str, float]:
    args = [
        *(prefix or []),
        str(binary),
        "--db",
        db,
        "crawl",
        root,
        "--depth",
        str(DEPTH),
        "--concurrency",
        str(CONCURRENCY),
        "--warc",
        str(work / "trawl.warc.gz"),
        "--no-progress",
        *extra,
    ]
    row = measured(args, work / "trawl.log", database=None if db.startswith("sqlite") else db)
    row["pages"], row["status"] = _pages(db, binary)
    return row


def _pages(db: str, binary: Path) -> tuple[int, str]:
    """Pages the last crawl in *db* fetched (done or failed), as `trawl crawl list` says,
    and its status: a crawl whose command exited before it was FINISHED is a bug, not a
    faster row (a remote worker once exited with a host's last pages still queued)."""
    out = subprocess.run(
        [str(binary), "--db", db, "crawl", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    crawl = json.loads(out.stdout)["crawls"][-1]
    pages = crawl["pages"]
    return int(pages["done"] + pages["failed"]), str(crawl["status"])


def wget(root: str, work: Path) -> dict[str, float]:
    args = [
        "wget",
        "-r",
        "-l",
        str(DEPTH),
        "-p",
        "--warc-file",
        str(work / "wget"),
        "--no-warc-keep-log",
        "-e",
        "robots=on",
        "-P",
        str(work / "wget-files"),
        "-nv",
        root,
    ]
    row = measured(args, work / "wget.log")
    text = (work / "wget.log").read_text(errors="replace")
    row["pages"] = len(re.findall(r"^\S+ \S+ URL:", text, re.M))
    return row


def scrapy(root: str, work: Path) -> dict[str, float]:
    python = SCRAPY_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "scrapy"], check=True, capture_output=True
        )
    args = [str(python), str(HERE / "crawl_spider.py"), root, str(DEPTH), str(CONCURRENCY)]
    row = measured(args, work / "scrapy.log")
    stats = json.loads((work / "scrapy.log").read_text().splitlines()[0])
    row["pages"] = stats.get("response_received_count", 0)
    return row


def postgres_url(binary: Path = TRAWL) -> tuple[str, tuple[Any, str]]:
    sys.path.insert(0, str(HERE))
    from harness import postgres

    server = postgres.connect()
    name = server.create("crawl")
    url = server.database_url(name)
    subprocess.run([str(binary), "--db", url, "db", "upgrade"], check=True, capture_output=True)
    return url, (server, name)


# The crawl a remote pipeline works on, made as `trawl crawl` would make it (no CLI starts a
# crawl without also working on it here).
CREATE_CRAWL = """
import sys
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store
url, root, depth, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Store(url) as store:
    operations.register(store, make_app().get(FETCH_TASK).info())
    spec = CrawlSpec(seeds=(root,), depth=depth, concurrency=concurrency,
                     options=Options(warc="trawl.warc.gz"))
    print(operations.create(store, spec))
"""


def remote(db: str, root: str, work: Path, binary: Path = TRAWL) -> dict[str, float]:
    """A remote pipeline's crawl: ``trawl serve`` (the tracker) on *db*, and one
    ``trawl worker --crawl --server`` that fetches, writes the WARC and exits when idle.
    Its CPU per page counts the tracker's CPU too, read from /proc over the crawl."""
    python = binary.parent / "python"
    subprocess.run(
        [str(python), "-c", CREATE_CRAWL, db, root, str(DEPTH), str(CONCURRENCY)],
        check=True,
        capture_output=True,
    )
    made = subprocess.run(
        [
            str(binary),
            "--db",
            db,
            "pipeline",
            "create",
            "bench",
            "--slots",
            str(PIPELINE_SLOTS),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    token = json.loads(made.stdout)["token"]
    port = _free_port()
    with (work / "tracker.log").open("w") as log:
        tracker = subprocess.Popen(
            [str(binary), "--db", db, "serve", "--port", str(port)], stdout=log, stderr=log
        )
    try:
        _wait_healthy(port, tracker)
        before = _cpu_s(tracker.pid)
        args = [
            str(binary),
            "worker",
            "--crawl",
            "--server",
            f"ws://127.0.0.1:{port}",
            "--pipeline",
            "bench",
            "--warc-dir",
            str(work / "warc"),
            "--concurrency",
            str(PIPELINE_SLOTS),
            "--exit-when-idle",
            "--no-progress",
        ]
        env = os.environ | {"TRAWL_PIPELINE_TOKEN": token}
        row = measured(args, work / "trawl.log", env=env, database=db)
        row["tracker_cpu_s"] = _cpu_s(tracker.pid) - before
        row["cpu_s"] += row["tracker_cpu_s"]
    finally:
        tracker.terminate()
        tracker.wait()
    row["pages"], row["status"] = _pages(db, binary)
    return row


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(port: int, tracker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and tracker.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the tracker did not listen on port {port}: see its log")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def counted(
    size: int, systems: list[str], work: Path, before: Path | None, round_: int = 0
) -> list[dict[str, object]]:
    """Each system's crawl of the *size*-page site under callgrind: its instructions, in
    all and by shared object (crawl_instructions)."""
    rows: list[dict[str, Any]] = []
    for system in systems:
        name, binary = _which(system, before)
        server, origin = serve(size)
        place = work / f"{system}-{size}-{round_}-instructions"
        place.mkdir(parents=True)
        out = place / "callgrind.out"
        extra = ("--no-warc-sync",) if name == "trawl-sqlite-nosync" else ()
        db = f"sqlite:///{place / 'crawl.db'}"
        try:
            row = trawl(
                db,
                origin["main"] + "/",
                place,
                *extra,
                binary=binary,
                prefix=crawl_instructions.command(out),
            )
        finally:
            server.terminate()
            server.wait()
        if not out.exists():  # valgrind itself failed: a row of nothing would skew the slope
            raise SystemExit(f"{system}: callgrind wrote no counts ({place / 'trawl.log'})")
        objects = crawl_instructions.by_object(out)
        row |= {"instructions": sum(objects.values()), "objects": objects}
        rows.append({"system": system, "site_pages": size, "round": round_, **row})
        print(
            f"{system:<17} site {size:>6}  round {round_}  fetched {row['pages']:>6}"
            f"  {row['instructions']:>16,} instructions  {row['wall_s']:7.1f}s  exit {row['code']}",
            flush=True,
        )
        if _unfinished(rows[-1]):
            print(f"{system}: its crawl did not finish under callgrind", file=sys.stderr)
    return rows


def run(
    size: int, systems: list[str], work: Path, before: Path | None, round_: int = 0
) -> list[dict[str, object]]:
    rows: list[dict[str, Any]] = []
    for system in systems:
        name, binary = _which(system, before)
        server, origin = serve(size)
        root = origin["main"] + "/"
        place = work / f"{system}-{size}-{round_}-{len(rows)}"  # a system may run more than once
        place.mkdir(parents=True)
        cleanup: tuple[Any, str] | None = None
        try:
            if name == "trawl-sqlite":
                row = trawl(f"sqlite:///{place / 'crawl.db'}", root, place, binary=binary)
            elif name == "trawl-browser":  # every page in Chromium, beside plain fetching
                row = trawl(f"sqlite:///{place / 'crawl.db'}", root, place, "--browser")
            elif name == "trawl-sqlite-x2":  # two processes taking turns at SQLite's writer
                db = f"sqlite:///{place / 'crawl.db'}"
                row = trawl(db, root, place, "--processes", "2", binary=binary)
            elif name == "trawl-sqlite-nosync":  # the cost of durable WARC, same run
                row = trawl(f"sqlite:///{place / 'crawl.db'}", root, place, "--no-warc-sync")
            elif name == "trawl-postgresql":
                url, cleanup = postgres_url(binary)
                row = trawl(url, root, place, binary=binary)
            elif name == "trawl-postgresql-x2":  # two processes on one frontier
                url, cleanup = postgres_url(binary)
                row = trawl(url, root, place, "--processes", "2", binary=binary)
            elif name == "trawl-remote":  # a remote pipeline, through the tracker
                url, cleanup = postgres_url(binary)
                row = remote(url, root, place, binary=binary)
            elif name == "wget":
                row = wget(root, place)
            else:
                row = scrapy(root, place)
        finally:
            server.terminate()
            server.wait()
            if cleanup is not None:
                pg, db = cleanup
                pg.drop(db)
        rows.append(_rated({"system": system, "site_pages": size, "round": round_, **row}))
        print(_line(rows[-1]), flush=True)
        if _unfinished(rows[-1]):
            print(
                f"{system}: its crawl is {rows[-1]['status']}, not FINISHED, after the command"
                " exited: the row is not comparable",
                file=sys.stderr,
            )
    return rows


def _unfinished(row: dict[str, Any]) -> bool:
    """A trawl row whose crawl was not FINISHED when its command exited (other systems
    record no status)."""
    return row.get("status", "FINISHED") != "FINISHED"


# The rows a --before checkout can run (the others run options it may not have had).
BEFORE = (
    "trawl-sqlite",
    "trawl-sqlite-x2",
    "trawl-postgresql",
    "trawl-postgresql-x2",
    "trawl-remote",
)


def _which(system: str, before: Path | None) -> tuple[str, Path]:
    """The row's system and the trawl that runs it: ``NAME@before`` is NAME run by the
    trawl of the checkout given with --before."""
    name, _, tail = system.partition("@")
    if not tail:
        return name, TRAWL
    if tail != "before" or name not in BEFORE:
        raise SystemExit(f"{system}: only {', '.join(BEFORE)} run @before")
    if before is None:
        raise SystemExit(f"{system}: give --before DIR (a checkout with its .venv)")
    return name, before / ".venv" / "bin" / "trawl"


def _rated(row: dict[str, Any]) -> dict[str, Any]:
    row["pages_per_s"] = row["pages"] / row["wall_s"] if row["wall_s"] else 0.0
    # CPU time per page is what another machine's load does not change much.
    row["cpu_ms_per_page"] = 1000 * row["cpu_s"] / row["pages"] if row["pages"] else 0.0
    if "db_cpu_s" in row:  # PostgreSQL's share, which a SQLite crawler's own CPU includes
        row["db_cpu_ms_per_page"] = 1000 * row["db_cpu_s"] / row["pages"] if row["pages"] else 0.0
    return row


def _line(row: dict[str, object]) -> str:
    return (
        f"{row['system']:<17} site {row['site_pages']:>6}  round {row['round']}  "
        f"fetched {row['pages']:>6}  "
        f"{row['wall_s']:7.1f}s  {row['pages_per_s']:7.1f} pages/s  "
        f"{row['cpu_ms_per_page']:5.2f} CPU ms/page{_db_part(row)}  "
        f"peak RSS {row['rss_mib']:6.0f} MiB  tree {row['tree_mib']:6.0f} MiB  exit {row['code']}"
    )


def _db_part(row: dict[str, object]) -> str:
    share = row.get("db_cpu_ms_per_page")
    return f" + {share:5.2f} in PostgreSQL" if isinstance(share, float) else ""


def _check_instructions(systems: list[str], sizes: list[int]) -> None:
    """--instructions counts one process's work: trawl on SQLite, at two sizes or more."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install -y valgrind)")
    others = [s for s in systems if s.partition("@")[0] not in crawl_instructions.SYSTEMS]
    if others:
        raise SystemExit(
            f"--instructions counts {', '.join(crawl_instructions.SYSTEMS)} (and @before) only,"
            f" whose database work is in the crawler's process: not {', '.join(others)}"
        )
    if len(set(sizes)) < 2:
        raise SystemExit("--instructions needs two site sizes at least (--sizes 500,2000)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give at least 1")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the 2,000-page site only")
    parser.add_argument("--sizes", default=None, help="comma-separated site sizes")
    parser.add_argument(
        "--only",
        default="trawl-sqlite,trawl-sqlite-x2,trawl-sqlite-nosync,trawl-postgresql,"
        "trawl-postgresql-x2,trawl-remote,wget,scrapy",
    )  # trawl-browser too: `--only trawl-sqlite,trawl-browser --sizes 500`
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout (with its .venv) whose trawl runs the rows named NAME@before"
        f" ({', '.join(BEFORE)}), for a before/after table in one run",
    )
    parser.add_argument(
        "--rounds",
        type=_positive,
        default=1,
        help="run every system this many times, the order reversed every other round;"
        " ratios are the median of the rounds' ratios",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each crawl's instructions under valgrind's callgrind instead of timing"
        f" it ({', '.join(crawl_instructions.SYSTEMS)} and their @before; sizes default to"
        f" {crawl_instructions.DEFAULT_SIZES}): a page's cost is the slope between two sizes",
    )
    args = parser.parse_args()
    if args.instructions:
        args.sizes = args.sizes or crawl_instructions.DEFAULT_SIZES
        if args.only == parser.get_default("only"):
            args.only = "trawl-sqlite"
    sizes = [
        int(s) for s in (args.sizes or ("2000" if args.quick else "2000,20000,200000")).split(",")
    ]
    systems = args.only.split(",")
    if args.instructions:
        _check_instructions(systems, sizes)
    if "wget" in systems and shutil.which("wget") is None:
        print("wget is missing (Debian: apt-get install -y wget): skipping it", file=sys.stderr)
        systems.remove("wget")
    from harness.environment import compile_trawl

    for checkout in (ROOT, args.before):
        if checkout is not None:
            compile_trawl(checkout)
    work = Path(tempfile.mkdtemp(prefix="trawl-crawl-bench-"))
    load = os.getloadavg()  # at the start: what else the machine was doing
    rows = []
    measure = counted if args.instructions else run
    try:
        for size in sizes:
            for n in range(args.rounds):
                order = systems if n % 2 == 0 else systems[::-1]
                rows += measure(size, order, work, args.before, n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.instructions:
        summary = crawl_instructions.summarize(rows)
        print("\n".join(crawl_instructions.lines(summary)), flush=True)
    else:
        summary = crawl_summary.summarize(rows)
        print("\n".join(crawl_summary.lines(summary)), flush=True)
    meta = {
        "cpus": os.cpu_count(),
        "depth": DEPTH,
        "concurrency": CONCURRENCY,
        "rounds": args.rounds,
        "instructions": args.instructions,
        "load_average_at_start": load,
        "at": time.time(),
    }
    (HERE / "results").mkdir(exist_ok=True)
    latest = "crawl-instructions-latest.json" if args.instructions else "crawl-latest.json"
    (HERE / "results" / latest).write_text(
        json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1)
    )
    unfinished = [r["system"] for r in rows if _unfinished(r)]
    if unfinished:
        print(f"crawls not finished: {', '.join(map(str, unfinished))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
