"""Failure rates of a GPU fleet, calibrated from a published run, and the ``--failures`` spec.

Defaults come from Llama 3's pre-training (Meta, "The Llama 3 Herd of Models", 2024, §3.3.4):
54 days on 16,384 H100s, 419 unexpected interruptions, 58.7 % of them GPU-related (faulty GPUs,
HBM3, SRAM, GPU system processor, thermal, silent data corruption) and 35 (8.4 %) network
switches and cables; the rest hosts and software. Each cause takes down a failure domain:

- a GPU fault takes down its node (the rank dies; the node goes out for repair);
- a host or software fault takes down its node;
- a switch or cable fault takes down every node under its leaf (the pessimistic reading: the
  paper does not say how many nodes each one cut off).

The rates are per GPU-hour, per node-hour and per leaf-hour of the calibrating fleet (2,048 nodes
of 8 GPUs, leaves of 32 nodes: the fleet of issue 20), so a fleet of another shape fails in
proportion. Repair times are not published: the defaults (a node out 4 h, a leaf 1 h) are
assumptions, and the spec can change them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

__all__ = ["LLAMA3", "FailureRates", "llama3_rates", "parse_duration", "parse_failures"]

# Llama 3 (the paper's figures) and the fleet the rates are spread over
LLAMA3_INTERRUPTIONS = 419
LLAMA3_HOURS = 54 * 24.0
LLAMA3_GPUS = 16_384
LLAMA3_GPU_SHARE = 0.587
LLAMA3_NETWORK_SHARE = 35 / 419
LLAMA3_GPUS_PER_NODE = 8
LLAMA3_LEAF_NODES = 32
MAX_SECONDS = 1e9  # a repair or delay past 31 years is a typo, not a setting


@dataclass(frozen=True, slots=True)
class FailureRates:
    """A fleet's failure process: independent Poisson processes per GPU, node and leaf."""

    per_gpu_h: float  # GPU faults per GPU-hour (XID, HBM/ECC, NVLink): the node goes down
    per_node_h: float  # host, NIC and software faults per node-hour: the node goes down
    per_leaf_h: float  # switch or cable faults per leaf-hour: every node of the leaf goes down
    repair_s: float = 4 * 3600.0  # mean time a failed node stays out (exponential)
    leaf_repair_s: float = 3600.0  # mean time a failed leaf stays out (exponential)

    def node_per_h(self, gpus_per_node: int) -> float:
        """Failures per hour that take one node of ``gpus_per_node`` GPUs down on its own."""
        return self.per_gpu_h * gpus_per_node + self.per_node_h

    def mtbf_s(self, nodes: int, gpus_per_node: int, leaves: int) -> float:
        """Mean time between failures that hit a job on ``nodes`` nodes under ``leaves`` leaves
        (the superposition of their Poisson processes); ``inf`` when nothing can fail."""
        rate = nodes * self.node_per_h(gpus_per_node) + leaves * self.per_leaf_h
        return math.inf if rate <= 0 else 3600.0 / rate

    def fleet_per_h(self, nodes: int, gpus_per_node: int, leaf_nodes: int) -> float:
        """Failures per hour over a whole fleet (leaves of ``leaf_nodes`` nodes)."""
        leaves = math.ceil(nodes / max(1, leaf_nodes))
        return nodes * self.node_per_h(gpus_per_node) + leaves * self.per_leaf_h


def llama3_rates() -> FailureRates:
    """The rates that give Llama 3's 419 interruptions in 54 days on its 16,384-GPU fleet."""
    total = LLAMA3_INTERRUPTIONS / LLAMA3_HOURS  # per hour over the fleet
    nodes = LLAMA3_GPUS // LLAMA3_GPUS_PER_NODE
    leaves = nodes // LLAMA3_LEAF_NODES
    host_share = 1.0 - LLAMA3_GPU_SHARE - LLAMA3_NETWORK_SHARE
    return FailureRates(per_gpu_h=total * LLAMA3_GPU_SHARE / LLAMA3_GPUS,
                        per_node_h=total * host_share / nodes,
                        per_leaf_h=total * LLAMA3_NETWORK_SHARE / leaves)


LLAMA3 = llama3_rates()

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*([smhd]?)\s*$")
_RATE_KEYS = {"gpu": "per_gpu_h", "node": "per_node_h", "leaf": "per_leaf_h"}
_TIME_KEYS = {"repair": "repair_s", "leaf-repair": "leaf_repair_s"}
SPEC_HELP = ("llama3 (the default rates), optionally followed by KEY=VALUE: gpu, node, leaf "
             "(failures per GPU-, node-, leaf-hour), repair, leaf-repair (mean time out: 4h, "
             "90m), scale (multiplies every rate); e.g. llama3,repair=2h or "
             "gpu=1e-5,node=5e-5,leaf=0")


def parse_duration(text: str, what: str) -> float:
    """Seconds of ``30``, ``90s``, ``15m``, ``4h``, ``2d``; ``ValueError`` naming ``what``."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{what} {text!r}: expected a duration such as 90s, 15m or 4h")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise ValueError(f"{what} {text!r}: longer than {MAX_SECONDS:g} s")
    return seconds


def _rate(text: str, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--failures {key}={text!r}: expected a number") from None
    if not math.isfinite(value) or value < 0 or value > 1.0:
        raise ValueError(f"--failures {key}={text!r}: a rate per hour in [0, 1]")
    return value


def parse_failures(spec: str) -> FailureRates:
    """The rates of a ``--failures`` spec (see ``SPEC_HELP``); ``ValueError``, one line, else.

    Without ``llama3`` first, the three rates start at zero (only what the spec names fails).
    """
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"--failures is empty: expected {SPEC_HELP}")
    rates = LLAMA3 if parts[0] == "llama3" else FailureRates(0.0, 0.0, 0.0)
    scale = 1.0
    for part in parts[1:] if parts[0] == "llama3" else parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--failures {part!r}: expected KEY=VALUE or llama3 first ({SPEC_HELP})")
        if key in _RATE_KEYS:
            rates = replace(rates, **{_RATE_KEYS[key]: _rate(value.strip(), key)})
        elif key in _TIME_KEYS:
            seconds = parse_duration(value, f"--failures {key}")
            if seconds <= 0:
                raise ValueError(f"--failures {key}={value!r}: must be longer than 0")
            rates = replace(rates, **{_TIME_KEYS[key]: seconds})
        elif key == "scale":
            try:
                scale = float(value)
            except ValueError:
                raise ValueError(f"--failures scale={value!r}: expected a number") from None
            if not math.isfinite(scale) or not 0 <= scale <= 1e6:
                raise ValueError(f"--failures scale={value!r}: expected a number in [0, 1e6]")
        else:
            known = ", ".join([*_RATE_KEYS, *_TIME_KEYS, "scale"])
            raise ValueError(f"--failures {part!r}: unknown key {key!r} (known: {known})")
    return replace(rates, per_gpu_h=rates.per_gpu_h * scale, per_node_h=rates.per_node_h * scale,
                   per_leaf_h=rates.per_leaf_h * scale)
