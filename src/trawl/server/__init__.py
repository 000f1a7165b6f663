"""The HTTP API: a Litestar application over the store and the engine's edit verbs.

Every write goes through the same store verbs and effects as the CLI, so there is one set of
rules. Modules: ``app`` builds the application, ``stores`` lends database connections to
requests, ``auth`` checks bearer tokens, ``problems`` turns errors into RFC 9457 responses,
``cursors`` encodes page cursors, and ``routes/`` holds one module per resource.
"""
