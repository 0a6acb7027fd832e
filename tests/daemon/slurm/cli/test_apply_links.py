"""The link-health actions on the Slurm CLI backend: ``Migrate`` is a checkpoint signal plus a
requeue mark (like ``Preempt``), ``TagNode(remove=True)`` takes the ``rg_`` feature off again;
both survive the journal's codec."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core.model.actions import Action, Migrate, Preempt, TagNode
from railgang.daemon.service.codec import decode, encode, kind_of
from railgang.daemon.slurm.cli.apply import ApplyConfig, apply_actions
from railgang.daemon.slurm.cli.parse import parse_tag
from railgang.daemon.slurm.cli.runner import SlurmRunner
from tests.daemon.slurm.cli.capture import NOW, observation
from tests.daemon.slurm.cli.test_apply import EIGHT, Recorder


def test_migrate_is_signalled_and_marked_like_a_preemption() -> None:
    rec, pre = Recorder(), Recorder()
    [m] = apply_actions(SlurmRunner(exec_fn=rec), observation(),
                        [Migrate("9", 30.0, {"n05": EIGHT}, 1, 900.0, 240.0, 8)], NOW, ApplyConfig())
    [p] = apply_actions(SlurmRunner(exec_fn=pre), observation(), [Preempt("9", 30.0)], NOW, ApplyConfig())
    assert m.ok and p.ok
    assert rec.calls == pre.calls  # the same scontrol mark and scancel --signal
    mark = parse_tag((rec.calls[0][1] or "").split("AdminComment=", 1)[1])
    assert mark is not None and mark.preempt is not None and mark.preempt.deadline == NOW + 30


def test_migrate_of_a_job_that_is_not_railgangs_is_refused() -> None:
    [res] = apply_actions(SlurmRunner(exec_fn=Recorder()), observation(),
                          [Migrate("8", 30.0, {"n05": EIGHT}, 1)], NOW, ApplyConfig())
    assert not res.ok and "not a railgang job" in res.detail


def test_untag_takes_the_feature_off_and_is_idempotent() -> None:
    obs = observation()
    raw = obs.nodes_raw["n03"]
    tagged = dataclasses.replace(obs, nodes_raw={**obs.nodes_raw, "n03": dataclasses.replace(
        raw, features=raw.features | {"rg_lame-link"})})
    rec = Recorder()
    [res] = apply_actions(SlurmRunner(exec_fn=rec), tagged, [TagNode("n03", "lame-link", remove=True)],
                          NOW, ApplyConfig())
    assert res.ok
    [(argv, _stdin)] = rec.calls
    assert argv[:3] == ("scontrol", "update", "nodename=n03") and "rg_lame-link" not in " ".join(argv)
    again = Recorder()
    [res] = apply_actions(SlurmRunner(exec_fn=again), obs, [TagNode("n03", "lame-link", remove=True)],
                          NOW, ApplyConfig())
    assert res.ok and res.detail == "not tagged" and again.calls == []


@pytest.mark.parametrize("action", [
    Migrate("9", 120.0, {"n05": EIGHT, "n06": (0, 1)}, 2, 1234.5, 240.0, 16),
    TagNode("n03", "lame-link", remove=True),
    TagNode("n03", "lame-link"),
], ids=["migrate", "untag", "tag"])
def test_codec_round_trip(action: Action) -> None:
    assert decode(kind_of(action), encode(action)) == action
