"""The demo site: a deterministic generated web site, served on 127.0.0.1, and the checks
of a finished crawl against its ground truth (``trawl demo``, the tests, the benchmark)."""
