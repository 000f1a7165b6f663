"""What ``trawl worker APP --server URL --pipeline ID --token TOKEN`` sets up: a worker on
a remote backend that stops when the tracker refuses or revokes its pipeline."""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

from trawl.model.errors import TrawlError
from trawl.runtime.remote.backend import RemoteBackend
from trawl.runtime.remote.connection import Connection
from trawl.runtime.worker import Worker, run_worker


class PipelineStopped(TrawlError):
    """The tracker refused or revoked the pipeline while it ran."""


class Remote:
    def __init__(self, server: str, pipeline: str, token: str, *, disk_path: str = ".") -> None:
        self.server, self.pipeline, self.token, self.disk_path = server, pipeline, token, disk_path
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.stopped_by: str | None = None
        self.capabilities: list[str] = []  # what its hello says it can do beyond its tasks
        self._worker: Worker | None = None
        self._backend: RemoteBackend | None = None

    def backend(self, slots: int) -> RemoteBackend:
        self._backend = RemoteBackend(
            self.server,
            pipeline=self.pipeline,
            token=self.token,
            owner=self.owner,
            slots=slots,
            disk_path=self.disk_path,
            on_advisory=self._advised,
            capabilities=self.capabilities,
        )
        return self._backend

    @property
    def connection(self) -> Connection:
        """The backend's connection to the tracker (once :meth:`backend` made it)."""
        if self._backend is None:
            raise RuntimeError("the remote backend is made first")
        return self._backend.connection

    def describe(self) -> str:
        return f"{self.server} as pipeline {self.pipeline!r}"

    def _advised(self, kind: str, payload: Any) -> None:
        if kind in ("refused", "revoked") and self._worker is not None:
            self.stopped_by = f"{kind}: {payload}"
            self._worker.stop()

    def run(self, worker: Worker) -> int:
        self._worker = worker
        backend = worker.backend
        if isinstance(backend, RemoteBackend):
            backend.in_use = lambda: worker.stats.running
        code = run_worker(worker)
        if self.stopped_by is not None:
            raise PipelineStopped(
                f"the tracker stopped pipeline {self.pipeline!r} ({self.stopped_by})"
            )
        return code
