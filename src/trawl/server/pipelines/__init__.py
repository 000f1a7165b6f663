"""Remote pipelines at the tracker server: the WebSocket endpoint at ``/pipeline``, the
session that claims and commits on a pipeline's behalf, and the routing of work to it."""
