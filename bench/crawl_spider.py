"""The Scrapy peer: follow every link (a, img, link, script) breadth first, obey robots.txt.

Run by bench/crawl_bench.py in bench/.venv-scrapy; prints Scrapy's stats as JSON at exit.
Scrapy writes no WARC: its row measures fetching and parsing only.
"""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor

ROOT, DEPTH, CONCURRENCY = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
EXTRACT = LinkExtractor(
    tags=("a", "img", "link", "script", "iframe"), attrs=("href", "src"), deny_extensions=[]
)


class Everything(scrapy.Spider):
    name = "everything"
    start_urls = (ROOT,)

    def parse(self, response):  # type: ignore[no-untyped-def]
        if not isinstance(response, scrapy.http.TextResponse):
            return
        for link in EXTRACT.extract_links(response):
            yield response.follow(link.url, callback=self.parse)


process = CrawlerProcess(
    settings={
        "DEPTH_LIMIT": DEPTH,
        "DEPTH_PRIORITY": 1,  # breadth first, as Scrapy's docs set it
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "CONCURRENT_REQUESTS": CONCURRENCY,
        "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
        "ROBOTSTXT_OBEY": True,
        "LOG_LEVEL": "ERROR",
        "DOWNLOAD_MAXSIZE": 100 << 20,
        "TELNETCONSOLE_ENABLED": False,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }
)
crawler = process.create_crawler(Everything)
process.crawl(crawler)
process.start()
stats = crawler.stats.get_stats()
print(json.dumps({k: v for k, v in stats.items() if isinstance(v, int | float)}))
