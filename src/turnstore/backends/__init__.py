"""Storage backends: one module per database engine (``sqlite``, ``postgres``) behind the
protocol in ``base``, and the operations they run (``append``, ``reads``, ``history``,
``schema``, ``queries``)."""

__all__: list[str] = []
