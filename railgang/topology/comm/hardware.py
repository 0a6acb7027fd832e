"""Datasheet and protocol values the communication model is built from; nothing here is fitted.

Every number is a vendor specification, a protocol's framing rule, or a constant NCCL itself uses
in its topology/tuning model (``src/graph/topo.h``, ``src/graph/tuning.cc``); the field comment
names the source. docs/topology.md lists the citations with their addresses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

__all__ = [
    "A100_SXM",
    "DGX_A100",
    "DGX_H100",
    "DGX_H200",
    "H100_SXM",
    "H200_SXM",
    "HDR",
    "NDR",
    "NICS",
    "SYSTEMS",
    "CommParams",
    "GpuSpec",
    "NcclLatency",
    "NcclNvls",
    "NicSpec",
    "ib_payload_efficiency",
    "pcie_payload_efficiency",
]

# InfiniBand framing per packet (IBTA spec vol. 1): LRH 8 B + BTH 12 B + ICRC 4 B + VCRC 2 B.
_IB_HEADER_BYTES = 8 + 12 + 4 + 2
# PCIe TLP framing (PCIe base spec): 4 B framing/sequence + 12-16 B header + 4 B LCRC (+ ECRC off).
_PCIE_TLP_OVERHEAD_BYTES = 24


def ib_payload_efficiency(mtu: int = 4096) -> float:
    """Payload share of an InfiniBand RDMA packet at ``mtu`` bytes (4096: 0.9937)."""
    return mtu / (mtu + _IB_HEADER_BYTES)


def pcie_payload_efficiency(max_payload: int = 256) -> float:
    """Payload share of a PCIe TLP at the usual 256-byte max payload size (0.914)."""
    return max_payload / (max_payload + _PCIE_TLP_OVERHEAD_BYTES)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's NVLink and PCIe attachment.

    ``nccl_gbps_per_link`` is the per-link, per-direction bandwidth NCCL's own topology model
    assumes for this generation (``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW`` 20.6 in
    ``src/graph/topo.h``): the NVLink line rate (25 GB/s per link per direction) less the
    protocol overhead NCCL measures. The model uses it for every NVLink hop.
    """

    name: str
    nvlink_links: int            # NVLink links per GPU (A100: 12, H100/H200 SXM: 18)
    nvlink_line_gbps: float      # per link, per direction, GB/s (NVLink 3 and 4: 25)
    nccl_gbps_per_link: float    # NCCL topo.h SMxx_NVLINK_BW
    pcie_gen: int                # host interface (A100: Gen4, H100/H200: Gen5), x16
    sm: int = 80                 # compute capability x10 (A100: 80, H100/H200: 90)
    nvswitch_gen: int = 2        # NVSwitch of the HGX baseboard (A100: gen 2, H100/H200: gen 3)

    @property
    def has_nvls(self) -> bool:
        """NVLink SHARP (in-switch reduction) exists: NVSwitch gen 3 and SM90+. NCCL searches
        no NVLS graph otherwise (search.cc: ``nodes[NVS].count == 0 || ccMin < 90``)."""
        return self.nvswitch_gen >= 3 and self.sm >= 90

    @property
    def nvlink_gbps(self) -> float:
        """Usable NVLink bandwidth per GPU and direction (GB/s): links x NCCL per-link rate."""
        return self.nvlink_links * self.nccl_gbps_per_link

    @property
    def pcie_gbps(self) -> float:
        """PCIe x16 payload bandwidth per direction (GB/s): lane rate, 128b/130b, TLP framing."""
        gts = {3: 8.0, 4: 16.0, 5: 32.0}[self.pcie_gen]
        return gts * 16 / 8 * 128 / 130 * pcie_payload_efficiency()


