"""``trawl crawl``: archive sites to WARC, with a depth-correct frontier and politeness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from trawl.cli import crawlhelpers, crawlview, output, progress
from trawl.cli.common import (
    allow_hook_option,
    concurrency_option,
    duration,
    json_option,
    lease_option,
    metrics_option,
    open_store,
    progress_option,
    serve_metrics,
    settings,
)
from trawl.crawl import foreground, operations, personas, rendering
from trawl.crawl import rules as crawl_rules
from trawl.crawl.app import DEFAULT_LEASE, make_app
from trawl.crawl.browser import chromium
from trawl.crawl.browser.chromium import BrowserUnavailable
from trawl.crawl.inflight import SLOTS_PER_REQUEST
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.runtime import loop as process_loop
from trawl.runtime.lock import runtime_dir
from trawl.store.crawls import FETCH_TASK


class CrawlGroup(click.Group):
    """``trawl crawl URL ...`` starts a crawl; ``trawl crawl list`` etc. are subcommands."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["start", *args]
        return super().resolve_command(ctx, args)


_processes_option = click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes working on the crawl: this one and N-1 helpers sharing its frontier"
    " (on SQLite they take turns at its one writer, and still gain from more cores).",
)


@click.group("crawl", cls=CrawlGroup)
def crawl() -> None:
    """Crawl sites into WARC files: `trawl crawl URL... [options]` starts (or
    resumes) a crawl; the subcommands below inspect and steer crawls.

    \b
    trawl crawl https://example.org/ --depth 3 --accept 'example\\.org' \\
          --reject '\\?sessionid=' --delay 0.5 --concurrency 8 --warc example.warc.gz

    A page is found once per crawl (canonical URL); its depth is its shortest
    discovery path, kept correct even when pages fail and are retried. Ctrl-C
    stops cleanly; the same command again resumes where it stopped.
    """


