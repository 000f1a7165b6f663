"""The built-in task ``trawl.schedule``: runs a recurring schedule's action when it fires.

Every app declares it, so ``trawl worker`` and ``trawl run`` serve schedules like any job.
A run works out which fire times passed since the last one (several missed while nothing
ran are coalesced into one run, and the result says how many), runs the action as a
``trawl`` command line against the same database, and sets its TTL so the job is due
again at the next fire time. An action that fails is recorded with the run (and in the
journal) and the schedule keeps its cadence: a broken command should not stop tomorrow's.
A crawl is started detached; while the crawl a schedule started last is still running,
the next fire is skipped and recorded.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any

import msgspec

from trawl.runtime import recurring
from trawl.runtime.recurring import Recurring

if TYPE_CHECKING:
    from trawl.runtime.app import App
    from trawl.runtime.context import Context

TIMEOUT = 3600.0  # an `add --file` action may load a large file
RUNNING = ("ACTIVE", "DRAINING")
OUTPUT_KEPT = 2000  # characters of an action's output kept with the result


class ActionFailed(Exception):
    """The schedule's command exited with an error."""


def declare(app: App) -> None:
    """Add ``trawl.schedule`` to *app* (every app has it)."""
    app.task(name=recurring.TASK, tags=[recurring.TAG], timeout=TIMEOUT)(run)


async def run(ctx: Context) -> dict[str, Any]:
    """One run of a schedule: act if a fire time passed (or run-now asked), then re-arm."""
    spec = Recurring.from_data(ctx.id, ctx.data)
    previous = await ctx.get_metadata(recurring.TASK) or {}
    now = time.time()
    considered = float(previous.get("considered_until", spec.since))
    due = recurring.fires(spec.cron, spec.tz, considered, now)
    forced = spec.run_now != int(previous.get("run_now_seen", 0))
    result: dict[str, Any] = {
        "ran_at": now,
        "fired_for": due[-1] if due else None,
        "coalesced": max(len(due) - 1, 0),
        "run_now_seen": spec.run_now,
        "crawl": previous.get("crawl"),
        "outcome": "waiting",
    }
    if due or forced:
        try:
            result |= await _act(ctx, spec, previous, now)
        except ActionFailed as error:  # the schedule keeps its cadence; the error is kept
            ctx.log("schedule", str(error))
            result |= {"outcome": "failed", "error": str(error)}
    result["considered_until"] = now
    result["next_at"] = recurring.next_fire(spec.cron, spec.tz, now)
    ctx.set_ttl(max(result["next_at"] - now, 0.001))
    if result["coalesced"]:
        ctx.log("schedule", f"{result['coalesced']} missed runs coalesced into this one")
    return result


async def _act(
    ctx: Context, spec: Recurring, previous: dict[str, Any], now: float
) -> dict[str, Any]:
    if spec.paused:
        return {"outcome": "paused"}
    db = await ctx.with_store(lambda store: store.url)
    if spec.kind == "crawl":
        return await _crawl(ctx, spec, previous.get("crawl"), db)
    output = await _trawl(spec.action, db)
    ctx.log("schedule", f"ran: {spec.command()}")
    return {"outcome": "ran", "output": output[-OUTPUT_KEPT:]}


async def _crawl(ctx: Context, spec: Recurring, last: int | None, db: str) -> dict[str, Any]:
    if last is not None and await _crawl_status(last, db) in RUNNING:
        ctx.log("schedule", f"skipped: crawl {last} it started last is still running")
        return {"outcome": "skipped", "skipped_because": f"crawl {last} still running"}
    output = await _trawl((*spec.action, "--new", "--detach"), db)
    crawl_id = int(_json(output)["id"])
    ctx.log("schedule", f"started crawl {crawl_id}: {spec.command()}")
    return {"outcome": "ran", "crawl": crawl_id}


async def _crawl_status(crawl_id: int, db: str) -> str:
    """The crawl's status, ``GONE`` if it was deleted since. Any other failure (the
    database out of reach, say) fails this run: taken for "gone", it would start a second
    crawl beside one still running."""
    try:
        output = await _trawl(("crawl", "show", str(crawl_id), "--json"), db)
    except ActionFailed as error:
        if re.search(rf"no crawl has the id {crawl_id}\b", str(error)):
            return "GONE"
        raise
    return str(_json(output)["status"])


def _json(output: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(output)
    except msgspec.DecodeError:
        raise ActionFailed(f"expected JSON from trawl, got {output[:200]!r}") from None
    if not isinstance(value, dict):
        raise ActionFailed(f"expected a JSON object from trawl, got {output[:200]!r}")
    return value


async def _trawl(argv: tuple[str, ...], db: str) -> str:
    """Run ``trawl ARGV`` on *db* (through the environment: no password in argv)."""
    env = os.environ | {"TRAWL_DB": db}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trawl",
        *argv,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        proc.kill()
        raise
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip()[-OUTPUT_KEPT:]
        raise ActionFailed(f"`trawl {' '.join(argv)}` exited {proc.returncode}: {why}")
    return out.decode(errors="replace")
