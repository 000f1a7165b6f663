"""Run a trawl worker the way ``trawl worker APP --exit-when-idle`` does, for when the CLI is
not available: ``python run_worker.py APP DB_URL CONCURRENCY``."""

import logging
import sys

from trawl.runtime.loader import load_app
from trawl.runtime.worker import Worker, run_worker


def main() -> int:
    spec, url, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    logging.basicConfig(level=logging.WARNING)
    worker = Worker(load_app(spec), url=url, concurrency=concurrency, exit_when_idle=True)
    return run_worker(worker)


if __name__ == "__main__":
    sys.exit(main())
