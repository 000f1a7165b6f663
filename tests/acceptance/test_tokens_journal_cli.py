"""`trawl token` and `trawl journal` consumers and pruning, run as a user would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.acceptance.test_cli import Trawl
from trawl.store.store import Store


@pytest.fixture
def cli(tmp_path: Path) -> Trawl:
    return Trawl(tmp_path, f"sqlite:///{tmp_path / 'trawl.db'}")


def test_token_create_prints_the_token_alone_and_list_never_shows_it(cli: Trawl) -> None:
    made = cli("token", "create", "ci-seeder", "--scope", "write")
    token = made.out.strip()
    assert made.out == token + "\n"
    assert token.startswith("trawl_")
    listed = cli("token", "list", "--json").json()
    assert [(t["name"], t["scope"], t["revoked_at"]) for t in listed] == [
        ("ci-seeder", "write", None)
    ]
    assert token.split("_", 2)[2] not in cli("token", "list").out
    with Store(cli.db) as store:
        assert store.tokens.verify(token, store.clock()) is not None


def test_token_errors_name_what_was_wrong(cli: Trawl) -> None:
    cli("token", "create", "a")
    assert "a token named 'a' exists" in cli.fails("token", "create", "a")
    assert "no live token is named 'b'" in cli.fails("token", "revoke", "b")
    bad = cli("token", "create", "c", "--scope", "root", code=2)
    assert "'root' is not one of" in bad.err
    cli("token", "revoke", "a")
    assert cli("token", "list", "--json").json()[0]["revoked_at"] is not None


def _items(cli: Trawl, *ids: str) -> None:
    lines = "".join(json.dumps({"id": i, "tags": ["product"]}) + "\n" for i in ids)
    cli("add", "--file", "-", stdin=lines)


def test_consume_prints_and_acknowledges_then_resumes(cli: Trawl) -> None:
    _items(cli, "sku:1", "sku:2")
    first = cli("journal", "consume", "idx", "--json").json_lines()
    assert [e["item_id"] for e in first if e["kind"] == "item.created"] == ["sku:1", "sku:2"]
    assert cli("journal", "consume", "idx", "--json").out == ""  # all acknowledged
    _items(cli, "sku:3")
    again = cli("journal", "consume", "idx", "--json").json_lines()
    assert [e["item_id"] for e in again] == ["sku:3"]
    [row] = cli("journal", "consumers", "--json").json()
    assert (row["name"], row["position"], row["lag"]) == ("idx", again[-1]["seq"], 0)


def test_consume_exec_acknowledges_only_what_the_command_processed(
    cli: Trawl, tmp_path: Path
) -> None:
    _items(cli, "sku:1", "sku:2", "sku:3")
    seen = tmp_path / "seen.jsonl"
    script = tmp_path / "sink.py"
    script.write_text(
        "import sys\n"
        f"lines = sys.stdin.read()\nopen({str(seen)!r}, 'a').write(lines)\n"
        "sys.exit(3 if 'sku:3' in lines and len(sys.argv) > 1 else 0)\n"
    )
    failing = f"{sys.executable} {script} fail"
    error = cli.fails("journal", "consume", "c", "--page", "2", "--exec", failing)
    assert "exited 3" in error
    assert "not acknowledged" in error
    [row] = cli("journal", "consumers", "--json").json()
    assert row["position"] == 2
    assert row["lag"] > 0
    cli("journal", "consume", "c", "--exec", f"{sys.executable} {script}")
    [row] = cli("journal", "consumers", "--json").json()
    assert row["lag"] == 0
    ids = [json.loads(line)["item_id"] for line in seen.read_text().splitlines()]
    assert ids.count("sku:3") == 2  # delivered again after the failed run: at least once


def test_prune_refuses_while_a_consumer_lags_unless_forced(cli: Trawl) -> None:
    _items(cli, "sku:1")
    cli("journal", "consume", "slow", "--no-ack", "--limit", "1")
    error = cli.fails("journal", "prune", "--before", "0s")
    assert "not acknowledged by 1 consumer(s): slow (at 0)" in error
    assert cli("journal", "--json").out  # nothing went
    forced = cli("journal", "prune", "--before", "2099-01-01", "--force")
    assert "deleted" in forced.err
    assert cli("journal", "--json").out == ""
    bad = cli.fails("journal", "prune", "--before", "last tuesday")
    assert "is not a duration (30d), an ISO date or time, or Unix seconds" in bad
    cli("journal", "forget", "slow")
    assert "no consumer is named 'slow'" in cli.fails("journal", "forget", "slow")
