"""What tokens cost: the price table shipped with hostcore, and overrides from config.

``prices.json`` beside this module is dated (``as_of``) and gives, per model, the
US dollars a million tokens of each kind cost (input, output, cache creation,
cache read) and, for models billed higher past a long-context threshold of one
response, the prices of the tokens past it. ``[plugins.usage.prices.MODEL]`` in
the config adds a model or replaces one's prices. A model the table does not
know has no price: a report shows its tokens and no cost, never a guess.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from hostcore.evidence.usage_fields import TIER_THRESHOLD

__all__ = ["Price", "PriceTable", "UsageSettings", "load_prices"]

PRICES_FILE = Path(__file__).with_name("prices.json")
# A model name's release date (claude-sonnet-4-5-20250929): the table names a
# model once, without it.
_DATED = re.compile(r"-\d{8}$")
# A provider's prefix some tools put before the model (anthropic/claude-...).
_PROVIDER = re.compile(r"^(anthropic|openai)[/.]")


class Price(msgspec.Struct, forbid_unknown_fields=True):
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_creation: float = 0.0
    cache_read: float = 0.0
    # The prices of a response's tokens past the threshold, where they differ.
    above_tier: Price | None = None


class PriceTable(msgspec.Struct, forbid_unknown_fields=True):
    as_of: str
    currency: str
    per_tokens: int
    tier_threshold: int
    models: dict[str, Price]

    def price_of(self, model: str) -> Price | None:
        """The prices of ``model``: its own entry, else that of its name without a
        release date or provider prefix; ``None`` when the table has neither."""
        for name in (model, _PROVIDER.sub("", model)):
            found = self.models.get(name) or self.models.get(_DATED.sub("", name))
            if found is not None:
                return found
        return None

    def cost(self, model: str, counts: tuple[int, int, int, int],
             above: tuple[int, int, int, int]) -> float | None:
        """The cost in dollars of ``counts`` tokens of each kind, of which ``above``
        were past the threshold in their response; ``None`` for an unknown model."""
        price = self.price_of(model)
        return None if price is None else self.cost_at(price, counts, above)

    def cost_at(self, price: Price, counts: tuple[int, int, int, int],
                above: tuple[int, int, int, int]) -> float:
        """:meth:`cost` at ``price`` (looked up once by a caller with many lines)."""
        tier = price.above_tier or price
        rates = (price.input, price.output, price.cache_creation, price.cache_read)
        tier_rates = (tier.input, tier.output, tier.cache_creation, tier.cache_read)
        total = sum((n - past) * rate + past * tier_rate for n, past, rate, tier_rate
                    in zip(counts, above, rates, tier_rates, strict=True))
        return total / self.per_tokens


class UsageSettings(msgspec.Struct, forbid_unknown_fields=True):
    """``[plugins.usage]``: prices per model that replace or add to the shipped ones."""

    prices: dict[str, Price] = msgspec.field(default_factory=dict)


def load_prices(overrides: dict[str, Price] | None = None) -> PriceTable:
    """The shipped table with ``overrides`` put over it."""
    table = msgspec.json.decode(PRICES_FILE.read_bytes(), type=PriceTable)
    if table.tier_threshold != TIER_THRESHOLD:
        # Rows keep the tokens past TIER_THRESHOLD: a table for another one is a bug.
        raise ValueError(f"{PRICES_FILE}: tier_threshold {table.tier_threshold} is not "
                         f"{TIER_THRESHOLD}")
    if overrides:
        table.models = {**table.models, **overrides}
    return table
