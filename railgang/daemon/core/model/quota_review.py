"""Use it or lose it (DESIGN R-Q3): which guarantees sit idle long enough to be proposed back.

A pure function over measured use: a team whose mean allocation over the last ``window_s``
(72 h) stayed under ``threshold`` (20 %) of its guarantee gets a :class:`LoseItProposal`. The
core never takes a guarantee away itself: the daemon records the proposal as a quota event and
an admin approves or rejects it. A team whose history does not cover the whole window gets no
proposal (too little evidence), nor does a team without a guarantee.

Use is a step function: ``UsageSample(time, gpus)`` holds from its time to the next sample's
(the last one to ``now``), e.g. the GPUs each cycle saw the team hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.daemon.core.model.quota import QuotaTree


@dataclass(frozen=True, slots=True)
class LoseItRules:
    threshold: float = 0.2  # share of the guarantee under which a team counts as idle
    window_s: float = 72 * 3600.0  # how long it must stay under it


@dataclass(frozen=True, slots=True)
class UsageSample:
    time: float
    gpus: int  # GPUs the account held from ``time`` on


@dataclass(frozen=True, slots=True)
class LoseItProposal:
    account: str
    guaranteed: int
    mean_gpus: float  # mean allocation over the window
    since: float  # window start
    until: float  # window end (now)

    @property
    def share(self) -> float:
        return self.mean_gpus / self.guaranteed

    def detail(self) -> str:
        hours = (self.until - self.since) / 3600
        return (f"{self.account} used {self.mean_gpus:.1f} of its {self.guaranteed} guaranteed GPUs "
                f"on average over {hours:.0f} h ({self.share:.0%}); propose returning the "
                "guarantee to the shared pool")


def mean_use(samples: Sequence[UsageSample], start: float, end: float) -> float | None:
    """Time-weighted mean of the step function over [start, end]; None if it starts later."""
    if end <= start or not samples or samples[0].time > start:
        return None
    area = 0.0
    for i, s in enumerate(samples):
        lo = max(s.time, start)
        hi = min(samples[i + 1].time if i + 1 < len(samples) else end, end)
        if hi > lo:
            area += s.gpus * (hi - lo)
    return area / (end - start)


def lose_it_proposals(tree: QuotaTree, history: Mapping[str, Sequence[UsageSample]], now: float,
                      rules: LoseItRules = LoseItRules()) -> list[LoseItProposal]:
    """One proposal per team with a guarantee that stayed under the threshold (name order)."""
    start = now - rules.window_s
    means = {}
    for name in tree.nodes:
        mean = mean_use(sorted(history.get(name, ()), key=lambda s: s.time), start, now)
        if mean is not None:
            means[name] = mean
    return proposals_from_means(tree, means, now, rules)


def proposals_from_means(tree: QuotaTree, means: Mapping[str, float], now: float,
                         rules: LoseItRules = LoseItRules()) -> list[LoseItProposal]:
    """The same rule on mean allocations already measured over the window ending at ``now``
    (e.g. from the usage ledger); a team missing from ``means`` has no evidence, no proposal."""
    out = []
    for name, node in tree.nodes.items():
        mean = means.get(name)
        if node.level != "team" or node.guaranteed <= 0 or mean is None:
            continue
        if mean < rules.threshold * node.guaranteed:
            out.append(LoseItProposal(name, node.guaranteed, mean, now - rules.window_s, now))
    return out


__all__ = ["LoseItProposal", "LoseItRules", "UsageSample", "lose_it_proposals", "mean_use",
           "proposals_from_means"]
