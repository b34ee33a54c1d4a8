"""The domain core, free of any driver: every operation written once as a generator of queries.

``ops`` is the seam (``Query``, ``Op``, ``Statement``, ``Capability``, the ``Backend``
protocol); ``statements`` declares every SQL statement (its symbol, fetch kind and row type)
and ``dialect`` renders a backend's SQL table from them; ``codec`` turns items into stored
JSON and back; ``rows`` builds records from rows; ``lock`` reads and moves a session's head.

The operations: ``plan`` (an append planned, pure) and ``append`` (batches and grafts
written), with what rides on a write: ``telemetry``, ``catalogue`` fields and the
``search_index`` backlog; ``reads`` (the active path, the tree, the viewer's windows);
``history`` (pop, clear, fork, move the head, delete a branch); ``compaction``; ``once``
(exactly-once writes); ``adoption`` (an SDK file's sessions taken over); ``schema``
(migrations); ``queries`` (catalogue, tool calls, usage, export data) and ``search``.
docs/design.md maps the whole package.
"""

__all__: list[str] = []
