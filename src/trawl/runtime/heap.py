"""How often a trawl process runs Python's cyclic garbage collector: less often than the
interpreter's default.

The collector's youngest generation runs each time the objects it tracks have grown by
700 since its last run, and every tenth of those runs the next generation, every tenth of
those the whole heap. A crawl or a worker allocates in bursts (a page's response and links,
a batch of claimed jobs and their commit) that cross 700 again and again, though nearly
everything they make is freed by reference counting soon after. Measured on this
machine's bench site (25,356 pages, SQLite, ``trawl crawl --concurrency 16 --warc``, gc
callbacks timing each run): about 1,900 runs took 3.0 s of the crawl's 62 s of CPU, 15 of
them full collections of 0.1 s each, a pause of the event loop that paces requests a few
milliseconds apart; with 10,000, 18 runs took 0.2 s and the peak RSS stayed 112 MB. A
worker doing 100,000 no-op jobs on PostgreSQL: 0.64-0.69 s of its 9.5-10.1 s, then
0.05-0.06 s. Cyclic garbage is still collected, after 10,000 new objects instead of 700.

An app that sets its own thresholds (``gc.set_threshold`` when its module is imported) is
loaded after this runs, so its setting wins.
"""

from __future__ import annotations

import gc

YOUNGEST = 10_000  # net new tracked objects between runs of the youngest generation
_DEFAULT = 700  # the interpreter's


def tune() -> None:
    """Run the youngest generation after :data:`YOUNGEST` new objects, unless something in
    this process (start-up code such as ``sitecustomize``, a program that embeds trawl's
    command) already moved it off the interpreter's default."""
    youngest, middle, oldest = gc.get_threshold()
    if youngest == _DEFAULT:
        gc.set_threshold(YOUNGEST, middle, oldest)
