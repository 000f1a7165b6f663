"""``process sleep 10ms``: the task is still named ``noop`` (the seeded jobs' task) but sleeps."""

import asyncio

import trawl

app = trawl.App()


@app.task(tags=["noop"], timeout="300s")
async def noop(ctx: trawl.Context) -> None:
    await asyncio.sleep(0.01)
