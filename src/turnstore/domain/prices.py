"""Model prices and what a run's tokens cost, pure: the price table and the cost formula.

A ``Prices`` table maps a model name and a day to a ``Price`` in USD per million input,
cached-input, output and reasoning tokens. turnstore ships a dated default (``prices.json``
beside this module, ``Prices.default()``); a user's entries (``with_entries``, a JSON file
read by ``Prices.load``) are layered over it: where both price a model on a day, the later
layer wins. A model no layer prices costs ``None`` (unknown), never zero.

The formula follows how the Agents SDK reports usage: ``input_tokens`` includes the cached
ones (``input_tokens_details.cached_tokens``) and ``output_tokens`` includes the reasoning
ones (``output_tokens_details.reasoning_tokens``), so::

    cost = ((input - cached) * input_price + cached * cached_input_price
            + (output - reasoning) * output_price + reasoning * reasoning_price) / 1e6

A price file is JSON: ``{"prices": [{"model": "gpt-4o", "input": 2.5, "cached_input": 1.25,
"output": 10, "reasoning": 10, "valid_from": "2024-10-01", "valid_until": null}, ...]}`` (or
the list alone). ``cached_input`` defaults to ``input`` and ``reasoning`` to ``output``;
``valid_from`` is inclusive, ``valid_until`` exclusive (UTC days), either may be absent.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ArgumentTypeError, InvalidOperationError
from . import validate
from .model import Usage

__all__ = ["Price", "Prices", "cost_at", "cost_of", "cost_text", "unknown_cost_reason"]

_FIELDS = ("model", "input", "cached_input", "output", "reasoning", "valid_from", "valid_until")
# A dated snapshot (gpt-4o-2024-08-06) is priced as its model where not priced itself.
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_PROVIDER = "openai/"  # LiteLLM-style model names (openai/gpt-4o)


@dataclass(frozen=True, slots=True)
class Price:
    """A model's prices in USD per million tokens, from ``valid_from`` (inclusive, None: ever)
    until ``valid_until`` (exclusive, None: still valid)."""

    model: str
    input: float
    cached_input: float
    output: float
    reasoning: float
    valid_from: date | None = None
    valid_until: date | None = None

    def applies(self, day: date) -> bool:
        """Whether the price holds on ``day``."""
        return (self.valid_from is None or self.valid_from <= day) and (
            self.valid_until is None or day < self.valid_until
        )

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at this price, in USD (the module's formula)."""
        return cost_of(usage, self)


def cost_of(usage: Usage, price: Price) -> float:
    """What ``usage`` costs at ``price``, in USD: cached input tokens are part of the input
    tokens and reasoning tokens part of the output tokens (as the SDK reports them)."""
    cached = min(usage.cached_tokens, usage.input_tokens)
    reasoning = min(usage.reasoning_tokens, usage.output_tokens)
    millionths = (
        (usage.input_tokens - cached) * price.input
        + cached * price.cached_input
        + (usage.output_tokens - reasoning) * price.output
        + reasoning * price.reasoning
    )
    return millionths / 1_000_000


def cost_at(usage: Usage, price: Price | None) -> float | None:
    """What ``usage`` costs at ``price`` in USD: 0 for no tokens, None (unknown) for tokens
    with no price."""
    if not (usage.input_tokens or usage.output_tokens):
        return 0.0
    return None if price is None else cost_of(usage, price)


def cost_text(usd: float) -> str:
    """A cost as the CLI and the viewer show it: cents from a dollar, else the figure to the
    millionth of a dollar (a run's cost is often a fraction of a cent)."""
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd == 0:
        return "$0"
    if usd < 0.000_001:
        return "<$0.000001"
    return "$" + f"{usd:.6f}".rstrip("0")


def unknown_cost_reason(unpriced: Iterable[str | None]) -> str:
    """Why a cost is unknown, from its ``unpriced`` models (None: runs with no model recorded,
    written without ``session.hooks``)."""
    names = list(unpriced)
    parts = []
    models = [repr(name) for name in names if name is not None]
    if models:
        parts.append("no price for " + ", ".join(models))
    if None in names:
        parts.append("tokens with no model recorded")
    return "; ".join(parts) or "a model with no price"


