"""The benchmark app: one task that does nothing, selected by the tag ``noop``."""

import trawl

app = trawl.App()


@app.task(tags=["noop"], timeout="300s")
async def noop(ctx: trawl.Context) -> None:
    return None
