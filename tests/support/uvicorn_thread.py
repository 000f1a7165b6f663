"""An ASGI app on a real uvicorn, in a thread of the test process, on a free port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def in_thread(app: Any, name: str, **config: Any) -> Iterator[int]:
    """Serve *app* on 127.0.0.1 until the block ends; yields the port."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", **config)
    )
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "the server stopped before it started"
        assert time.monotonic() < deadline, "the server did not start in 20 s"
        time.sleep(0.02)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=20)