class Prices:
    """A price table: layers of ``Price`` entries, the later layer winning where two apply.

    ``Prices.default()`` is turnstore's shipped table (``as_of`` says when its prices were
    taken); ``with_entries`` layers more over it; ``Prices.load(path)`` reads a price file.
    """

    __slots__ = ("_layers", "as_of")

    def __init__(
        self, entries: Iterable[Price | Mapping[str, Any]] = (), *, as_of: str | None = None
    ):
        """A table of one layer, ``entries`` (``Price`` records or price-file mappings)."""
        self._layers: tuple[tuple[Price, ...], ...] = (_layer(entries, "prices"),)
        self.as_of = as_of

    @classmethod
    def default(cls) -> Prices:
        """turnstore's shipped price table (``prices.json``), dated by ``as_of``."""
        return _shipped()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Prices:
        """The price file at ``path`` as a table of its own (layer it over the default with
        ``Prices.default().with_entries(Prices.load(path))``)."""
        try:
            text = Path(path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InvalidOperationError(
                f"cannot read the price file {str(path)!r}: {error}"
            ) from None
        return cls.from_json(text, f"price file {str(path)!r}")

    @classmethod
    def from_json(cls, text: str, what: str = "prices") -> Prices:
        """The table a price file's JSON ``text`` holds (see the module's docstring)."""
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError) as error:
            raise InvalidOperationError(f"{what} is not valid JSON: {error}") from None
        as_of = None
        if isinstance(data, dict):
            unknown = set(data) - {"prices", "as_of", "source", "unit"}
            if unknown or "prices" not in data:
                raise InvalidOperationError(
                    f"{what} must hold a 'prices' list (and optionally as_of, source, unit), "
                    f"got keys {validate.shown(sorted(data))}"
                )
            as_of = validate.optional_text(data.get("as_of"), f"{what}'s as_of")
            data = data["prices"]
        if not isinstance(data, list):
            raise ArgumentTypeError(f"{what} must hold a list of prices, got {type(data).__name__}")
        table = cls(as_of=as_of)
        table._layers = (_layer(data, what),)
        return table

    def with_entries(self, entries: Prices | Iterable[Price | Mapping[str, Any]]) -> Prices:
        """This table with ``entries`` layered over it: they win where both price a model on
        a day. ``entries``: another table, ``Price`` records or price-file mappings."""
        layers = entries._layers if isinstance(entries, Prices) else (_layer(entries, "prices"),)
        table = Prices(as_of=self.as_of)
        table._layers = self._layers + layers
        return table

    @property
    def entries(self) -> list[Price]:
        """Every entry, the lowest layer first."""
        return [price for layer in self._layers for price in layer]

    def price(self, model: str | None, day: date) -> Price | None:
        """The price of ``model`` on ``day``: its own name first, then without an ``openai/``
        prefix or a snapshot's date (``gpt-4o-2024-08-06`` → ``gpt-4o``); None if unpriced."""
        if model is None:
            return None
        for name in _names(model):
            for layer in reversed(self._layers):
                for price in layer:
                    if price.model == name and price.applies(day):
                        return price
        return None

    def cost(self, model: str | None, day: date, usage: Usage) -> float | None:
        """What ``usage`` of ``model`` on ``day`` costs in USD; 0 for no tokens, None for
        tokens of a model with no price."""
        return cost_at(usage, self.price(model, day))

    def __repr__(self) -> str:
        return f"Prices({len(self.entries)} entries, as_of={self.as_of!r})"


@functools.cache
def _shipped() -> Prices:
    # Read once: a table is never changed in place (with_entries makes a new one).
    text = resources.files(__package__).joinpath("prices.json").read_text("utf-8")
    return Prices.from_json(text, "turnstore's prices.json")


