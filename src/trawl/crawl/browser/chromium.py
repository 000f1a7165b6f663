"""Where the Chromium binary is: ``$TRAWL_CHROMIUM``, else Debian's ``/usr/bin/chromium``,
else ``chromium`` on the PATH. trawl never downloads a browser."""

from __future__ import annotations

import importlib.util
import os
import shutil

from trawl.model.errors import InvalidInput

ENV = "TRAWL_CHROMIUM"
BROWSER = "browser"  # the capability a pipeline's hello names when it can render pages
DEBIAN = "/usr/bin/chromium"


class BrowserUnavailable(InvalidInput):
    """This machine cannot render pages: no Chromium, or no Playwright to drive it."""


def executable() -> str:
    """The Chromium to launch; raises :class:`BrowserUnavailable` saying what is missing."""
    if importlib.util.find_spec("playwright") is None:
        raise BrowserUnavailable(
            "browser capture needs Playwright to drive Chromium: pip install 'trawl[browser]'"
        )
    named = os.environ.get(ENV)
    if named:
        if not os.access(named, os.X_OK):
            raise BrowserUnavailable(f"{ENV}={named} is not an executable file")
        return named
    found = DEBIAN if os.access(DEBIAN, os.X_OK) else shutil.which("chromium")
    if found is None:
        raise BrowserUnavailable(
            f"no Chromium at {DEBIAN} or on the PATH (apt install chromium, or set {ENV})"
        )
    return found


def available() -> bool:
    """Whether :func:`executable` would find a browser (a pipeline's hello says so)."""
    try:
        executable()
    except BrowserUnavailable:
        return False
    return True
