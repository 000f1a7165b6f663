"""`--metrics-port`: a worker, and an orchestrator with its actor processes, serve their
claims, commits and attempt durations in Prometheus text format."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.acceptance.test_cli import Trawl
from tests.support.procs import Procs, running, wait_for

APP = """
import trawl

app = trawl.App()


@app.task(tags=["page"])
def fetch(ctx: trawl.Context) -> dict:
    if ctx.data.get("bad"):
        raise ValueError("bad page")
    return {"ok": True}
"""


@pytest.fixture
def cli(tmp_path: Path) -> Trawl:
    return Trawl(tmp_path, f"sqlite:///{tmp_path / 'trawl.db'}")


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.TransportError:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _seed(cli: Trawl) -> str:
    spec = cli.write_app(source=textwrap.dedent(APP))
    lines = [f'{{"id": "p:{n}", "tags": ["page"]}}' for n in range(5)]
    lines.append('{"id": "p:bad", "tags": ["page"], "data": {"bad": true}}')
    cli("add", "--file", "-", stdin="\n".join(lines) + "\n")
    return spec


@pytest.mark.parametrize("command", ["worker", "run"])
def test_a_process_serves_its_metrics(cli: Trawl, procs: Procs, command: str) -> None:
    spec = _seed(cli)
    port = _free_port()
    procs.trawl(
        "--db", cli.db, command, str(cli.cwd / spec), "--no-progress",
        "--metrics-port", str(port),
    )  # fmt: skip
    done = ("trawl_jobs_committed_total", (("outcome", "done"), ("task", "fetch")))
    got = wait_for(lambda: (s := _samples(port)).get(done) == 5 and s, "5 done attempts")
    assert got[("trawl_jobs_claimed_total", (("task", "fetch"),))] >= 6
    assert got[("trawl_jobs_committed_total", (("outcome", "failed"), ("task", "fetch")))] >= 1
    assert got[("trawl_attempt_seconds_count", (("task", "fetch"),))] >= 6
    # labels stay bounded: no item ids
    assert not any("p:" in value for _, labels in got for _, value in labels)


def test_a_bad_metrics_port_is_a_usage_error(cli: Trawl) -> None:
    spec = _seed(cli)
    bad = cli("worker", spec, "--metrics-port", "http://x", code=2)
    assert "is not PORT or HOST:PORT" in bad.err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        error = cli.fails("worker", spec, "--exit-when-idle", "--metrics-port", str(port))
    assert f"--metrics-port 127.0.0.1:{port}" in error
