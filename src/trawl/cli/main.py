"""The ``trawl`` command: the root group, its subcommands, and how errors reach the user."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from click.exceptions import NoArgsIsHelpError

from trawl.cli import (
    crawl,
    db,
    demo,
    failures,
    feed,
    items,
    jobs,
    journal,
    run,
    schedule,
    serve,
    simulate,
    tasks,
    token,
    worker,
)
from trawl.cli.common import GlobalOptions
from trawl.model.errors import TrawlError

EXIT_DATA = 1  # a TrawlError: bad input, unknown id or task, unreachable database
EXIT_USAGE = 2  # the command line itself is wrong
EXIT_INTERRUPTED = 130

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--db",
    metavar="URL",
    envvar="TRAWL_DB",
    help="Database: sqlite:///path/to/file.db or postgresql://user@host/name "
    "[default: $TRAWL_DB, else sqlite:///trawl.db; for `worker`, else the app's db].",
)
@click.version_option(package_name="trawl", prog_name="trawl")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """trawl: a durable orchestrator for crawl, scrape and archive work.

    Items carry tags; tags select the tasks an app declares; workers run the
    jobs that are due and store their results. Errors print one line starting
    with "error:" on stderr and exit 1 (bad data, unknown id or task,
    unreachable database) or 2 (bad command line).

    Commands with --json print the JSON shape their help describes. Times in
    JSON are ISO-8601 UTC strings (e.g. "due_at") next to the same instant in
    Unix seconds ("due_at_epoch"); both are null when there is no time.
    """
    ctx.obj = GlobalOptions(db=db)


for command in (
    items.add,
    items.show,
    jobs.status,
    jobs.expire,
    failures.failures,
    journal.journal,
    worker.worker,
    feed.feed,
    run.run,
    db.db,
    tasks.task,
    tasks.limits,
    crawl.crawl,
    schedule.schedule,
    demo.demo,
    simulate.simulate_command,
    serve.serve,
    token.token,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; expected errors become one ``error:`` line and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="trawl", standalone_mode=False)
    except NoArgsIsHelpError as error:
        click.echo(error.format_message(), err=True)  # a bare group: its help, as click does
        return EXIT_USAGE
    except click.UsageError as error:
        return _fail(_usage_message(error), EXIT_USAGE)
    except click.ClickException as error:
        return _fail(error.format_message(), error.exit_code)
    except click.Abort:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except TrawlError as error:
        return _fail(str(error), EXIT_DATA)
    return code if isinstance(code, int) else 0


def _usage_message(error: click.UsageError) -> str:
    message = error.format_message()
    if error.ctx is not None:
        message += f" (see `{error.ctx.command_path} --help`)"
    return message


def _fail(message: str, code: int) -> int:
    text = " ".join(message.split()) if "\n" in message else message
    click.echo(f"error: {text}", err=True)
    sys.stderr.flush()
    return code
