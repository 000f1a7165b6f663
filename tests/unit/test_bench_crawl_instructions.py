"""bench/crawl --instructions: callgrind's counts by object, and a page's cost as a slope."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # crawl_bench imports its siblings by name
    spec.loader.exec_module(module)
    return module


crawl_summary = _load("crawl_summary")  # first: the others import it
instructions = _load("crawl_instructions")
crawl_bench = _load("crawl_bench")

# Two objects with compressed names, a call whose inclusive cost (the line after calls=)
# must not count again, a call target's object named on first use (cob=), and positions
# written relative (+N, -N, *).
CALLGRIND = """\
version: 1
creator: callgrind-3.19.0
pid: 1
cmd: python -m trawl
part: 1

desc: I1 cache:
positions: line
events: Ir
summary: 1111

ob=(1) /usr/lib/libpython3.11.so.1.0
fl=(1) ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 500
+2 100
cob=(2) /usr/lib/x86_64-linux-gnu/libz.so.1.2.13
cfi=(2) ???
cfn=(2) deflate
calls=3 0
* 400
-1 11
ob=(2)
fl=(2)
fn=(2)
0 400
ob=(1)
fn=(1)
12 100

totals: 1111
"""


def test_self_cost_is_counted_by_object_and_a_calls_inclusive_cost_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "callgrind.out"
    path.write_text(CALLGRIND)
    counts = instructions.by_object(path)
    assert counts == {"libpython3.11.so.1.0": 711, "libz.so.1.2.13": 400}
    assert sum(counts.values()) == 1111  # the file's own summary


def _row(
    system: str, size: int, pages: int, total: int, round_: int = 0, **objects: int
) -> dict[str, Any]:
    return {
        "system": system,
        "site_pages": size,
        "round": round_,
        "pages": pages,
        "instructions": total,
        "objects": objects,
    }


def test_a_pages_cost_is_the_slope_so_start_up_drops_out() -> None:
    # Start-up costs both sizes 1,000,000: 2,000 pages more cost 8,000,000 more.
    rows = [
        _row("trawl-sqlite", 500, 634, 1_000_000 + 634 * 4000, py=1_000_000 + 634 * 3000),
        _row("trawl-sqlite", 2000, 2634, 1_000_000 + 2634 * 4000, py=1_000_000 + 2634 * 3000),
    ]
    (entry,) = instructions.summarize(rows)
    assert entry["instructions_per_page"] == 4000
    assert entry["objects"] == {"py": 3000}
    assert entry["sizes"] == [500, 2000]


def test_an_object_in_one_size_only_counts_as_zero_in_the_other() -> None:
    rows = [
        _row("trawl-sqlite", 500, 100, 10_000, py=10_000),
        _row("trawl-sqlite", 2000, 300, 50_000, py=40_000, z=10_000),
    ]
    (entry,) = instructions.summarize(rows)
    assert entry["objects"] == {"py": 150, "z": 50}
    assert list(entry["objects"]) == ["py", "z"]  # the costliest first


def test_rounds_give_the_median_slope_and_the_median_ratio_to_before() -> None:
    # Round 1 ran slow on both sides: the rounds' ratios agree, the medians' would not.
    rows = [
        _row("trawl-sqlite@before", 500, 100, 100_000, 0),
        _row("trawl-sqlite@before", 2000, 300, 300_000, 0),  # 1,000 a page
        _row("trawl-sqlite", 500, 100, 100_000, 0),
        _row("trawl-sqlite", 2000, 300, 280_000, 0),  # 900: 0.9x
        _row("trawl-sqlite@before", 500, 100, 100_000, 1),
        _row("trawl-sqlite@before", 2000, 300, 500_000, 1),  # 2,000
        _row("trawl-sqlite", 500, 100, 100_000, 1),
        _row("trawl-sqlite", 2000, 300, 480_000, 1),  # 1,900: 0.95x
        _row("trawl-sqlite", 500, 100, 100_000, 2),
        _row("trawl-sqlite", 2000, 300, 300_000, 2),  # 1,000, no before in its round
    ]
    entries = {e["system"]: e for e in instructions.summarize(rows)}
    after = entries["trawl-sqlite"]
    assert (after["instructions_per_page"], after["min"], after["max"]) == (1000, 900, 1900)
    assert after["rounds"] == 3
    assert after["vs_before_rounds"] == [0.9, 0.95]
    assert after["vs_before"] == pytest.approx(0.925)
    assert entries["trawl-sqlite@before"]["instructions_per_page"] == 1500
    assert "vs_before" not in entries["trawl-sqlite@before"]
    text = "\n".join(instructions.lines(instructions.summarize(rows)))
    assert "0.925x @before (rounds 0.900-0.950)" in text
    assert "1,000 a page (900-1,900, 3 round(s); sites 500 and 2000)" in text


def test_a_round_without_both_sizes_adds_no_slope() -> None:
    rows = [
        _row("trawl-sqlite", 500, 100, 10_000, 0),
        _row("trawl-sqlite", 2000, 300, 30_000, 0),
        _row("trawl-sqlite", 2000, 300, 90_000, 1),  # its small crawl is missing
    ]
    (entry,) = instructions.summarize(rows)
    assert (entry["instructions_per_page"], entry["rounds"]) == (100, 1)


def test_a_system_at_one_size_or_with_no_more_pages_gets_no_slope() -> None:
    rows = [
        _row("trawl-sqlite", 500, 100, 10_000),
        _row("trawl-sqlite-nosync", 500, 100, 10_000),
        _row("trawl-sqlite-nosync", 2000, 100, 20_000),  # a crawl that stopped early
    ]
    assert instructions.summarize(rows) == []


@pytest.mark.parametrize(
    ("systems", "sizes", "message"),
    [
        (["trawl-postgresql"], [500, 2000], "not trawl-postgresql"),
        (["trawl-sqlite", "wget"], [500, 2000], "not wget"),
        (["trawl-sqlite"], [2000], "two site sizes"),
        (["trawl-sqlite"], [2000, 2000], "two site sizes"),
    ],
)
def test_instructions_refuses_what_it_cannot_count(
    systems: list[str], sizes: list[int], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crawl_bench.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(SystemExit, match=message):
        crawl_bench._check_instructions(systems, sizes)


def test_instructions_says_how_to_get_valgrind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crawl_bench.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="apt-get install -y valgrind"):
        crawl_bench._check_instructions(["trawl-sqlite"], [500, 2000])


def test_the_before_rows_of_a_sqlite_system_may_be_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(crawl_bench.shutil, "which", lambda name: f"/usr/bin/{name}")
    crawl_bench._check_instructions(["trawl-sqlite@before", "trawl-sqlite"], [500, 2000])


def test_before_without_a_round_in_common_is_compared_by_the_medians() -> None:
    # As the timed summary does (crawl_summary.median_ratio), not left out.
    rows = [
        _row("trawl-sqlite@before", 500, 100, 100_000, 0),
        _row("trawl-sqlite@before", 2000, 300, 300_000, 0),  # 1,000 a page
        _row("trawl-sqlite", 500, 100, 100_000, 1),
        _row("trawl-sqlite", 2000, 300, 260_000, 1),  # 800 a page
    ]
    entries = {e["system"]: e for e in instructions.summarize(rows)}
    assert entries["trawl-sqlite"]["vs_before"] == pytest.approx(0.8)
    assert entries["trawl-sqlite"]["vs_before_rounds"] == []
    text = "\n".join(instructions.lines(instructions.summarize(rows)))
    assert "0.800x @before" in text
    assert "(rounds" not in text


def test_a_crawl_callgrind_wrote_no_counts_for_stops_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Site:
        def terminate(self) -> None: ...

        def wait(self) -> None: ...

    monkeypatch.setattr(crawl_bench, "serve", lambda size: (Site(), {"main": "http://127.0.0.1:9"}))
    finished = {"code": 0, "wall_s": 1.0, "pages": 10, "status": "FINISHED"}
    monkeypatch.setattr(crawl_bench, "trawl", lambda *args, **kwargs: dict(finished))
    with pytest.raises(SystemExit, match="trawl-sqlite: callgrind wrote no counts"):
        crawl_bench.counted(500, ["trawl-sqlite"], tmp_path, None)


def test_the_checkout_measured_gets_its_bytecode_first_and_a_broken_one_stops_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A development checkout has no bytecode, and with PYTHONDONTWRITEBYTECODE set every
    crawl would compile trawl from source before its first request (bench/crawl and
    bench/run both call harness.environment.compile_trawl)."""
    monkeypatch.syspath_prepend(str(_BENCH))
    from harness.environment import compile_trawl

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("X = 1\n")
    compile_trawl(tmp_path)  # no .venv there: the bench's own python compiles it
    assert list((package / "__pycache__").glob("mod.*.pyc"))
    (package / "broken.py").write_text("def (:\n")
    with pytest.raises(subprocess.CalledProcessError):
        compile_trawl(tmp_path)
