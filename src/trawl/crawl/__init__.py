"""The built-in crawler: crawls, pages, links and depth, rules, politeness, HTTP client, WARC.

A page is an item (``page:<crawl>:<url>``) and fetching it is a job of the ``trawl.fetch``
task of :data:`trawl.crawl.app.app`, so leases, retries, fencing and the journal come from
the engine; this package adds what is crawl-specific.
"""