@dataclass(frozen=True)
class NicSpec:
    """One HCA port: data rate and the switch it plugs into."""

    name: str
    line_gbit: float            # data rate after line coding, Gb/s (HDR 200, NDR 400)
    pcie_gen: int               # ConnectX-6: Gen4 x16; ConnectX-7: Gen5 x16
    switch_hop_us: float        # port-to-port latency of one switch of this generation

    @property
    def gbps(self) -> float:
        """Payload bandwidth per direction (GB/s): the smaller of the IB link at 4 KB MTU and
        the NIC's PCIe x16 slot."""
        ib = self.line_gbit / 8 * ib_payload_efficiency()
        gts = {3: 8.0, 4: 16.0, 5: 32.0}[self.pcie_gen]
        pcie = gts * 16 / 8 * 128 / 130 * pcie_payload_efficiency()
        return min(ib, pcie)


@dataclass(frozen=True)
class NcclLatency:
    """NCCL's latency model for the Simple protocol (``src/graph/tuning.cc``, NCCL 2.19+), µs."""

    base_ring: float = 8.4       # baseLat[Ring][Simple]
    base_tree: float = 8.4       # baseLat[Tree][Simple]
    nvlink_ring: float = 3.4     # hwLat[NVLINK][Ring][Simple], per step
    nvlink_tree: float = 4.0     # hwLat[NVLINK][Tree][Simple]
    net_ring: float = 14.0       # hwLat[NET][Ring][Simple], per step
    net_tree: float = 14.0       # hwLat[NET][Tree][Simple]
    tree_bw_factor: float = 0.92  # tuning.cc: tree busBw *= .92


@dataclass(frozen=True)
class NcclNvls:
    """NCCL's NVLS / NVLS_TREE all-reduce constants for Hopper (SM90), Simple protocol.

    All from NCCL master (commit 5067397c): ``src/graph/tuning.cc`` and ``src/graph/search.cc``,
    ``src/include/device.h``. Latencies in µs, bandwidths in GB/s per channel.
    """

    efficiency: float = 0.85           # tuning.cc nvlsEfficiency[Hopper]
    max_arity: int = 32                # device.h NCCL_MAX_NVLS_ARITY (NVLS channels <= GPUs)
    # search.cc sm90SpeedArrayIntra / sm90SpeedArrayInter: the per-channel speeds the graph
    # search tries, fastest first (intra: single node, inter: multi-node).
    speeds_intra: tuple[float, ...] = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
    speeds_inter: tuple[float, ...] = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                       15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
    # tuning.cc perChMaxNVLSTreeBws[Hopper] for 1 / 2 / >2 nodes
    tree_per_channel_max: tuple[float, float, float] = (0.0, 57.7, 45.5)
    nvlink_lat: float = 25.0           # hwLatencies[NVLINK][NVLS and NVLS_TREE][Simple]
    net_lat_nvls: float = 18.0         # hwLatencies[NET][NVLS][Simple]
    net_lat_nvls_tree: float = 20.9    # hwLatencies[NET][NVLS_TREE][Simple]
    # baseLatencies[NVLS] and [NVLS_TREE] are 0 in tuning.cc, so there is no base term.


# GPUs: NVIDIA A100/H100/H200 datasheets (NVLink 3: 600 GB/s, NVLink 4: 900 GB/s bidirectional).
A100_SXM = GpuSpec("A100-SXM4", nvlink_links=12, nvlink_line_gbps=25.0, nccl_gbps_per_link=20.0, pcie_gen=4,
                   sm=80, nvswitch_gen=2)
H100_SXM = GpuSpec("H100-SXM5", nvlink_links=18, nvlink_line_gbps=25.0, nccl_gbps_per_link=20.6, pcie_gen=5,
                   sm=90, nvswitch_gen=3)
H200_SXM = GpuSpec("H200-SXM", nvlink_links=18, nvlink_line_gbps=25.0, nccl_gbps_per_link=20.6, pcie_gen=5,
                   sm=90, nvswitch_gen=3)
