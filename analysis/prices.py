"""The per-model price table used for run cost (USD per million tokens).

Built-in defaults below, overridden entry by entry by ``prices.toml`` in driftdesk's config dir::

    [models."gpt-4o"]
    input_per_mtok = 2.50
    output_per_mtok = 10.00

A model matches an entry exactly, else the longest entry that is a prefix of it followed by
``-`` (so ``claude-sonnet-4-20250514`` is priced as ``claude-sonnet-4``). A model with no entry
has no cost: the run's cost is then null (unknown), never 0.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

PRICES_FILE = "prices.toml"

# Public list prices at the time of writing; edit prices.toml when yours differ.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
}


class PriceTableError(ValueError):
    """prices.toml exists but cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6


def prices_path() -> Path:
    from driftdesk.paths import config_dir

    return config_dir() / PRICES_FILE


def load_prices(path: Path | None = None) -> dict[str, ModelPrice]:
    """Defaults overlaid with the user's table. A broken file is refused, never half-used."""
    table = {name: ModelPrice(*pair) for name, pair in DEFAULT_PRICES.items()}
    path = path or prices_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return table
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PriceTableError(f"{path}: not valid TOML: {exc}") from exc
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PriceTableError(f"{path}: [models] must be a table of models")
    for name, entry in models.items():
        try:
            table[name] = ModelPrice(
                float(entry["input_per_mtok"]), float(entry["output_per_mtok"])
            )
        except (TypeError, KeyError, ValueError) as exc:
            raise PriceTableError(
                f"{path}: [models.{name!r}] needs numbers input_per_mtok and output_per_mtok"
            ) from exc
    return table


def price_for(model: str | None, table: dict[str, ModelPrice]) -> ModelPrice | None:
    if not model:
        return None
    if model in table:
        return table[model]
    prefixes = [name for name in table if model.startswith(name + "-")]
    return table[max(prefixes, key=len)] if prefixes else None
