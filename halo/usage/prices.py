"""Model prices in USD per million tokens: defaults for well-known models, `llm.prices` on top.

A model with no known price costs `None`, never a guess: the usage figures say "unknown
price" for it and a budget cannot count it (halo says so at start-up).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from config.settings import ModelPrice

MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    cached_input: float
    output: float

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """`input_tokens` includes the cached ones, as providers report it."""
        fresh = max(0, input_tokens - cached_tokens)
        return (fresh * self.input + cached_tokens * self.cached_input + output_tokens * self.output) / MILLION


def _p(input: float, cached: float, output: float) -> Price:
    return Price(input, cached, output)


# list prices (USD per million tokens) at the time of writing; a family's halo.yaml overrides any
DEFAULT_PRICES: Mapping[str, Price] = {
    "gpt-4.1": _p(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
    "gpt-4o": _p(2.50, 1.25, 10.00),
    "gpt-4o-mini": _p(0.15, 0.075, 0.60),
    "gpt-5": _p(1.25, 0.125, 10.00),
    "gpt-5-mini": _p(0.25, 0.025, 2.00),
    "gpt-5-nano": _p(0.05, 0.005, 0.40),
    "o4-mini": _p(1.10, 0.275, 4.40),
    "o3": _p(2.00, 0.50, 8.00),
    "claude-opus-4-1": _p(15.00, 1.50, 75.00),
    "claude-sonnet-4-5": _p(3.00, 0.30, 15.00),
    "claude-sonnet-4-0": _p(3.00, 0.30, 15.00),
    "claude-haiku-4-5": _p(1.00, 0.10, 5.00),
    "claude-3-5-haiku-latest": _p(0.80, 0.08, 4.00),
}


class Prices:
    """The price of each model by name: halo.yaml's `llm.prices` first, then the defaults.
    A dated model name (`gpt-4.1-mini-2025-04-14`) takes its family's price. `configured` is
    the prices, or a reader called at each use (LiveSettings.prices: `llm.prices` applies live)."""

    def __init__(
        self, configured: Mapping[str, ModelPrice] | Callable[[], Mapping[str, ModelPrice]] | None = None
    ) -> None:
        self._configured = configured if callable(configured) else _Fixed(configured or {})
        self._built: tuple[Mapping[str, ModelPrice], dict[str, Price]] | None = None

    @property
    def _prices(self) -> dict[str, Price]:
        configured = self._configured()
        if self._built is None or self._built[0] is not configured:
            prices = dict(DEFAULT_PRICES)
            for name, price in configured.items():
                cached = price.cached_input if price.cached_input is not None else price.input
                prices[name] = Price(price.input, cached, price.output)
            self._built = (configured, prices)
        return self._built[1]

    def of(self, model: str) -> Price | None:
        prices = self._prices
        name = model.split("/", 1)[-1]  # "anthropic/claude-…" as the bridge names it
        if name in prices:
            return prices[name]
        # the longest known name the model's name extends with a date or version suffix
        for known in sorted(prices, key=len, reverse=True):
            if name.startswith(known + "-") and name[len(known) + 1 : len(known) + 2].isdigit():
                return prices[known]
        return None

    def cost(self, model: str, input_tokens: int, cached_tokens: int, output_tokens: int) -> float | None:
        """USD, or None when the model's price is unknown."""
        price = self.of(model)
        return None if price is None else price.cost(input_tokens, cached_tokens, output_tokens)


@dataclass(frozen=True, slots=True)
class _Fixed:
    """Prices given once (a test, a bench): the same mapping at every use."""

    prices: Mapping[str, ModelPrice]

    def __call__(self) -> Mapping[str, ModelPrice]:
        return self.prices
