"""The real ``trawl`` executable, run as a user would, against a temporary database."""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import pg

TRAWL = Path(sys.executable).with_name("trawl")
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"

APP = """
import trawl

app = trawl.App()


@app.task(tags=["product"], version="2")
async def price(ctx: trawl.Context) -> dict:
    return {"price": len(ctx.id), "title": ctx.data.get("title")}


@app.task(tags=["broken"], retries=0)
def boom(ctx: trawl.Context) -> None:
    raise ValueError(f"cannot parse {ctx.id}")
"""


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRAWL_DB"}
    env["COLUMNS"] = "200"  # wide tables, so long ids are not folded
    return env


class Trawl:
    """Runs ``trawl --db URL ...`` in a working directory and checks its exit code."""

    def __init__(self, cwd: Path, db: str) -> None:
        self.cwd = cwd
        self.db = db

    def __call__(self, *args: str, code: int = 0, stdin: str | None = None) -> Run:
        return self.run(["--db", self.db, *args], code=code, stdin=stdin)

    def run(self, argv: list[str], *, code: int = 0, stdin: str | None = None) -> Run:
        proc = subprocess.run(
            [str(TRAWL), *argv],
            cwd=self.cwd,
            env=environment(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        result = Run(proc.returncode, proc.stdout, proc.stderr)
        assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}: {result}"
        return result

    def fails(self, *args: str, code: int = 1, stdin: str | None = None) -> str:
        """Run a command that must fail; returns its one-line error message."""
        result = self(*args, code=code, stdin=stdin)
        assert "Traceback" not in result.err, result.err
        lines = result.err.strip().splitlines()
        assert len(lines) == 1, f"expected one error line, got: {result.err}"
        assert lines[0].startswith("error: "), lines[0]
        return lines[0]

    def write_app(self, name: str = "app.py", source: str = APP) -> str:
        (self.cwd / name).write_text(textwrap.dedent(source))
        return f"{name}:app"

    def work(self, spec: str = "app.py:app", *extra: str) -> Run:
        return self("worker", spec, "--exit-when-idle", "--no-progress", *extra)

    def status(self) -> dict[str, dict[str, Any]]:
        return {row["task"]: row for row in self("status", "--json").json()["tasks"]}

    def show(self, item: str) -> dict[str, Any]:
        value: dict[str, Any] = self("show", item, "--json").json()
        return value


@pytest.fixture
def trawl(request: pytest.FixtureRequest, tmp_path: Path) -> Trawl:
    """On SQLite; on PostgreSQL too where a test is marked ``BOTH``."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return Trawl(tmp_path, f"sqlite:///{tmp_path / 'trawl.db'}")
    return Trawl(tmp_path, request.getfixturevalue("pg_url"))


BOTH = pytest.mark.parametrize(
    "trawl", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


def write_lines(path: Path, *lines: str) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


# -- the executable --------------------------------------------------------------------------


def test_help_lists_every_command(trawl: Trawl) -> None:
    out = trawl.run(["--help"]).out
    for command in ("add", "show", "status", "failures", "expire", "journal", "worker", "db"):
        assert f"  {command} " in out


def test_python_dash_m_runs_the_same_cli(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trawl", "--version"],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("trawl, version ")


def test_trawl_db_environment_variable_selects_the_database(tmp_path: Path) -> None:
    env = environment() | {"TRAWL_DB": f"sqlite:///{tmp_path / 'from-env.db'}"}
    subprocess.run([str(TRAWL), "add", "sku:1"], cwd=tmp_path, env=env, check=True, timeout=60)
    assert (tmp_path / "from-env.db").exists()
    assert not (tmp_path / "trawl.db").exists()


# -- db --------------------------------------------------------------------------------------


def test_db_upgrade_and_current(trawl: Trawl) -> None:
    before = trawl("db", "current", "--json").json()
    assert before["current"] is None
    assert before["up_to_date"] is False
    first = trawl("db", "upgrade").out
    assert f"from schema (empty) to {before['head']}" in first
    assert "already at schema" in trawl("db", "upgrade").out
    after = trawl("db", "current", "--json").json()
    assert after == before | {"current": before["head"], "up_to_date": True}


@pytest.mark.postgres
def test_postgres_needs_db_upgrade_then_works(trawl: Trawl, pg_admin_url: str) -> None:
    name = f"trawl_cli_{os.getpid()}"
    trawl.db = pg.create_database(pg_admin_url, name)
    try:
        assert "run `trawl db upgrade`" in trawl.fails("status")
        trawl("db", "upgrade")
        trawl("add", "sku:1", "--tag", "product")
        trawl.write_app()
        trawl.work()
        assert trawl.status()["price"]["counts"]["done"] == 1
        assert trawl.show("sku:1")["jobs"][0]["result"] == {"price": 5, "title": None}
    finally:
        pg.drop_database(pg_admin_url, name)


# -- add ---------------------------------------------------------------------------------------


def test_add_one_item_with_tags_and_data(trawl: Trawl) -> None:
    out = trawl("add", "sku:1", "-t", "product", "--tag", "lang=en", "-d", '{"title": "A"}').out
    assert "created 1 item" in out
    item = trawl.show("sku:1")
    assert item["id"] == "sku:1"
    assert item["data"] == {"title": "A"}
    assert item["tags"] == {"product": None, "lang": "en"}
    assert item["aliases"] == ["sku:1"]
    assert item["created_at"].endswith("Z")
    assert isinstance(item["created_at_epoch"], float)


def test_add_existing_id_leaves_it_unchanged(trawl: Trawl) -> None:
    trawl("add", "sku:1", "-d", '{"v": 1}')
    assert "already exists" in trawl("add", "sku:1", "-d", '{"v": 2}').out
    assert trawl.show("sku:1")["data"] == {"v": 1}
    assert trawl("add", "sku:1", "--json").json() == {"created": 0, "existing": 1, "bad_lines": 0}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("", "empty"),
        ("x" * 2049, "maximum is 2048"),
        ("sku:\x01", "control character"),
    ],
    ids=["empty", "too-long", "control-character"],
)
def test_add_rejects_bad_ids(trawl: Trawl, item: str, reason: str) -> None:
    assert reason in trawl.fails("add", item)


@pytest.mark.parametrize(
    ("data", "reason"),
    [("[1, 2]", "must be a JSON object, got list"), ("{oops", "not valid JSON")],
    ids=["array", "not-json"],
)
def test_add_rejects_data_that_is_not_a_json_object(trawl: Trawl, data: str, reason: str) -> None:
    message = trawl.fails("add", "sku:1", "--data", data)
    assert "--data" in message
    assert reason in message
    trawl.fails("show", "sku:1")


@BOTH
def test_add_file_accepts_every_tag_form(trawl: Trawl, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "items.jsonl",
        '{"id": "a", "tags": ["product", "sale"], "data": {"n": 1}}',
        "",
        '{"id": "b", "tags": [["lang", "en"], ["product", null]]}',
        '{"id": "c", "tags": {"lang": "fr", "product": null}, "niceness": 5}',
        '{"id": "a", "data": {"n": 2}}',
    )
    added = trawl("add", "--file", path, "--tag", "batch=1", "--json").json()
    assert added == {"created": 3, "existing": 1, "bad_lines": 0}
    assert trawl.show("a")["tags"] == {"product": None, "sale": None, "batch": "1"}
    assert trawl.show("a")["data"] == {"n": 1}  # the first line with an id wins
    assert trawl.show("b")["tags"] == {"lang": "en", "product": None, "batch": "1"}
    assert trawl.show("c")["tags"] == {"lang": "fr", "product": None, "batch": "1"}


BAD_FILE = (
    '{"id": "good:1", "tags": ["product"]}',
    "{not json",
    "[1, 2]",
    '{"tags": ["product"]}',
    '{"id": ""}',
    '{"id": "x", "data": [1]}',
    '{"id": "y", "tags": "product"}',
    '{"id": "z", "tags": {"lang": 5}}',
    '{"id": "good:2", "data": {"k": "v"}}',
    '{"id": "w", "tag": ["product"]}',
)
BAD_REASONS = {
    2: "not valid JSON",
    3: "expected a JSON object",
    4: 'missing "id"',
    5: "item id is empty",
    6: '"data" must be a JSON object',
    7: '"tags" must be a list or an object',
    8: "tag value must be a string or null",
    10: "unknown key 'tag'",
}


@BOTH
def test_add_file_reports_every_bad_line_and_writes_nothing(trawl: Trawl, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "items.jsonl", *BAD_FILE)
    result = trawl("add", "--file", path, code=1)
    lines = result.err.strip().splitlines()
    assert len(lines) == len(BAD_REASONS) + 1
    for line, (number, reason) in zip(lines, BAD_REASONS.items(), strict=False):
        assert line.startswith(f"line {number}: ")
        assert reason in line
    assert lines[-1].startswith("error: ")
    assert "8 bad lines; nothing was added" in lines[-1]
    trawl.fails("show", "good:1")
    assert trawl("journal", "--json").json_lines() == []


@BOTH
def test_add_file_skip_bad_adds_the_good_lines(trawl: Trawl, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "items.jsonl", *BAD_FILE)
    result = trawl("add", "--file", path, "--skip-bad")
    assert "line 2: not valid JSON" in result.err
    assert "created 2 items" in result.out
    assert "skipped 8 bad lines" in result.out
    assert trawl.show("good:1")["tags"] == {"product": None}
    assert trawl.show("good:2")["data"] == {"k": "v"}


def test_add_file_reports_undecodable_bytes_by_line(trawl: Trawl, tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "\xff"}\n')
    result = trawl("add", "--file", str(path), code=1)
    assert result.err.startswith("line 2: not valid JSON")


@BOTH
def test_add_file_from_stdin_in_batches(trawl: Trawl) -> None:
    lines = "".join(json.dumps({"id": f"n:{i}", "tags": ["product"]}) + "\n" for i in range(23))
    added = trawl("add", "--file", "-", "--batch-size", "5", "--json", stdin=lines).json()
    assert added == {"created": 23, "existing": 0, "bad_lines": 0}
    assert trawl.show("n:22")["tags"] == {"product": None}


@BOTH
def test_add_file_bad_stdin_line_is_reported(trawl: Trawl) -> None:
    result = trawl("add", "--file", "-", code=1, stdin='{"id": "a"}\n42\n')
    assert result.err.startswith("line 2: expected a JSON object")
    assert "stdin has 1 bad line" in result.err


@BOTH
def test_add_file_with_several_writers(trawl: Trawl, tmp_path: Path) -> None:
    """PostgreSQL spreads a file over --writers connections; SQLite has one writer."""
    lines = [json.dumps({"id": f"w:{i % 40}", "data": {"n": i}}) for i in range(120)]
    path = write_lines(tmp_path / "items.jsonl", *lines)
    argv = ["add", "--file", path, "--writers", "3", "--batch-size", "7", "--json"]
    if trawl.db.startswith("sqlite"):
        message = trawl.fails(*argv, code=1)
        assert "3 writers asked, but SQLite has one writer" in message
        trawl("show", "w:0", code=1)  # nothing written
        return
    assert trawl(*argv).json() == {"created": 40, "existing": 80, "bad_lines": 0}
    assert [trawl.show(f"w:{i}")["data"] for i in (0, 39)] == [{"n": 0}, {"n": 39}]


@BOTH
def test_a_small_file_is_written_by_one_connection_in_file_order(
    trawl: Trawl, tmp_path: Path
) -> None:
    """Up to 256 KiB a file gets one writer unless --writers says otherwise, so the journal
    lists its items in the file's order; on PostgreSQL a bigger file gets two writers, whose
    shares interleave."""
    ids = [f"o:{(i * 7919) % 101:03d}" for i in range(40)]  # not in id order
    path = write_lines(tmp_path / "items.jsonl", *(json.dumps({"id": i}) for i in ids))
    trawl("add", "--file", path, "--json")
    created = [e["item_id"] for e in trawl("journal", "--json").json_lines()]
    assert created == ids
    if trawl.db.startswith("sqlite"):
        return
    again = [f"t:{i}" for i in ids]
    pad = "x" * 7000  # 40 lines of 7 KB: over 256 KiB
    lines = (json.dumps({"id": i, "data": {"pad": pad}}) for i in again)
    trawl("add", "--file", write_lines(tmp_path / "big.jsonl", *lines), "--json")
    entries = trawl("journal", "--json").json_lines()[len(ids) :]
    created = [e["item_id"] for e in entries]
    assert sorted(created) == sorted(again)
    assert created != again


def _add_on_a_terminal(trawl: Trawl, path: str, *flags: str, stdin: str | None = None) -> str:
    """``trawl add --file`` with stdout and stderr on a pseudo-terminal (and stdin from the
    file *stdin*, if given); what it showed."""
    controller, terminal = pty.openpty()
    argv = [str(TRAWL), "--db", trawl.db, "add", "--file", path, *flags]
    with open(stdin or os.devnull, "rb") as source:
        proc = subprocess.Popen(
            argv,
            cwd=trawl.cwd,
            env=environment() | {"TERM": "xterm"},
            stdin=source,
            stdout=terminal,
            stderr=terminal,
        )
    os.close(terminal)
    screen = _read_until_closed(controller)
    assert proc.wait(timeout=60) == 0, screen
    assert "Traceback" not in screen
    return screen


def _many_lines(tmp_path: Path, count: int) -> str:
    lines = (json.dumps({"id": f"n:{i}", "tags": ["product"]}) for i in range(count))
    return write_lines(tmp_path / "items.jsonl", *lines)


@BOTH
def test_add_file_shows_its_progress_on_a_terminal(trawl: Trawl, tmp_path: Path) -> None:
    screen = _add_on_a_terminal(trawl, _many_lines(tmp_path, 3000))
    assert "checking" in screen
    assert "adding" in screen
    assert "3,000 lines" in screen
    assert "created 3,000 items" in screen


def test_add_file_from_stdin_shows_its_progress_on_a_terminal(trawl: Trawl, tmp_path: Path) -> None:
    screen = _add_on_a_terminal(
        trawl, "-", "--batch-size", "1000", stdin=_many_lines(tmp_path, 3000)
    )
    assert "checking" in screen  # of a size not known until the end
    assert "adding" in screen
    assert "created 3,000 items" in screen
    assert trawl.show("n:2999")["tags"] == {"product": None}


@pytest.mark.parametrize("flag", ["--json", "--no-progress"])
def test_add_file_shows_no_progress_with_json_or_no_progress(
    trawl: Trawl, tmp_path: Path, flag: str
) -> None:
    screen = _add_on_a_terminal(trawl, _many_lines(tmp_path, 300), flag)
    assert "checking" not in screen
    assert "adding" not in screen
    assert trawl.show("n:299")["tags"] == {"product": None}


def test_add_file_shows_no_progress_when_not_on_a_terminal(trawl: Trawl, tmp_path: Path) -> None:
    result = trawl("add", "--file", _many_lines(tmp_path, 300))
    assert result.err == ""
    assert result.out == "created 300 items\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["add"],
        ["add", "x", "--file", "-"],
        ["add", "x", "--bogus"],
        ["add", "x", "--niceness", "low"],
        ["add", "--file", "does-not-exist.jsonl"],
        ["add", "--file", "-", "--writers", "0"],
        ["expire", "--task", "price", "--tag", "a", "--id", "b"],
        ["failures", "handle"],
        ["failures", "handle", "--all", "--task", "price"],
        ["failures", "--task", "price", "retry"],
        ["journal", "--since", "-1"],
        ["worker", "app.py:app", "--concurrency", "0"],
        ["worker", "app.py:app", "--connections", "0"],
        ["nosuchcommand"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_usage_errors_exit_2_with_one_line(trawl: Trawl, argv: list[str]) -> None:
    message = trawl.fails(*argv, code=2)
    assert "--help" in message


# -- reading -----------------------------------------------------------------------------------


def test_show_unknown_id_fails(trawl: Trawl) -> None:
    assert "no item has the id or alias 'nope'" in trawl.fails("show", "nope")


def test_show_text_lists_tags_data_and_jobs(trawl: Trawl) -> None:
    trawl.write_app()
    trawl("add", "sku:12", "--tag", "product", "--data", '{"title": "T"}')
    trawl.work()
    out = trawl("show", "sku:12").out
    assert "product" in out
    assert '{"title": "T"}' in out
    assert "price" in out
    assert "done" in out
    assert 'result of price: {"price": 6, "title": "T"}' in out


def test_unreachable_database_gives_a_clear_error(trawl: Trawl) -> None:
    for argv in (["status"], ["add", "sku:1"], ["journal"], ["db", "upgrade"]):
        message = trawl.run(["--db", UNREACHABLE, *argv], code=1).err.strip()
        assert message.startswith("error: cannot reach the database at postgresql://")
        assert "Traceback" not in message
        assert len(message.splitlines()) == 1


def test_unknown_task_is_named(trawl: Trawl) -> None:
    trawl.write_app()
    trawl.work()  # registers price and boom
    for argv in (["expire", "--task", "nope"], ["failures", "--task", "nope"]):
        message = trawl.fails(*argv)
        assert "unknown task 'nope'" in message
        assert "boom, price" in message
    assert "unknown task 'nope'" in trawl.fails("failures", "retry", "--task", "nope")


def test_journal_reads_from_a_cursor(trawl: Trawl) -> None:
    for n in range(3):
        trawl("add", f"sku:{n}")
    entries = trawl("journal", "--json").json_lines()
    assert [e["item_id"] for e in entries] == ["sku:0", "sku:1", "sku:2"]
    assert {e["kind"] for e in entries} == {"item.created"}
    since = entries[0]["seq"]
    later = trawl("journal", "--json", "--since", str(since), "--limit", "1").json_lines()
    assert [e["seq"] for e in later] == [entries[1]["seq"]]
    limited = trawl("journal", "--limit", "1")
    assert f"--since {entries[0]['seq']}" in limited.err
    assert "item.created" in trawl("journal").out


# A command run from a terminal gets Ctrl-C; one started in the background by a shell with
# no job control inherits SIGINT ignored, and so does everything it runs (pytest, and the
# command under test with it). Python keeps an ignored SIGINT ignored: start the command
# with SIGINT as a terminal would hand it over (exec keeps a default disposition).
_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def test_journal_follow_prints_new_entries_and_stops_on_ctrl_c(trawl: Trawl) -> None:
    trawl("add", "sku:old")
    argv = [str(TRAWL), "--db", trawl.db, "journal", "--follow", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _AS_FROM_A_TERMINAL, *argv],
        cwd=trawl.cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = _reader(proc)
    try:
        assert json.loads(lines.get(timeout=30))["item_id"] == "sku:old"
        trawl("add", "sku:new")
        assert json.loads(lines.get(timeout=30))["item_id"] == "sku:new"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _reader(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_journal_follow_with_limit_stops_after_that_many(trawl: Trawl) -> None:
    for n in range(3):
        trawl("add", f"sku:{n}")
    out = trawl("journal", "--follow", "--limit", "2", "--json").json_lines()
    assert [e["item_id"] for e in out] == ["sku:0", "sku:1"]


# -- worker ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "source", "reason"),
    [
        ("missing.py:app", None, "app file 'missing.py' does not exist"),
        ("no_such_module_xyz:app", None, "cannot import module 'no_such_module_xyz'"),
        ("app.py:nothing", APP, "'nothing' in app.py is nothing, not a trawl.App"),
        ("app.py:app", "def broken(:\n", "importing 'app.py' failed: SyntaxError"),
        ("app.py:app", "import trawl\napp = trawl.App()\n", "the app declares no tasks"),
    ],
    ids=["missing-file", "missing-module", "not-an-app", "syntax-error", "no-tasks"],
)
def test_worker_reports_an_app_that_cannot_load(
    trawl: Trawl, spec: str, source: str | None, reason: str
) -> None:
    if source is not None:
        trawl.write_app(source=source)
    assert reason in trawl.fails("worker", spec, "--exit-when-idle")


def test_worker_rejects_unknown_task_names(trawl: Trawl) -> None:
    trawl.write_app()
    assert "unknown task 'nope'" in trawl.fails("worker", "app.py:app", "--tasks", "price,nope")


def test_worker_on_unreachable_database_fails_at_start(trawl: Trawl) -> None:
    spec = trawl.write_app()
    result = trawl.run(["--db", UNREACHABLE, "worker", spec, "--exit-when-idle"], code=1)
    assert "error: cannot reach the database" in result.err
    assert "Traceback" not in result.err


def test_worker_runs_only_the_tasks_asked_for(trawl: Trawl) -> None:
    trawl.write_app()
    trawl("add", "sku:1", "--tag", "product", "--tag", "broken")
    trawl.work("app.py:app", "--tasks", "price")
    status = trawl.status()
    assert status["price"]["counts"]["done"] == 1
    assert "boom" not in status


STUBBORN_APP = """
import asyncio
import trawl

app = trawl.App()

@app.task(tags=["product"], timeout="0.5s", retries=0)
async def stubborn(ctx: trawl.Context) -> None:
    while True:  # catches its cancellation and goes on
        try:
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            pass
"""


def test_worker_exits_when_idle_past_a_task_that_swallows_its_cancellation(
    trawl: Trawl,
) -> None:
    trawl.write_app(source=STUBBORN_APP)
    trawl("add", "sku:1", "--tag", "product")
    started = time.monotonic()
    result = trawl.work()  # it used to wait for the task for ever at exit
    assert time.monotonic() - started < 60
    assert "abandoned" in result.err
    assert "left behind at exit: stubborn on sku:1 (attempt 1)" in result.err
    assert "Task was destroyed" not in result.err
    assert trawl.status()["stubborn"]["counts"]["failed"] == 1


def test_worker_with_two_connections_does_every_job(trawl: Trawl) -> None:
    trawl.write_app()
    items = trawl.cwd / "items.jsonl"
    items.write_text("".join(f'{{"id": "sku:{n}", "tags": ["product"]}}\n' for n in range(30)))
    trawl("add", "--file", str(items))
    run = trawl.work("app.py:app", "--tasks", "price", "--connections", "2")
    assert "concurrency 16, 2 connection(s)" in run.err
    assert trawl.status()["price"]["counts"]["done"] == 30


def test_end_to_end_items_worker_status_show_journal(trawl: Trawl) -> None:
    trawl("add", "sku:1", "--tag", "product", "--data", '{"title": "One"}')
    trawl("add", "sku:22", "--tag", "product")
    trawl("add", "bad:1", "--tag", "broken")
    trawl.write_app()
    before = trawl.status()
    assert before == {}  # no task is registered before a worker starts

    result = trawl.work()
    assert "stopped" in result.err

    status = trawl.status()
    assert status["price"] == {
        "task": "price",
        "version": "2",
        "registered": True,
        "counts": {"queued": 0, "running": 0, "done": 2, "failed": 0, "skipped": 0},
        "due_now": 0,
        "unhandled_failures": 0,
        "paused": None,
        "orphaned": False,
    }
    assert status["boom"]["counts"]["failed"] == 1
    assert status["boom"]["unhandled_failures"] == 1

    job = trawl.show("sku:1")["jobs"][0]
    assert job["task"] == "price"
    assert job["status"] == "done"
    assert job["result"] == {"price": 5, "title": "One"}
    assert job["result_version"] == "2"
    assert job["result_at"].endswith("Z")
    assert job["due_at"] is None

    kinds = [e["kind"] for e in trawl("journal", "--json").json_lines()]
    assert kinds.count("job.done") == 2
    assert kinds.count("job.failed") == 1
    table = trawl("status").out
    assert "price" in table
    assert "boom" in table


def test_failures_list_retry_and_handle(trawl: Trawl) -> None:
    trawl.write_app()
    trawl("add", "bad:1", "--tag", "broken")
    trawl("add", "bad:2", "--tag", "broken")
    trawl("add", "sku:1", "--tag", "product")
    trawl.work()

    listed = trawl("failures", "--json").json()["failures"]
    assert sorted(f["item_id"] for f in listed) == ["bad:1", "bad:2"]
    first = listed[0]
    assert first["task"] == "boom"
    assert first["error_type"] == "ValueError"
    assert first["message"].startswith("cannot parse bad:")
    assert "raise ValueError" in first["traceback"]
    assert first["handled"] is False
    assert first["occurred_at"].endswith("Z")
    only = trawl("failures", "--id", "bad:1", "--json").json()["failures"]
    assert [f["item_id"] for f in only] == ["bad:1"]
    assert "cannot parse bad:1" in trawl("failures").out
    assert "raise ValueError" in trawl("failures", "--traceback").out
    assert "no item has the id or alias" in trawl.fails("failures", "--id", "nope:1")

    assert "1 failed job due again now" in trawl("failures", "retry", "--id", "bad:1").out
    status = trawl.status()["boom"]
    assert (status["due_now"], status["unhandled_failures"]) == (1, 1)

    trawl.work()  # bad:1 fails again
    assert len(trawl("failures", "--task", "boom", "--json").json()["failures"]) == 2

    assert "2 failures marked handled" in trawl("failures", "handle", "--task", "boom").out
    assert trawl("failures", "--json").json() == {"failures": []}
    assert len(trawl("failures", "--all", "--json").json()["failures"]) == 3
    assert trawl.status()["boom"]["unhandled_failures"] == 0


def test_failures_retry_and_handle_by_failure_id(trawl: Trawl) -> None:
    trawl.write_app()
    trawl("add", "bad:1", "--tag", "broken")
    trawl("add", "bad:2", "--tag", "broken")
    trawl.work()
    ids = {f["item_id"]: f["id"] for f in trawl("failures", "--json").json()["failures"]}
    trawl("failures", "handle", str(ids["bad:2"]))
    left = trawl("failures", "--json").json()["failures"]
    assert [f["item_id"] for f in left] == ["bad:1"]
    assert "1 failed job" in trawl("failures", "retry", str(ids["bad:1"])).out
    assert trawl.status()["boom"]["due_now"] == 1
    assert "0 failures" in trawl("failures", "handle", "--all").out


def test_expire_requeues_results(trawl: Trawl) -> None:
    trawl.write_app()
    trawl("add", "sku:1", "--tag", "product", "--tag", "sale")
    trawl("add", "sku:2", "--tag", "product")
    trawl("add", "sku:3", "--tag", "product")
    trawl.work()
    assert trawl.status()["price"]["due_now"] == 0

    assert "1 job of task price" in trawl("expire", "--task", "price", "--id", "sku:2").out
    assert trawl.status()["price"]["due_now"] == 1
    assert "1 job of task price" in trawl("expire", "--task", "price", "--tag", "sale").out
    assert trawl.status()["price"]["due_now"] == 2
    assert "3 jobs of task price" in trawl("expire", "--task", "price").out
    assert trawl.status()["price"]["due_now"] == 3
    assert "no item has the id or alias" in trawl.fails("expire", "--task", "price", "--id", "x")

    trawl.work()
    assert trawl.status()["price"]["due_now"] == 0


SLOW_APP = """
import time

import trawl

app = trawl.App()


@app.task(tags=["slow"])
def nap(ctx: trawl.Context) -> dict:
    time.sleep(0.3)
    return {"slept": True}
"""


def test_worker_logs_progress_lines_when_stderr_is_not_a_terminal(trawl: Trawl) -> None:
    spec = trawl.write_app(source=SLOW_APP)
    for n in range(4):
        trawl("add", f"nap:{n}", "--tag", "slow")
    options = ("--exit-when-idle", "--concurrency", "1", "--progress-every", "0.1")
    quiet = trawl("worker", spec, *options, "--no-progress")
    assert "progress:" not in quiet.err
    trawl("expire", "--task", "nap")
    chatty = trawl("worker", spec, *options)
    assert "INFO trawl.progress: progress: done " in chatty.err


def test_worker_shows_a_live_progress_line_on_a_terminal(trawl: Trawl) -> None:
    spec = trawl.write_app()
    trawl("add", "sku:1", "--tag", "product")
    controller, terminal = pty.openpty()
    argv = [str(TRAWL), "--db", trawl.db, "worker", spec, "--exit-when-idle"]
    env = environment() | {"TERM": "xterm"}
    proc = subprocess.Popen(
        argv,
        cwd=trawl.cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)
    screen = _read_until_closed(controller)
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in screen
    assert "done 1  failed 0  running 0" in screen
    assert "elapsed" in screen


def _read_until_closed(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the other end closed when the process exited
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def test_worker_uses_the_apps_database_unless_db_is_given(trawl: Trawl) -> None:
    source = APP.replace("trawl.App()", 'trawl.App(db="sqlite:///own.db")')
    spec = trawl.write_app(source=source)
    own = Trawl(trawl.cwd, "sqlite:///own.db")
    own("add", "sku:1", "--tag", "product")
    trawl("add", "sku:2", "--tag", "product")

    trawl.run(["worker", spec, "--exit-when-idle", "--no-progress"])
    assert own.status()["price"]["counts"]["done"] == 1
    assert trawl.status() == {}

    trawl.work(spec)  # --db given: the app's own db is not used
    assert trawl.status()["price"]["counts"]["done"] == 1


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    path = tmp_path / "many.jsonl"
    with path.open("w") as file:
        for n in range(12_000):
            file.write(json.dumps({"id": f"n:{n}", "tags": ["product"]}) + "\n")
    return path


@BOTH
@pytest.mark.slow
def test_add_large_file_in_several_batches(trawl: Trawl, items_file: Path) -> None:
    added = trawl("add", "--file", str(items_file), "--json").json()
    assert added == {"created": 12_000, "existing": 0, "bad_lines": 0}
    again = trawl("add", "--file", str(items_file), "--json").json()
    assert again == {"created": 0, "existing": 12_000, "bad_lines": 0}
