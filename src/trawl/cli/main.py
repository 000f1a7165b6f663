"""The ``trawl`` command: the root group, its subcommands, and how errors reach the user."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click
from click.exceptions import NoArgsIsHelpError

from trawl.cli.common import GlobalOptions
from trawl.model.errors import TrawlError
from trawl.runtime import heap

EXIT_DATA = 1  # a TrawlError: bad input, unknown id or task, unreachable database
EXIT_USAGE = 2  # the command line itself is wrong
EXIT_INTERRUPTED = 130

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# Each command's module, imported when the command runs (or --help lists it): `trawl add`
# need not load the crawler, the HTTP server and the live layer first.
COMMANDS = {
    "add": "items:add",
    "show": "items:show",
    "status": "jobs:status",
    "expire": "jobs:expire",
    "failures": "failures:failures",
    "journal": "journal:journal",
    "worker": "worker:worker",
    "feed": "feed:feed",
    "run": "run:run",
    "db": "db:db",
    "task": "tasks:task",
    "limits": "tasks:limits",
    "crawl": "crawl:crawl",
    "schedule": "schedule:schedule",
    "demo": "demo:demo",
    "simulate": "simulate:simulate_command",
    "serve": "serve:serve",
    "token": "token:token",
    "pipeline": "pipeline:pipeline",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported by name, on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, attr = where.partition(":")
        command = getattr(importlib.import_module(f"trawl.cli.{module}"), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; expected errors become one ``error:`` line and an exit code."""
    heap.tune()  # crawls, workers and servers: the collector runs less often (runtime/heap)
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
