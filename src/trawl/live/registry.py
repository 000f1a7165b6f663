"""Services by name: this node's own entries and what the other nodes have told it."""

from __future__ import annotations

import random
from typing import Literal

Where = Literal["local", "remote", "mixed"]


class Registry:
    def __init__(self, node: str, rng: random.Random | None = None) -> None:
        self.node = node
        self.local: dict[str, set[str]] = {}
        self.remote: dict[str, dict[str, set[str]]] = {}
        self._rng = rng or random.Random()

    def add_local(self, service: str, address: str) -> bool:
        entries = self.local.setdefault(service, set())
        new = address not in entries
        entries.add(address)
        return new

    def remove_local(self, service: str, address: str) -> bool:
        entries = self.local.get(service, set())
        if address not in entries:
            return False
        entries.discard(address)
        if not entries:
            del self.local[service]
        return True

    def services_of(self, address: str) -> list[str]:
        return [s for s, entries in self.local.items() if address in entries]

    def set_remote(self, node: str, service: str, address: str, added: bool) -> None:
        services = self.remote.setdefault(node, {})
        entries = services.setdefault(service, set())
        if added:
            entries.add(address)
        else:
            entries.discard(address)
            if not entries:
                del services[service]

    def replace_remote(self, node: str, services: dict[str, list[str]]) -> None:
        self.remote[node] = {s: set(a) for s, a in services.items() if a}

    def drop_node(self, node: str) -> None:
        self.remote.pop(node, None)

    def snapshot(self) -> dict[str, list[str]]:
        return {s: sorted(a) for s, a in self.local.items()}

    def all(self, service: str, where: Where = "mixed") -> list[str]:
        """Every address offering *service*: this node's, the others', or both."""
        if where not in ("local", "remote", "mixed"):
            raise ValueError(f"where={where!r}: expected local, remote or mixed")
        mine = sorted(self.local.get(service, ()))
        theirs = sorted(a for s in self.remote.values() for a in s.get(service, ()))
        return mine if where == "local" else theirs if where == "remote" else mine + theirs

    def lookup(self, service: str, where: Where = "mixed") -> str | None:
        """One provider at random; ``mixed`` takes a local one whenever there is one."""
        if where == "mixed":
            found = self.all(service, "local") or self.all(service, "remote")
        else:
            found = self.all(service, where)
        return self._rng.choice(found) if found else None
