"""The honest baseline: where Slurm 22.05's select/cons_tres with topology/tree puts a gang.

A transcription of ``_eval_nodes_topo`` (src/plugins/select/cons_tres/job_test.c, tag
slurm-22-05-8-1), the path every job takes when topology/tree is configured:

1. Nodes that can run the job: not drained (the quarantine, drained as an admin would) and with
   the per-node GPUs free (``--gres=gpu:8`` needs 8; ``--gpus=G`` any free GPU).
2. ``rem_nodes`` is the node count asked for (``--nodes=N``), or 1 for ``--gpus=G``
   (``gres_sched_init``: with a per-job GRES, ``rem_nodes = MIN(min_nodes, req_nodes)``).
3. Leaves are taken one at a time (``_topo_choose_best_switch``): the first leaf by best fit,
   ``_topo_compare_switches`` — a leaf whose usable node count covers ``rem_nodes`` beats one
   that does not, and among those the one with *fewer* usable nodes wins; when neither covers
   it, their parents are compared the same way; ties keep the earlier leaf. Later leaves must
   be closest (switch distance summed over the leaves already used) and, at equal distance,
   fit tighter.
   Before any of that, nodes are grouped by scheduling weight, whose low byte cons_tres sets to
   ``0xff - usable GPUs`` ("Favor nodes with more co-located GPUs"): only the lowest-weight
   groups that together suffice are candidates, and every group but the last is taken whole
   (as if required), its leaves first.
4. Inside a leaf, nodes in bitmap (name) order — the source says "Ideally we would add nodes in
   order of resource availability rather than in order of bitmap position" — each counting the
   GPUs the job still needs, until both the node count and the GPU count are met.
5. GPUs are then laid out node by node in bitmap order, each node giving all it can (so with
   ``--gpus=12`` the lower-numbered node gets 8), the lowest free indices first; srun hands out
   ranks in that order (tp fastest).

So there is a node-level preference (fuller-free nodes first, through the weight), but inside
the chosen group a leaf's nodes go in name order, not by best fit. Checked against states
recorded on the real slurmctld (tests/topology/data/slurm_tree_states.json).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType

from railgang.topology.fabric import Fabric
from railgang.topology.placement.types import GangRequest, Placement, RankSlot

__all__ = ["ranks_in_order", "slurm_tree_place", "submission"]


def submission(fabric: Fabric, request: GangRequest) -> tuple[int, int]:
    """How the job is submitted: ``(nodes, gpus_per_node)`` for ``--nodes=N --gres=gpu:K`` when
    the gang is whole nodes of TP groups, else ``(0, 0)`` for ``--gpus=G``."""
    per = fabric.max_node_gpus
    if request.gpus % per == 0 and request.gpus >= per and per % max(request.tp, 1) == 0:
        return request.gpus // per, per
    return 0, 0


def ranks_in_order(gpus: Sequence[tuple[str, int]], tp: int, pp: int) -> Placement:
    """Ranks handed out in GPU order (what srun does): tp fastest, then pp, then dp."""
    ranks = []
    for k, (node, gpu) in enumerate(gpus):
        t, rest = k % tp, k // tp
        ranks.append(RankSlot(node, gpu, t, rest % pp, rest // pp))
    by_node: dict[str, list[int]] = {}
    for node, gpu in gpus:
        by_node.setdefault(node, []).append(gpu)
    return Placement(MappingProxyType({n: tuple(sorted(v)) for n, v in by_node.items()}), tuple(ranks),
                     0.0, MappingProxyType({}), scope="slurm")


def _switch_dist(fabric: Fabric, a: str, b: str) -> int:
    """Slurm's switches_dist between two leaves: hops up to the common switch and down."""
    if a == b:
        return 0
    na, nb = fabric.direct_nodes(a)[0], fabric.direct_nodes(b)[0]
    return 2 * (fabric.distance(na, nb) - 1)


