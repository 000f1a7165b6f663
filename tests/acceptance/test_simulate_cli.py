"""``trawl simulate`` as a user runs it: the report, repeatable across processes, and the
errors it gives for bad input."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.procs import trawl_command

APP = """
import trawl
app = trawl.App()

@app.task(tags=["repo"], revisit=trawl.adaptive(min="1d", max="64d"))
def visit(ctx):
    raise AssertionError("a simulation never calls the task")
"""


def simulate(tmp_path: Path, *args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    (tmp_path / "sim_app.py").write_text(APP)
    env = os.environ | {"PYTHONPATH": str(tmp_path), "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [*trawl_command(), "simulate", "sim_app:app", *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip


SMALL = ["--items", "300", "--days", "4", "--step", "1h"]


def test_the_report_and_its_chart(tmp_path: Path) -> None:
    done = simulate(tmp_path, *SMALL, "--policy", "fixed:1d", "--policy", "app")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "policy", "day", "visits", "changed", "failed", "fresh", "stale", "h", "queue",
    ]  # fmt: skip
    assert sum(line.startswith("fixed:1d ") for line in lines) == 4 + 1  # days + summary
    assert "fresh share per day" in done.stdout
    assert any(line.strip().startswith("app ") and "▁" in line + "█" for line in lines)


def test_the_same_seed_gives_the_same_report_in_another_process(tmp_path: Path) -> None:
    first = simulate(tmp_path, *SMALL, "--json", hash_seed="1")
    again = simulate(tmp_path, *SMALL, "--json", hash_seed="2")
    other = simulate(tmp_path, *SMALL, "--json", "--seed", "7")
    assert first.returncode == again.returncode == other.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert first.stdout == again.stdout
    assert first.stdout != other.stdout
    (policy,) = report["policies"]
    assert policy["policy"] == "app"
    assert [d["day"] for d in policy["days"]] == [1, 2, 3, 4]
    assert set(policy["days"][0]) == {
        "day", "visits", "changed", "failed", "fresh", "staleness", "queue",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "weekly"], "unknown policy 'weekly'"),
        (["--min-rate", "1/0"], "'1/0' is not a number of changes per day"),
        (["--max-rate", "-2"], "a rate must be positive"),
        (["--min-rate", "3", "--max-rate", "2"], "change rates need 0 < min <= max"),
        (["--items", "0"], "Invalid value for '--items'"),
        (["--task", "nope"], "unknown task 'nope'"),
        (["--step", "2d"], "the step must be between 0 and a day"),
    ],
)
def test_bad_input_is_named(tmp_path: Path, args: list[str], message: str) -> None:
    done = simulate(tmp_path, *SMALL, *args)
    assert done.returncode != 0
    assert message in " ".join(done.stderr.split()), done.stderr
