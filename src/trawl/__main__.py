"""``python -m trawl``: the same as the ``trawl`` command."""

from trawl.cli.main import main

raise SystemExit(main())