@crawl.command("start")
@click.argument("seeds", metavar="URL...", nargs=-1, required=True)
@click.option(
    "--depth", type=click.IntRange(min=0), help="Links to follow from a seed [default: unlimited]."
)
@click.option(
    "--accept",
    multiple=True,
    metavar="REGEX",
    help="Add discovered URLs matching this (repeatable) [default: the seeds' hosts].",
)
@click.option(
    "--reject",
    multiple=True,
    metavar="REGEX",
    help="Skip URLs matching this instead of fetching them (repeatable).",
)
@click.option(
    "--delay",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds between request starts on one host (robots.txt Crawl-delay may ask more).",
)
@concurrency_option("Requests in flight for this crawl.", default=8)
@click.option(
    "--per-host",
    type=click.IntRange(min=1),
    help="Requests in flight per host [default: --concurrency].",
)
@click.option(
    "--warc",
    metavar="PATH",
    help="Write WARC/1.1 to PATH (x.warc.gz; later files x-00001.warc.gz ...).",
)
@click.option(
    "--warc-size",
    type=click.IntRange(min=1 << 20),
    default=1_000_000_000,
    show_default=True,
    help="Start a new WARC file past this many bytes.",
)
@click.option(
    "--no-warc-sync",
    is_flag=True,
    help="Do not fdatasync WARC records before their pages commit (faster; a crash of the "
    "machine can then lose records of pages recorded done).",
)
@click.option("--no-robots", is_flag=True, help="Ignore robots.txt.")
@click.option("--user-agent", metavar="UA", help="User-Agent header [default: trawl's].")
@click.option(
    "--timeout",
    metavar="DURATION",
    callback=duration,
    default="30s",
    show_default=True,
    help="Longest a request may take.",
)
@click.option(
    "--max-size",
    type=click.IntRange(min=1),
    default=100 << 20,
    show_default=True,
    help="Bytes kept of one response (the rest is cut, WARC-Truncated).",
)
@click.option(
    "--max-links",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Outlinks kept per page (a cut is recorded on the attempt).",
)
@click.option(
    "--max-redirects",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Hops in one redirect chain; a longer chain fails the page.",
)
@click.option(
    "--max-crawl-delay",
    metavar="DURATION",
    callback=duration,
    default="5s",
    show_default=True,
    help="Most a robots.txt Crawl-delay is obeyed (a longer one is capped).",
)
@click.option(
    "--host-grace",
    metavar="DURATION",
    callback=duration,
    default="60s",
    show_default=True,
    help="A host answering 5xx, timing out or refusing connections backs off as a whole "
    "(1s doubling) and its pages wait without spending tries, for this long; then they fail.",
)
@click.option(
    "--browser",
    is_flag=True,
    help="Render pages in headless Chromium (/usr/bin/chromium, or $TRAWL_CHROMIUM): every "
    "request a page makes goes to the WARC, outlinks come from the rendered DOM, and a "
    "screenshot is kept. `rule add --render plain` exempts pages.",
)
@click.option(
    "--load-timeout",
    metavar="DURATION",
    callback=duration,
    default="30s",
    show_default=True,
    help="Longest a browser page's load is waited for (the page is kept as far as it got).",
)
@click.option(
    "--idle-wait",
    metavar="DURATION",
    callback=duration,
    default="2s",
    show_default=True,
    help="Longest a browser page is waited on for network idle, after load and after its "
    "custom script.",
)
@click.option(
    "--nice",
    "niceness",
    type=int,
    default=0,
    show_default=True,
    help="Niceness of the crawl's pages (lower runs first).",
)
@click.option("--tag", help="A tag for the crawl (for matching pipelines later).")
@click.option("--note", help="A note kept with the crawl.")
@lease_option(DEFAULT_LEASE)
@click.option("--new", is_flag=True, help="Start a new crawl even if this command made one before.")
@allow_hook_option
@click.option(
    "--detach",
    is_flag=True,
    help='Work on the crawl in a background process; print {"id": N, "pid": P, "log": PATH}.',
)
@_processes_option
@progress_option("a live line")
@metrics_option
def start(seeds: tuple[str, ...], **opts: Any) -> None:
    """Start a crawl of URL... and work on it until it is finished.

    Running the same command again finds the crawl it made and resumes it.
    The worker in this process also serves the database's other active crawls;
    more workers can join with `trawl worker trawl.crawl.app:app`.
    """
    spec = _spec(seeds, opts)
    opts["lease"] = rendering.lease_for(spec.options, opts["lease"])
    store = open_store()
    operations.register(store, make_app(lease=opts["lease"]).get(FETCH_TASK).info())
    found = None if opts["new"] else operations.find(store, spec)
    if found is not None:
        crawl_id = found.id
        if found.aborted:
            raise click.ClickException(
                f"crawl {crawl_id} was aborted: `trawl crawl resume {crawl_id}` continues it"
            )
        click.echo(f"resuming crawl {crawl_id}", err=True)
    else:
        crawl_id = operations.create(store, spec)
        click.echo(f"crawl {crawl_id} started", err=True)
    if opts["detach"]:
        pid, log = detach(crawl_id, opts["lease"], opts["processes"])
        output.print_json({"id": crawl_id, "pid": pid, "log": str(log)})
        return
    slots = spec.concurrency * SLOTS_PER_REQUEST
    work(crawl_id, slots, opts["lease"], opts["show_progress"], opts["metrics"], opts["processes"])


def detach(crawl_id: int, lease: float, processes: int = 1) -> tuple[int, Path]:
    """Start `trawl crawl resume ID` in a session of its own; returns its pid and log."""
    log = runtime_dir() / f"crawl-{crawl_id}.log"
    argv = ["crawl", "resume", str(crawl_id), "--no-progress", "--lease", f"{lease:g}s"]
    argv += ["--processes", str(processes)]
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    with os.fdopen(os.open(log, flags, 0o600), "ab") as sink:
        child = subprocess.Popen(
            [sys.executable, "-m", "trawl", *argv],
            env=os.environ | {"TRAWL_DB": settings().url},  # never the password in argv
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,  # outlives this command and its terminal
        )
    return child.pid, log


