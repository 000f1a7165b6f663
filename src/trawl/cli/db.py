"""``trawl db``: the database schema."""

from __future__ import annotations

import click

from trawl.cli import output
from trawl.cli.common import json_option, settings
from trawl.store import migrate
from trawl.store.store import Store
from trawl.store.url import display


@click.group("db")
def db() -> None:
    """Create and upgrade the database schema."""


@db.command("upgrade")
def upgrade() -> None:
    """Apply the schema migrations this trawl has (creates the tables on an empty database).

    Needed on PostgreSQL before first use and after upgrading trawl; SQLite
    databases are upgraded automatically.
    """
    with Store(settings().url) as store:
        before, after = store.upgrade_schema()
    where = display(store.url)
    if before == after:
        click.echo(f"{where} is already at schema {after} (the newest)")
    else:
        click.echo(f"upgraded {where} from schema {before or '(empty)'} to {after}")


@db.command("current")
@json_option
def current(as_json: bool) -> None:
    """Show the database's schema revision and the newest one this trawl knows.

    With --json, prints one object:

    \b
    {"url": "sqlite:///trawl.db", "current": "0001", "head": "0001",
     "up_to_date": true}

    current is null when the database has no trawl schema yet.
    """
    with Store(settings().url) as store:
        revision = store.schema_revision()
    head = migrate.head()
    where = display(store.url)
    if as_json:
        output.print_json(
            {"url": where, "current": revision, "head": head, "up_to_date": revision == head}
        )
    elif revision == head:
        click.echo(f"{where}: schema {revision} (up to date)")
    else:
        click.echo(
            f"{where}: schema {revision or '(empty)'}; newest is {head}: run `trawl db upgrade`"
        )
