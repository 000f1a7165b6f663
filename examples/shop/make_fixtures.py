"""Write the shop example's fixture site and seed file (deterministic: same every run).

    python examples/shop/make_fixtures.py OUT_DIR [PRODUCTS]

OUT_DIR gets ``site/p/N.html`` product pages, ``site/r/N-K.html`` review pages and
``items.jsonl`` (one seed item per product page, the format ``trawl add --file`` reads).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

BASE = "https://shop.example"
PRODUCT = """<html><head><title>{title}</title></head><body>
<h1 class="title">{title}</h1><p class="price">{price}</p>
{reviews}
</body></html>"""
REVIEW = '<html><body><div class="review" data-stars="{stars}">{text}</div></body></html>'


def write_site(out: Path, products: int) -> None:
    rng = random.Random(1)
    (out / "site" / "p").mkdir(parents=True, exist_ok=True)
    (out / "site" / "r").mkdir(parents=True, exist_ok=True)
    with (out / "items.jsonl").open("w") as seeds:
        for n in range(1, products + 1):
            links = []
            for k in range(rng.randint(0, 3)):
                review = out / "site" / "r" / f"{n}-{k}.html"
                review.write_text(REVIEW.format(stars=rng.randint(1, 5), text=f"review {k}"))
                links.append(f'<a class="review" href="/r/{n}-{k}.html">review</a>')
            # Every 25th page is broken (no price) so the demo shows a failure and its retries.
            price = "" if n % 25 == 0 else f"{rng.randint(100, 99999) / 100:.2f} EUR"
            page = PRODUCT.format(title=f"Product {n}", price=price, reviews="\n".join(links))
            (out / "site" / "p" / f"{n}.html").write_text(page)
            item = {
                "id": f"url:{BASE}/p/{n}",
                "tags": ["product"],
                "data": {"url": f"{BASE}/p/{n}"},
            }
            seeds.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    write_site(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 200)