def _spec(seeds: tuple[str, ...], opts: dict[str, Any]) -> CrawlSpec:
    for pattern in (*opts["accept"], *opts["reject"]):
        crawl_rules.make_rule("accept", pattern)  # checks the regex, naming it if bad
    options = Options(
        delay=opts["delay"],
        per_host=opts["per_host"],
        robots=not opts["no_robots"],
        timeout=opts["timeout"],
        max_bytes=opts["max_size"],
        warc=opts["warc"],
        warc_size=opts["warc_size"],
        warc_sync=not opts["no_warc_sync"],
        max_links=opts["max_links"],
        max_redirects=opts["max_redirects"],
        max_crawl_delay=opts["max_crawl_delay"],
        host_grace=opts["host_grace"],
        browser=opts["browser"],
        load_timeout=opts["load_timeout"],
        idle_wait=opts["idle_wait"],
    )
    if options.browser:
        _check_browser()
    return CrawlSpec(
        seeds=operations.canonical_seeds(seeds),
        depth=opts["depth"],
        accept=opts["accept"],
        reject=opts["reject"],
        user_agent=opts["user_agent"],
        niceness=opts["niceness"],
        concurrency=opts["concurrency"],
        tag=opts["tag"],
        note=opts["note"],
        options=options,
    )


def _check_browser() -> None:
    """--browser on a machine that cannot run one fails now, not page by page."""
    try:
        chromium.executable()
    except BrowserUnavailable as error:
        raise click.UsageError(f"--browser: {error}") from None


