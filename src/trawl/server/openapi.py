"""The OpenAPI document's error answers: every operation may answer with RFC 9457 problem
details (``application/problem+json``), and the document says so, with their schema, so
clients and schema checkers know the shape of a 400 as well as of a 200."""

from __future__ import annotations

from litestar import Litestar
from litestar.openapi.spec import (
    Components,
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Reference,
    Schema,
)

from trawl.server.problems import MEDIA_TYPE

PROBLEM = "Problem"
# status -> when an operation answers it
_ANSWERS = {
    "400": "The request was malformed or its values were refused (detail names which).",
    "401": "No bearer token, or an unknown or revoked one.",
    "403": "The token's scope is too small for this.",
    "404": "What the path names does not exist.",
    "405": "The path exists but not with this method.",
    "409": "The request conflicts with what is stored.",
    "413": "The request body is too large.",
    "500": "The server failed; its log has the traceback.",
    "503": "The database is unavailable.",
}
_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    required=["type", "title", "status", "detail"],
    properties={
        "type": Schema(type=OpenAPIType.STRING, description="A URI naming the kind of error."),
        "title": Schema(type=OpenAPIType.STRING),
        "status": Schema(type=OpenAPIType.INTEGER),
        "detail": Schema(type=OpenAPIType.STRING, description="What was wrong, by name."),
        "instance": Schema(type=OpenAPIType.STRING),
    },
    description="RFC 9457 problem details.",
)


def document_problems(app: Litestar) -> OpenAPI:
    """Add the problem answers to every operation of *app*'s document (once, at startup)."""
    document = app.openapi_schema
    components = document.components
    if isinstance(components, list) or components is None:  # one Components, as trawl builds
        components = Components()
        document.components = components
    components.schemas = {**(components.schemas or {}), PROBLEM: _SCHEMA}
    media = {MEDIA_TYPE: OpenAPIMediaType(schema=Reference(f"#/components/schemas/{PROBLEM}"))}
    for path, item in (document.paths or {}).items():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method, None)
            if operation is None:
                continue
            responses = dict(operation.responses or {})
            for status, description in _ANSWERS.items():
                if path == "/health" and status not in ("400", "405", "500"):
                    continue  # needs no token; a 503 there is its own Health answer
                responses[status] = OpenAPIResponse(description=description, content=media)
            operation.responses = responses
    return document
