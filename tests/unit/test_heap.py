"""The cyclic collector runs less often in trawl's processes, unless the process or the
user's app set it otherwise."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trawl.cli.main import main
from trawl.runtime import heap
from trawl.runtime.actor.handle import EXIT_START_FAILED


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    kept = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # the interpreter's default
    yield
    gc.set_threshold(*kept)


def test_the_youngest_generation_waits_for_more_objects_and_the_others_keep_theirs() -> None:
    heap.tune()
    assert gc.get_threshold() == (heap.YOUNGEST, 10, 10)


def test_a_threshold_set_before_is_left_alone() -> None:
    gc.set_threshold(300, 5, 5)
    heap.tune()
    assert gc.get_threshold() == (300, 5, 5)


def test_the_command_tunes_it() -> None:
    assert main(["--version"]) == 0
    assert gc.get_threshold()[0] == heap.YOUNGEST


def test_an_apps_own_threshold_wins(tmp_path: Path) -> None:
    app = tmp_path / "gc_app.py"
    app.write_text(
        "import gc\nimport trawl\n\ngc.set_threshold(1234, 7, 7)\napp = trawl.App()\n\n\n"
        "@app.task(tags=['t'])\nasync def t(ctx: trawl.Context) -> None:\n    return None\n"
    )
    db = f"sqlite:///{tmp_path / 'trawl.db'}"
    assert main(["--db", db, "worker", f"{app}:app", "--exit-when-idle"]) == 0
    assert gc.get_threshold() == (1234, 7, 7)


def test_an_actor_process_tunes_it_before_it_loads_the_app(tmp_path: Path) -> None:
    seen = tmp_path / "threshold"
    app = tmp_path / "gc_seen.py"
    app.write_text(
        f"import gc\nimport trawl\n\nopen({str(seen)!r}, 'w').write(str(gc.get_threshold()[0]))"
        "\napp = trawl.App()\n"
    )
    read, write = os.pipe()
    try:
        argv = ["--app", f"{app}:app", "--task", "missing", "--token", "t0"]
        done = subprocess.run(
            [sys.executable, "-m", "trawl.runtime.actor.main", *argv, "--beat-fd", str(write)],
            pass_fds=(write,),
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(read)
        os.close(write)
    assert done.returncode == EXIT_START_FAILED, done.stderr  # the task is not the app's
    assert seen.read_text() == str(heap.YOUNGEST)
