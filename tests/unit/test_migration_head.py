from alembic.script import ScriptDirectory

from trawl.store import migrate


def test_head_constant_matches_the_newest_migration() -> None:
    # Commands check the schema against HEAD without importing alembic; keep them equal.
    assert ScriptDirectory(str(migrate.SCRIPTS)).get_current_head() == migrate.HEAD