def _names(model: str) -> list[str]:
    names = [model]
    if model.startswith(_PROVIDER):
        names.append(model[len(_PROVIDER) :])
    names.extend(_SNAPSHOT.sub("", name) for name in list(names) if _SNAPSHOT.search(name))
    return names


def _no_constant(name: str) -> Any:
    raise InvalidOperationError(f"a price file may not hold {name}")


def _layer(entries: Any, what: str) -> tuple[Price, ...]:
    if isinstance(entries, (str, bytes, Mapping)) or not isinstance(entries, Iterable):
        raise ArgumentTypeError(f"{what} must be a list of prices, got {type(entries).__name__}")
    layer = tuple(
        entry if isinstance(entry, Price) else _entry(entry, f"{what}[{index}]")
        for index, entry in enumerate(entries)
    )
    for price in layer:
        _check(price, f"{what} ({price.model})")
    by_model: dict[str, list[Price]] = {}
    for price in layer:
        by_model.setdefault(price.model, []).append(price)
    for model, prices in by_model.items():
        ordered = sorted(prices, key=lambda p: p.valid_from or date.min)
        for before, after in itertools.pairwise(ordered):
            if before.valid_until is None or (after.valid_from or date.min) < before.valid_until:
                raise InvalidOperationError(
                    f"{what}: the prices of {model!r} overlap in time ({_span(before)} and "
                    f"{_span(after)}): each day may have one price"
                )
    return layer


def _span(price: Price) -> str:
    return f"{price.valid_from or '…'} to {price.valid_until or '…'}"


def _entry(value: Any, what: str) -> Price:
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{what} must be an object, got {type(value).__name__}")
    unknown = set(value) - set(_FIELDS)
    if unknown:
        raise InvalidOperationError(
            f"{what} has unknown fields {validate.shown(sorted(map(str, unknown)))}; "
            f"a price has {', '.join(_FIELDS)}"
        )
    for required in ("model", "input", "output"):
        if value.get(required) is None:
            raise InvalidOperationError(f"{what} needs {required!r}")
    model = validate.text(value["model"], f"{what}'s model")
    input_price = _amount(value["input"], f"{what}'s input")
    output_price = _amount(value["output"], f"{what}'s output")
    cached = value.get("cached_input")
    reasoning = value.get("reasoning")
    return Price(
        model=model,
        input=input_price,
        cached_input=input_price if cached is None else _amount(cached, f"{what}'s cached_input"),
        output=output_price,
        reasoning=output_price if reasoning is None else _amount(reasoning, f"{what}'s reasoning"),
        valid_from=_day(value.get("valid_from"), f"{what}'s valid_from"),
        valid_until=_day(value.get("valid_until"), f"{what}'s valid_until"),
    )


def _check(price: Price, what: str) -> None:
    validate.text(price.model, f"{what}'s model")
    if not price.model:
        raise InvalidOperationError(f"{what}'s model must not be empty")
    for name in ("input", "cached_input", "output", "reasoning"):
        _amount(getattr(price, name), f"{what}'s {name}")
    for name in ("valid_from", "valid_until"):
        if getattr(price, name) is not None and not isinstance(getattr(price, name), date):
            raise ArgumentTypeError(f"{what}'s {name} must be a date or None")
    if price.valid_from and price.valid_until and price.valid_from >= price.valid_until:
        raise InvalidOperationError(
            f"{what}'s valid_from {price.valid_from} must come before valid_until "
            f"{price.valid_until}"
        )


def _amount(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{what} must be a number, got {validate.shown(value)}")
    number = validate.finite(value)
    if number is None or number < 0:
        raise InvalidOperationError(
            f"{what} must be a finite number of USD from 0, got {validate.shown(value)}"
        )
    return number


def _day(value: Any, what: str) -> date | None:
    if value is None or isinstance(value, date):
        return value
    text = validate.text(value, what)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidOperationError(
            f"{what} must be a YYYY-MM-DD day, got {validate.shown(value)}"
        ) from None
