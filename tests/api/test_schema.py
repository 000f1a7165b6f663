"""schemathesis against the server's own OpenAPI document, with a valid admin token: no
request it makes up may crash the server, and every answer must match the document.

The operations are driven one by one from the loaded schema (schemathesis's pytest plugin
does not run under pytest 9), each with its own Hypothesis run of EXAMPLES cases."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import make_tokens, serving
from tests.integration.helpers import item
from trawl.store.store import Store

EXAMPLES = 25  # per operation: under two minutes for the whole API on this machine
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


@pytest.mark.slow
def test_the_api_keeps_to_its_document(sqlite_url: str) -> None:
    tokens = make_tokens(sqlite_url)
    with Store(sqlite_url) as store:
        store.add_items([item(f"sku:{n}", "product") for n in range(3)])
    headers = {"Authorization": f"Bearer {tokens['admin']}"}
    with serving(sqlite_url, token_cache=60.0) as base:
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json", headers=headers)
        # The event stream never ends by design; test_stream.py follows it instead.
        operations = [
            op
            for op in (result.ok() for result in schema.get_all_operations())
            if op.path != "/journal/stream"
        ]
        assert len(operations) > 30  # the document lists the API, not an empty shell
        failures: dict[str, str] = {}
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(base_url=base, headers=headers, checks=CHECKS)

            try:
                check()
            except (Exception, BaseExceptionGroup) as error:  # each operation's first failure
                failures[operation.label] = str(error)[:2000]
        assert not failures, "\n\n".join(f"{op}:\n{why}" for op, why in failures.items())