def work(
    crawl_id: int,
    concurrency: int,
    lease: float,
    show_progress: bool,
    metrics: tuple[str, int] | None = None,
    processes: int = 1,
    share: int = 1,
) -> operations.Progress:
    """Work on the crawl with *concurrency* worker slots, in this process and *processes* - 1
    helpers, each with its part of the slots; *share*: this is a helper, one of that many
    processes."""
    url = settings().url
    share = max(share, processes)
    crawlview.configure_logging()
    fmt = crawlview.live_format()
    with (
        crawlhelpers.helpers(processes - 1, crawl_id, slots=concurrency, lease=lease, url=url),
        progress.reporter(show_progress, crawlview.LOG_EVERY, fmt) as on_progress,
    ):
        plugins = serve_metrics(metrics)
        live = on_progress is not None and on_progress.live
        last = process_loop.run(
            foreground.run(
                url,
                crawl_id,
                concurrency=-(-concurrency // share),
                lease=lease,
                on_progress=on_progress,
                plugins=plugins,
                share=share,
                # Each count is a scan of the crawl's pages: only a live line wants one
                # twice a second. Without it (a helper, --no-progress, a log) they come
                # every 5 s, and at once when the worker runs out of work.
                every=foreground.EVERY if live and processes >= share else foreground.EVERY_MAX,
            )
        )
    click.echo(crawlview.summary(last))
    if last.status != operations.FINISHED:
        click.echo(f"stopped: `trawl crawl resume {crawl_id}` (or the same command) continues")
    return last


@crawl.command("list")
@json_option
def list_crawls(as_json: bool) -> None:
    """List crawls with their status and page counts.

    With --json, prints one object:

    \b
    {"crawls": [{"id": 1, "status": "FINISHED", "seeds": ["https://example.org/"],
                 "depth_limit": 3, "pages": {"ready": 0, "claimed": 0, "done": 812,
                 "failed": 3, "skipped": 41, "parked": 0}, "created_at": "...Z"}]}

    status is ACTIVE (pages ready), DRAINING (only pages in flight), FINISHED
    or ABORTED.
    """
    store = open_store()
    rows = [operations.progress(store, c.id) for c in operations.all_crawls(store)]
    if as_json:
        output.print_json({"crawls": [crawlview.brief_json(p) for p in rows]})
    elif not rows:
        click.echo("no crawls yet: `trawl crawl URL` starts one")
    else:
        output.print_table(crawlview.list_table(rows))


@crawl.command("show")
@click.argument("crawl_id", metavar="ID", type=int)
@json_option
def show(crawl_id: int, as_json: bool) -> None:
    """Show a crawl: settings, rules, page counts, depth frontier, bytes.

    With --json, prints one object: the fields of `crawl list --json` plus

    \b
    {"concurrency": 8, "niceness": 0, "ruleset": 2, "rules": [{"kind": "accept",
     "match": "^https?://example\\\\.org(:\\\\d+)?/", "value": true}],
     "options": {"delay": 0.5, "robots": true, "warc": "example.warc.gz", ...},
     "frontier": 2, "bytes": 1048576, "responses": 812, "note": null, "tag": null}
    """
    store = open_store()
    progress = operations.progress(store, crawl_id)
    version, rules = operations.rules(store, crawl_id)
    if as_json:
        output.print_json(crawlview.full_json(progress, rules))
    else:
        click.echo(crawlview.detail(progress, version, rules))


@crawl.command("pages")
@click.argument("crawl_id", metavar="ID", type=int)
@json_option
def pages(crawl_id: int, as_json: bool) -> None:
    """List a crawl's pages with depth, the page they were found on, and state.

    With --json, prints one object:

    \b
    {"pages": [{"url": "https://example.org/", "depth": 0, "via": null,
                "state": "DONE", "skip": null, "attempts": 1}]}

    state is READY, CLAIMED, DONE, FAILED, SKIPPED (skip says why: depth,
    robots or rule:VERSION) or STASHED (parked by an abort).
    """
    store = open_store()
    operations.get(store, crawl_id)
    rows = [crawlview.page_json(r) for r in store.crawls.pages(crawl_id)]
    if as_json:
        output.print_json({"pages": rows})
        return
    grid = output.table("depth", "state", "url", "via / skip")
    for row in rows:
        grid.add_row(str(row["depth"]), row["state"], row["url"], row["skip"] or row["via"] or "")
    output.print_table(grid)


@crawl.command("abort")
@click.argument("crawl_id", metavar="ID", type=int)
def abort(crawl_id: int) -> None:
    """Abort a crawl: no more of its pages are claimed (those in flight finish).

    `trawl crawl resume ID` undoes it.
    """
    parked = operations.abort(open_store(), crawl_id)
    click.echo(f"crawl {crawl_id} aborted: {output.plural(parked, 'page')} set aside")


@crawl.command("resume")
@click.argument("crawl_id", metavar="ID", type=int)
@allow_hook_option
@concurrency_option("Worker slots [default: twice the crawl's concurrency].")
@lease_option(DEFAULT_LEASE)
@_processes_option
@progress_option("a live line")
@metrics_option
@click.option("--share", type=click.IntRange(min=1), default=1, hidden=True)
def resume(
    crawl_id: int,
    concurrency: int | None,
    lease: float,
    show_progress: bool,
    metrics: tuple[str, int] | None,
    processes: int,
    share: int,
) -> None:
    """Resume a crawl (after an abort, a Ctrl-C or a crash) and work on it until finished."""
    store = open_store()
    crawl_row = operations.get(store, crawl_id)
    lease = rendering.lease_for(Options.from_json(crawl_row.options), lease)
    operations.register(store, make_app(lease=lease).get(FETCH_TASK).info())
    if crawl_row.aborted:
        count = operations.resume(store, crawl_id)
        click.echo(f"crawl {crawl_id} resumed: {output.plural(count, 'page')} due again", err=True)
    slots = concurrency or max(1, crawl_row.concurrency) * SLOTS_PER_REQUEST
    work(crawl_id, slots, lease, show_progress, metrics, processes, share)


@crawl.command("concurrency")
@click.argument("crawl_id", metavar="ID", type=int)
@click.argument("value", metavar="N", type=click.IntRange(min=0))
def concurrency(crawl_id: int, value: int) -> None:
    """Set how many of a crawl's requests may be in flight (0 pauses it)."""
    operations.set_concurrency(open_store(), crawl_id, value)
    click.echo(f"crawl {crawl_id}: concurrency {value}")


@crawl.command("nice")
@click.argument("crawl_id", metavar="ID", type=int)
@click.argument("value", metavar="N", type=int)
def nice(crawl_id: int, value: int) -> None:
    """Set a crawl's niceness: pages of crawls with lower niceness are fetched first."""
    count = operations.set_niceness(open_store(), crawl_id, value)
    click.echo(f"crawl {crawl_id}: niceness {value} ({output.plural(count, 'page')})")


@crawl.group("rule")
def rule() -> None:
    """Show and edit a crawl's rules. Every edit makes a new ruleset version; the
    next page claimed runs under it (each attempt records its version).
    """


_ensure = click.option(
    "--ensure-ruleset",
    "ensure",
    type=int,
    metavar="N",
    help="Fail unless the crawl's ruleset is still at version N (no edit in between).",
)


@rule.command("add")
@click.argument("crawl_id", metavar="ID", type=int)
@click.option("--accept", metavar="REGEX", help="Add discovered URLs matching REGEX.")
@click.option(
    "--reject", metavar="REGEX", help="Skip URLs matching REGEX instead of fetching them."
)
@click.option("--user-agent", metavar="UA", help="Send UA to URLs matching --match.")
@click.option(
    "--header", metavar="'NAME: VALUE'", help="Send this header to URLs matching --match."
)
@click.option("--cookie", metavar="NAME=VALUE", help="Send this cookie to URLs matching --match.")
@click.option(
    "--user-agent-preset",
    "preset",
    metavar="NAME",
    help=f"Present as this persona (user agent; viewport in a browser) to URLs matching "
    f"--match: {', '.join(sorted(personas.PRESETS))}.",
)
@click.option(
    "--render",
    type=click.Choice(crawl_rules.RENDERS),
    help="Fetch URLs matching --match in a browser, or plainly (over the crawl's --browser).",
)
@click.option(
    "--custom-js",
    metavar="FILE",
    help="Run the script in FILE in browser pages matching --match after they load (as an "
    "async function body: its return value is kept on the attempt). The script's text is "
    "stored with the rule.",
)
@click.option(
    "--hook",
    metavar="MODULE:FUNCTION",
    help="Call fn(url, settings) for URLs matching --match; it may return changed settings.",
)
@click.option(
    "--match",
    metavar="REGEX",
    default="",
    help="Which URLs --user-agent, --header, --cookie, --user-agent-preset, --render, "
    "--custom-js or --hook apply to [default: all].",
)
@click.option("--note", help="Why (kept with the version).")
@_ensure
def rule_add(crawl_id: int, note: str | None, ensure: int | None, **kinds: str | None) -> None:
    """Add a rule at the end of a crawl's rules (the last matching rule wins)."""
    new = _rule(kinds)
    version = operations.edit_rules(open_store(), crawl_id, add=[new], ensure=ensure, note=note)
    click.echo(f"crawl {crawl_id}: ruleset version {version}")


def _rule(kinds: dict[str, str | None]) -> crawl_rules.Rule:
    match = kinds.pop("match") or ""
    given = [(k, v) for k, v in kinds.items() if v is not None]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --accept, --reject, --user-agent, --header, --cookie, "
            "--user-agent-preset, --render, --custom-js, --hook"
        )
    kind, value = given[0]
    if kind == "custom_js":
        value = _script(str(value))
    if kind == "accept":
        return crawl_rules.make_rule("accept", str(value))
    if kind == "reject":
        return crawl_rules.make_rule("skip", str(value))
    return crawl_rules.make_rule(kind, match, value)


