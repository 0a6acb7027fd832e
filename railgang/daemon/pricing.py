"""GPU prices by type and capacity tier, shared by the simulator (``railgang sim --price``) and
the Slurm backend (``[slurm] prices``), so a priced tier means the same thing in both.

Prices are USD per GPU-hour on demand: :data:`ON_DEMAND_USD` by type (2020 cloud list prices for
the GPU alone; types it does not list cost the seed's $2). Reserved capacity costs
:data:`RESERVED_FACTOR` of on-demand (a one-year commitment), spot :data:`SPOT_FACTOR` (the
seed's 65 % discount). ``TYPE[:TIER]=USD`` overrides any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from railgang.daemon.core.model.tiers import ON_DEMAND, RESERVED, SPOT, TIERS, TierTerms
from railgang.errors import ConfigError

ON_DEMAND_USD: Mapping[str, float] = {"k80": 0.45, "p100": 1.46, "v100": 2.48, "t4": 0.35,
                                      "a100": 2.93, "h100": 4.0}
DEFAULT_USD = 2.0  # DESIGN R-S9's on-demand price
RESERVED_FACTOR = 0.6
SPOT_FACTOR = 0.35


def parse_prices(text: str | None) -> dict[tuple[str, str], float]:
    """``v100=2.48,v100:spot=0.9`` -> {(type, tier): USD per GPU-hour}."""
    out: dict[tuple[str, str], float] = {}
    for part in (p.strip().lower() for p in (text or "").split(",") if p.strip()):
        name, _, value = part.partition("=")
        gpu_type, _, tier = name.partition(":")
        try:
            usd = float(value)
        except ValueError:
            usd = -1.0
        if not gpu_type or usd < 0 or (tier and tier not in TIERS):
            raise ConfigError(f"--price: {part!r} is not TYPE[:TIER]=USD (e.g. v100:spot=0.9)")
        out[(gpu_type, tier or ON_DEMAND)] = usd
    return out


def price(gpu_type: str, tier: str, overrides: Mapping[tuple[str, str], float]) -> float:
    if (gpu_type, tier) in overrides:
        return overrides[(gpu_type, tier)]
    base = overrides.get((gpu_type, ON_DEMAND), ON_DEMAND_USD.get(gpu_type, DEFAULT_USD))
    factors: dict[str, float] = {RESERVED: RESERVED_FACTOR, SPOT: SPOT_FACTOR}
    return base * factors.get(tier, 1.0)


def tier_terms(types: Iterable[str], tiers: Iterable[str],
               overrides: Mapping[tuple[str, str], float], *,
               spot_per_node_day: float = 0.0, spot_notice_s: float = 120.0) -> dict[str, TierTerms]:
    """The terms of each tier in ``tiers`` and of on-demand (spot's yardstick), priced per type."""
    kinds = set(types)
    return {tier: TierTerms({t: price(t, tier, overrides) for t in kinds},
                            spot_per_node_day if tier == SPOT else 0.0,
                            spot_notice_s if tier == SPOT else 0.0)
            for tier in sorted(set(tiers) | {ON_DEMAND})}


__all__ = ["DEFAULT_USD", "ON_DEMAND_USD", "RESERVED_FACTOR", "SPOT_FACTOR", "parse_prices",
           "price", "tier_terms"]