# NICs: ConnectX-6 HDR 200 Gb/s (PCIe Gen4 x16) on Quantum QM8700 switches (130 ns port to
# port); ConnectX-7 NDR 400 Gb/s (PCIe Gen5 x16) on Quantum-2 QM9700 switches (the same class).
HDR = NicSpec("ConnectX-6 HDR", line_gbit=200.0, pcie_gen=4, switch_hop_us=0.13)
NDR = NicSpec("ConnectX-7 NDR", line_gbit=400.0, pcie_gen=5, switch_hop_us=0.13)
NICS: Mapping[str, NicSpec] = MappingProxyType({"hdr": HDR, "ndr": NDR})


@dataclass(frozen=True)
class CommParams:
    """The hardware of a cluster as the model sees it (one GPU and NIC type per fabric).

    ``nics_per_node`` HCAs are shared evenly by the node's GPUs (GPU g uses NIC
    ``g * nics // gpus``; DGX: one per GPU). ``oversubscription`` is the down:up port ratio at
    each switch level above the nodes (leaf, spine, …); 1.0 is a non-blocking fat tree (DGX
    SuperPOD reference). ``pxn``: NCCL moves cross-rail sends over NVLink to the GPU on the
    destination's rail first (NCCL_PXN_DISABLE=0, the default since 2.12). ``nvls``: the
    system's NVSwitches do NVLink SHARP, so NCCL's NVLS (one node) and NVLS_TREE (several) join
    ring and tree; opt-in, and only effective where ``gpu.has_nvls`` (NVSwitch gen 3, SM90+).
    """

    gpu: GpuSpec = H100_SXM
    nic: NicSpec = NDR
    nics_per_node: int = 8
    oversubscription: tuple[float, ...] = (1.0, 1.0, 1.0)
    pxn: bool = True
    latency: NcclLatency = field(default_factory=NcclLatency)
    nvls: bool = False
    nvls_consts: NcclNvls = field(default_factory=NcclNvls)
    # Slurm's LinkSpeed is unitless (slurmctld only stores it); railgang reads it as the data rate
    # of the switch's ports in Gb/s (what `railgang topology discover` writes: NDR = 400). A site
    # that wrote another unit sets this factor (Gb/s per LinkSpeed unit; 0.001 for Mb/s).
    linkspeed_gbit_per_unit: float = 1.0

    def port_gbps(self, link_speed: float | None) -> float:
        """Payload GB/s of one switch port: the LinkSpeed of its switch when given (a port trains
        to the slower end, so never above the NIC), else the NIC's datasheet rate."""
        if not link_speed or link_speed <= 0:
            return self.nic.gbps
        gbit = link_speed * self.linkspeed_gbit_per_unit
        return min(self.nic.gbps, gbit / 8 * ib_payload_efficiency())

    def oversub(self, level: int) -> float:
        """Down:up ratio of switches ``level`` above the nodes (0 = leaf)."""
        if not self.oversubscription:
            return 1.0
        return self.oversubscription[min(level, len(self.oversubscription) - 1)]

    def with_(self, **changes: object) -> CommParams:
        """A copy with some fields changed (what-if analyses)."""
        return replace(self, **changes)  # type: ignore[arg-type]


# Named systems (vendor system datasheets): 8 GPUs on NVSwitch, 8 single-port HCAs.
DGX_A100 = CommParams(gpu=A100_SXM, nic=HDR, nics_per_node=8)
# DGX/HGX H100 and H200: four NVSwitch gen 3 chips with NVLink SHARP (DGX H100 datasheet).
DGX_H100 = CommParams(gpu=H100_SXM, nic=NDR, nics_per_node=8, nvls=True)
DGX_H200 = CommParams(gpu=H200_SXM, nic=NDR, nics_per_node=8, nvls=True)
SYSTEMS: Mapping[str, CommParams] = MappingProxyType({
    "dgx-a100": DGX_A100, "dgx-h100": DGX_H100, "dgx-h200": DGX_H200,
})
