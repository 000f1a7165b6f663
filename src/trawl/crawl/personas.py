"""Personas: how a crawl presents itself to a site - a user agent and, in a browser, a
viewport - named so a rule can pick one (``--user-agent-preset desktop-chrome``).

The user agent goes on plain fetches too, so a page and the pages it links to see the same
client whichever way they are fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

from trawl.model.errors import InvalidInput

_CHROME = "Chrome/131.0.0.0"


@dataclass(frozen=True, kw_only=True, slots=True)
class Persona:
    user_agent: str
    width: int
    height: int
    mobile: bool = False
    scale: float = 1.0


PRESETS: dict[str, Persona] = {
    "desktop-chrome": Persona(
        user_agent="Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"{_CHROME} Safari/537.36",
        width=1366,
        height=768,
    ),
    "desktop-firefox": Persona(
        user_agent="Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        width=1366,
        height=768,
    ),
    "mobile-chrome": Persona(
        user_agent="Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like "
        f"Gecko) {_CHROME} Mobile Safari/537.36",
        width=412,
        height=915,
        mobile=True,
        scale=2.625,
    ),
}
DEFAULT = Persona(user_agent="", width=1280, height=800)  # a browser page with no preset


def preset(name: str) -> Persona:
    """The preset called *name*; an unknown name is refused with the names there are."""
    found = PRESETS.get(name)
    if found is None:
        raise InvalidInput(
            f"unknown user agent preset {name!r}; there are: {', '.join(sorted(PRESETS))}"
        )
    return found