def _script(path: str) -> str:
    """The text of a --custom-js file (workers elsewhere run it: the text is what is kept)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(
            f"cannot read {path}: {error.strerror or error}", param_hint="--custom-js"
        ) from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path} is not UTF-8 text", param_hint="--custom-js") from None


@rule.command("remove")
@click.argument("crawl_id", metavar="ID", type=int)
@click.argument("position", metavar="N", type=click.IntRange(min=1))
@click.option("--note", help="Why (kept with the version).")
@_ensure
def rule_remove(crawl_id: int, position: int, note: str | None, ensure: int | None) -> None:
    """Remove rule number N (as `rule list` numbers them)."""
    version = operations.edit_rules(
        open_store(), crawl_id, remove=[position], ensure=ensure, note=note
    )
    click.echo(f"crawl {crawl_id}: ruleset version {version}")


@rule.command("list")
@click.argument("crawl_id", metavar="ID", type=int)
@json_option
def rule_list(crawl_id: int, as_json: bool) -> None:
    """List a crawl's current rules, numbered.

    With --json, prints one object:

    \b
    {"version": 2, "rules": [{"kind": "accept", "match": "example\\\\.org",
                              "value": true}, {"kind": "skip", ...}]}
    """
    version, rules = operations.rules(open_store(), crawl_id)
    if as_json:
        output.print_json({"version": version, "rules": rules})
        return
    click.echo(f"ruleset version {version}")
    for n, entry in enumerate(rules, 1):
        click.echo(f"{n:3}  {entry['kind']:<10} {json.dumps(entry['value'])}  {entry['match']}")
