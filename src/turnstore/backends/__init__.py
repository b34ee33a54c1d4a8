"""Storage backends: one module per database engine, behind the protocol in ``base``."""

__all__: list[str] = []
