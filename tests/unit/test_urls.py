import pytest

from trawl.model.errors import InvalidInput
from trawl.store import url


def test_backends_and_drivers() -> None:
    assert url.parse("sqlite:///trawl.db")[1] == "sqlite"
    parsed, dialect = url.parse("postgresql://u@h/db")
    assert dialect == "postgresql"
    assert parsed.drivername == "postgresql+psycopg"


@pytest.mark.parametrize(("bad", "said"), [("mysql://h/db", "unsupported"), ("::", "cannot parse")])
def test_bad_urls_say_what_works(bad: str, said: str) -> None:
    with pytest.raises(InvalidInput, match=said):
        url.parse(bad)


def test_display_hides_password() -> None:
    assert "secret" not in url.display("postgresql://u:secret@h/db")
