"""What LLM work costs in USD: each model's price, a batch's bound before it is sent, the spend.

A model's price is its spec's ``?price_in=&price_out=`` (USD per million prompt / completion
tokens), else the connection's ``price_per_mtok_in`` / ``price_per_mtok_out``
(``DUCKDB_SEM_PRICE_IN`` / ``DUCKDB_SEM_PRICE_OUT``), else none: a model without a price costs
$0, and so do models outside the connection's named ones (the estimator's, a cascade helper
given as a spec, the embedding model). Before a batch is sent, ``max_cost`` is checked against
its bound, as ``max_llm_calls`` is against its count: its fresh requests' estimated prompt
tokens at the prompt price plus the most each may generate (``max_tokens``) at the completion
price. What the backend reports it used is what the query spent (``QueryStats.cost_usd``).

Example: at $1,000 / $2,000 per million tokens, a yes/no request of 40 prompt tokens is bound
by ``(40 * 1000 + 1 * 2000) / 1e6 = $0.042``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.config import Settings
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.optimizer.spend import Price
from duckdb_sem.scheduler.models import DEFAULT_MODEL, Models
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["Pricing", "batch_bound", "model_price", "pricing", "spent"]

#: the price of the model a scheduler client serves (None: $0)
Pricing = Callable[[SchedulerClient], Price | None]


def model_price(models: Models, name: str | None, settings: Settings) -> Price | None:
    """Model ``name``'s price (None: the default model): its spec's, else ``settings``'
    (the connection's), else None."""
    own = models.price(name)
    if own is not None:
        return Price(own.prompt_per_mtok, own.completion_per_mtok,
                     source=f"price_in/price_out of model {name or 'default'}'s spec")  # fmt: skip
    if settings.price_per_mtok_in is None and settings.price_per_mtok_out is None:
        return None
    return Price(
        settings.price_per_mtok_in or 0.0,
        settings.price_per_mtok_out or 0.0,
        source="price_per_mtok_in/_out of connect(), or DUCKDB_SEM_PRICE_IN/_OUT",
    )


def pricing(models: Models) -> Pricing:
    """The price of whichever of ``models`` a client serves; another client's is None."""

    def price_of(client: SchedulerClient) -> Price | None:
        for name in models.names():
            if models.client(name) is client:
                return model_price(models, None if name == DEFAULT_MODEL else name,
                                   models.settings)  # fmt: skip
        return None

    return price_of


def batch_bound(requests: Sequence[LLMRequest], price: Price | None) -> float:
    """The most ``requests`` may cost: estimated prompt tokens plus ``max_tokens`` each."""
    if price is None or not requests:
        return 0.0
    prompt = sum(estimate_tokens(r.prefix) + estimate_tokens(r.row) for r in requests)
    return price.dollars(prompt, sum(r.params.max_tokens for r in requests))


def spent(completion: Completion, price: Price | None) -> float:
    """What one answer a backend ran cost, from the tokens it reported."""
    if price is None:
        return 0.0
    return price.dollars(completion.prompt_tokens, completion.completion_tokens)
