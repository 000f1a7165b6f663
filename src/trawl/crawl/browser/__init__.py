"""Browser capture: pages rendered in headless Chromium, every request they make archived.

``chromium`` finds the browser, ``pool`` keeps one running per worker process (restarted
when it crashes, recycled before it grows), ``traffic`` answers the page's requests through
the crawler's own fetcher and politeness, and ``capture`` renders one page: load, network
idle, custom script, screenshot, DOM.
"""
