"""``trawl demo``: serve a generated site on 127.0.0.1 and crawl it to a WARC on SQLite."""

from __future__ import annotations

import glob
import itertools
import shutil
from pathlib import Path

import click

from trawl.cli import crawl as crawl_cli
from trawl.cli.common import GlobalOptions, concurrency_option, open_store, progress_option
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.demo import verify
from trawl.demo.httpd import SiteServer, truth_file
from trawl.demo.site import generate
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store


@click.command("demo")
@click.option(
    "--pages",
    type=click.IntRange(min=50),
    default=400,
    show_default=True,
    help="Pages the generated site has (besides its endless calendar).",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Depth limit of the crawl.",
)
@concurrency_option("Requests in flight.", default=8)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-crawl"),
    show_default=True,
    help="Where the database, the WARC and the ground truth go (emptied first).",
)
@progress_option("a live line")
@click.pass_context
def demo(
    ctx: click.Context,
    pages: int,
    depth: int,
    concurrency: int,
    directory: Path,
    show_progress: bool,
) -> None:
    """Crawl a generated site served on 127.0.0.1, offline, and check the result.

    The site has three hosts (ports), fan-out and cross links, a depth
    shortcut, an endless calendar, session-id duplicates, a large binary,
    gzip pages, and robots.txt files with a Disallow and a Crawl-delay. The
    crawl writes DIR/crawl.db (SQLite, unless --db is given) and DIR/demo.warc.gz;
    then the WARC is read back with warcio and every page's depth is checked
    against the site's ground truth (DIR/truth.json).
    """
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    settings = ctx.find_object(GlobalOptions)
    if settings is None or settings.db is None:
        ctx.obj = GlobalOptions(db=f"sqlite:///{directory / 'crawl.db'}")
    with SiteServer(generate(pages)) as server:
        truth = truth_file(server, depth + 1, directory / "truth.json")
        root = server.url(("main", "/"))
        click.echo(f"serving the demo site on {', '.join(server.origin.values())}", err=True)
        spec = CrawlSpec(
            seeds=(root,),
            depth=depth,
            concurrency=concurrency,
            note="trawl demo",
            options=Options(warc=str(directory / "demo.warc.gz"), timeout=10.0),
        )
        store = open_store()
        operations.register(store, make_app().get(FETCH_TASK).info())
        crawl_id = operations.create(store, spec)
        click.echo(f"crawl {crawl_id}: {root} to depth {depth}", err=True)
        crawl_cli.work(crawl_id, concurrency, 30.0, show_progress)
        _check(store, crawl_id, server, truth, depth, directory)


def _check(
    store: Store,
    crawl_id: int,
    server: SiteServer,
    truth: dict[str, int],
    depth: int,
    directory: Path,
) -> None:
    from trawl.cli import crawlview

    pages = [crawlview.page_json(r) for r in store.crawls.pages(crawl_id)]
    excluded = {u for u in truth if "/private/" in u}
    report = verify.depth_report(pages, truth, depth, excluded)
    files = sorted(glob.glob(str(directory / "demo*.warc.gz")))
    records = verify.warc_records(files)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(records.items()))
    click.echo(f"WARC: {', '.join(files)}: {kinds} (digests checked with warcio)")
    robots = sum(1 for p in pages if p["skip"] == "robots")
    beyond = sum(1 for p in pages if p["skip"] == "depth")
    click.echo(
        f"depth: {report.right} pages fetched at their true depth, {len(report.wrong)} wrong, "
        f"{len(report.missed)} missed, {len(report.beyond)} past the limit; "
        f"{beyond} found past depth {depth} and kept skipped; {robots} disallowed by robots.txt"
    )
    slow = [r.at for r in server.requests("slow")]
    gaps = [b - a for a, b in itertools.pairwise(slow)]
    if gaps:
        click.echo(
            f"politeness: {len(slow)} requests to the Crawl-delay host, "
            f"closest two starts {min(gaps):.3f}s apart"
        )
    if not report.ok:
        raise click.ClickException("the crawl's depths do not match the ground truth")
