"""``trawl token``: the bearer tokens of the HTTP API (``trawl serve``)."""

from __future__ import annotations

import sys

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.model.scopes import SCOPES


@click.group("token")
def token() -> None:
    """Create, list and revoke the HTTP API's bearer tokens.

    A token is shown once, when it is created; the database keeps only a
    scrypt hash of its secret. Scopes: read (every GET), write (add and edit
    items, steer crawls, acknowledge as a journal consumer), admin (also what
    changes many items at once: pausing tasks, retrying every failure, pruning
    the journal).
    """


@token.command("create")
@click.argument("name")
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default="read",
    show_default=True,
    help="What the token may do.",
)
def create(name: str, scope: str) -> None:
    """Make a token named NAME and print it, alone on its line (shown only this once).

    \b
    T=$(trawl token create ci-seeder --scope write)
    """
    store = open_store()
    text = store.tokens.create(name, scope, store.clock())
    click.echo(text)
    if sys.stderr.isatty():
        click.echo(f"token {name!r} ({scope}): store it now, it is not shown again", err=True)


@token.command("list")
@json_option
def list_tokens(as_json: bool) -> None:
    """Tokens by name with their scope, creation, last use and revocation.

    With --json, a list of {"name", "scope", "created_at", "last_used_at",
    "revoked_at"} (times as ISO-8601 strings with *_epoch twins).
    """
    store = open_store()
    rows = store.tokens.list()
    if as_json:
        output.print_json(
            [
                {
                    "name": r.name,
                    "scope": r.scope,
                    **output.stamp("created_at", r.created_at),
                    **output.stamp("last_used_at", r.last_used_at),
                    **output.stamp("revoked_at", r.revoked_at),
                }
                for r in rows
            ]
        )
        return
    grid = output.table("name", "scope", "created", "last used", "revoked")
    now = store.clock()
    for r in rows:
        grid.add_row(
            r.name,
            r.scope,
            output.relative(r.created_at, now),
            output.relative(r.last_used_at, now, never="never"),
            output.relative(r.revoked_at, now),
        )
    output.print_table(grid)


@token.command("revoke")
@click.argument("name")
def revoke(name: str) -> None:
    """Revoke the token named NAME. Servers stop accepting it within 10 seconds (they
    remember a checked token that long)."""
    store = open_store()
    if not store.tokens.revoke(name, store.clock()):
        raise click.ClickException(f"no live token is named {name!r} (see: trawl token list)")
    click.echo(f"revoked token {name!r}", err=True)