def _compare(fabric: Fabric, i: str, j: str, rem: int, count: Mapping[str, int],
             under: Mapping[str, int]) -> int:
    """``_topo_compare_switches``: 1 if leaf ``i`` fits better than ``j``, -1 if worse, 0 equal.

    A switch covering ``rem`` nodes beats one that does not; two that do: the smaller wins;
    neither: compare their parents the same way, and if they share a parent the *larger* wins.
    """
    ci, cj = count.get(i, 0), count.get(j, 0)
    while True:
        i_fit, j_fit = ci >= rem, cj >= rem
        if i_fit and j_fit:
            return 1 if ci < cj else (-1 if ci > cj else 0)
        if i_fit:
            return 1
        if j_fit:
            return -1
        pi, pj = fabric.parent(i), fabric.parent(j)
        if pi is not None and pj is not None and pi != pj:
            i, j = pi, pj
            ci, cj = under.get(i, 0), under.get(j, 0)
            continue
        break
    return 1 if ci > cj else (-1 if ci < cj else 0)


def slurm_tree_place(
    fabric: Fabric,
    free: Mapping[str, frozenset[int]],
    request: GangRequest,
    *,
    drained: Collection[str] = (),
) -> Placement | None:
    """Slurm 22.05's placement of ``request`` on ``free`` (None: it would stay pending)."""
    want_nodes, per_node = submission(fabric, request)
    need = request.gpus
    usable = [n for n in fabric.nodes if n not in drained and len(free.get(n, ())) >= max(per_node, 1)]
    avail = {n: per_node or len(free[n]) for n in usable}
    # cons_tres (_allocate_sc): "Favor nodes with more co-located GPUs": the low byte of a node's
    # scheduling weight is 0xff - its usable GPUs, so fuller-free nodes form the first group.
    weight = {n: 0xFF - len(free[n]) for n in usable}
    rem_nodes = want_nodes or 1
    best: list[str] = []
    lower: list[str] = []  # all of the lower-weight groups: Slurm treats them as required
    for w in sorted(set(weight.values())):
        if best:
            lower = list(best)
        best += [n for n in usable if weight[n] == w]
        if sum(avail[n] for n in best) >= need and len(best) >= rem_nodes:
            break
    else:
        return None
    taken: list[tuple[str, int]] = []
    state = {"got": 0, "rem": rem_nodes}

    def add(node: str) -> bool:
        k = avail[node] if per_node else min(avail[node], need - state["got"])
        free_idx = sorted(free[node])
        taken.extend((node, g) for g in free_idx[:k])
        state["got"] += k
        state["rem"] -= 1
        return state["got"] >= need and state["rem"] <= 0

    def finish() -> Placement:
        # The GPUs themselves are laid out after the nodes are chosen, node by node in bitmap
        # order (gres_select_filter_select_and_set): the first nodes get all they have.
        nodes = sorted({n for n, _ in taken}, key=fabric.index)
        gpus: list[tuple[str, int]] = []
        for node in nodes:
            k = per_node or min(len(free[node]), need - len(gpus))
            gpus.extend((node, g) for g in sorted(free[node])[:k])
        return ranks_in_order(gpus, max(request.tp, 1), max(request.pp, 1))

    for node in lower:  # already in bitmap order
        if add(node):
            return finish()
    best_set = set(best)
    chosen = {n for n, _ in taken}
    required = {fabric.leaf_of(n) for n in lower}
    for leaf in fabric.leaves:  # more nodes from leaves the job already uses
        if leaf in required:
            for node in fabric.direct_nodes(leaf):
                if node in best_set and node not in chosen:
                    chosen.add(node)
                    if add(node):
                        return finish()
    count: dict[str, int] = {}
    under: dict[str, int] = {}
    for n in best:
        count[fabric.leaf_of(n)] = count.get(fabric.leaf_of(n), 0) + 1
        for sw in fabric.ancestors(n)[1:]:
            under[sw] = under.get(sw, 0) + 1
    dist = dict.fromkeys(fabric.leaves, 0)
    for leaf in required:
        for other in dist:
            dist[other] += _switch_dist(fabric, leaf, other)
    while True:
        pick: str | None = None
        for leaf in fabric.leaves:
            if leaf in required or not count.get(leaf):
                continue
            if pick is None:
                pick = leaf
                continue
            tcs = _compare(fabric, leaf, pick, state["rem"], count, under)
            if (dist[leaf] < dist[pick] and tcs >= 0) or (dist[leaf] == dist[pick] and tcs > 0):
                pick = leaf
        if pick is None:
            return None
        for other in dist:
            dist[other] += _switch_dist(fabric, pick, other)
        for node in fabric.direct_nodes(pick):
            if node in best_set and node not in chosen:
                chosen.add(node)
                if add(node):
                    return finish()
        count[pick] = 0
