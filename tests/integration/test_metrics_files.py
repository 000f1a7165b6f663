"""Under ``trawl run`` the port serves the samples each actor wrote to a shared directory.
prometheus-client creates an actor's file before it sizes it: a scrape in that instant, or
after an actor was killed in it, must still serve every other process's samples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trawl.runtime.procmetrics import MULTIPROC, _size, actors_registry

WRITE = """
from prometheus_client import Counter
Counter("trawl_jobs_claimed", "Jobs leased by this process.", ["task"]).labels("fetch").inc(3)
"""


def _samples(directory: Path) -> dict[tuple[str, str], float]:
    text = generate_latest(actors_registry(str(directory))).decode()
    return {
        (s.name, s.labels.get("task", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _actor_writes(directory: Path) -> None:
    env = os.environ | {MULTIPROC: str(directory)}
    subprocess.run([sys.executable, "-c", WRITE], env=env, check=True)


def test_an_actor_file_left_empty_does_not_fail_the_scrape(tmp_path: Path) -> None:
    _actor_writes(tmp_path)
    _actor_writes(tmp_path)
    (tmp_path / "counter_4194304.db").touch()  # an actor killed before its file was sized
    assert _samples(tmp_path) == {("trawl_jobs_claimed_total", "fetch"): 6.0}


def test_a_directory_of_empty_files_serves_no_samples(tmp_path: Path) -> None:
    (tmp_path / "counter_1.db").touch()
    (tmp_path / "histogram_2.db").touch()
    assert _samples(tmp_path) == {}


def test_a_file_removed_as_it_is_listed_counts_as_empty(tmp_path: Path) -> None:
    # A live gauge's file goes when its process is marked dead, maybe between the
    # listing and the read.
    assert _size(tmp_path / "gauge_livesum_7.db") == 0
