"""Addresses: ``node:actor``. Node and actor names are 1-200 printable characters without
``:`` or whitespace, so an address splits one way only."""

from __future__ import annotations

import re

from trawl.live.errors import BadAddress

_NAME = re.compile(r"[^\s:]{1,200}")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise BadAddress(f"{what} name {name!r}: 1-200 characters, no ':' and no whitespace")
    return name


def make(node: str, actor: str) -> str:
    return f"{check_name(node, 'node')}:{check_name(actor, 'actor')}"


def split(address: str) -> tuple[str, str]:
    node, sep, actor = address.partition(":") if isinstance(address, str) else ("", "", "")
    if not sep or not _NAME.fullmatch(node) or not _NAME.fullmatch(actor):
        raise BadAddress(f"address {address!r}: expected node:actor")
    return node, actor


def node_of(address: str) -> str:
    return split(address)[0]
