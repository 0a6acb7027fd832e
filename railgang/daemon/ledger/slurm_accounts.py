"""Keep Slurm's account tree in step with railgang's (``railgang quota sync-accounts``).

Reads ``sacctmgr show assoc`` and plans ``sacctmgr -i`` argument lists (never a shell): add the
accounts Slurm lacks, parents first; move an account whose parent differs; set a team's burst
limit as ``GrpTRES=gres/gpu=N`` (``-1`` clears it). Accounts Slurm has but railgang does not are
left alone: deleting Slurm accounts is an admin's decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.daemon.slurm.cli.runner import SlurmRunner

SACCTMGR = "sacctmgr"


@dataclass(frozen=True, slots=True)
class SlurmAccount:
    name: str
    parent: str | None  # None for accounts under root
    grp_gpus: int | None


def _grp_gpus(tres: str) -> int | None:
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key == "gres/gpu" and value.isdigit():
            return int(value)
    return None


def parse_assoc(text: str) -> dict[str, SlurmAccount]:
    """``sacctmgr -n -P show assoc format=account,parentname,user,grptres`` -> accounts."""
    out: dict[str, SlurmAccount] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 4 or parts[2]:  # user associations are not accounts
            continue
        name, parent = parts[0], parts[1]
        if name == "root":
            continue
        out[name] = SlurmAccount(name, None if parent in ("", "root") else parent,
                                 _grp_gpus(parts[3]))
    return out


def read_slurm_accounts(runner: SlurmRunner) -> dict[str, SlurmAccount]:
    res = runner.run([SACCTMGR, "-n", "-P", "show", "assoc",
                      "format=account,parentname,user,grptres"])
    return parse_assoc(res.stdout)


def plan(wanted: list[tuple[str, str | None, str, int | None]],
         have: dict[str, SlurmAccount]) -> list[list[str]]:
    """``wanted``: (name, parent, level, burst limit) from railgang; returns sacctmgr calls."""
    depth = {"org": 0, "dept": 1, "team": 2}
    calls: list[list[str]] = []
    for name, parent, level, limit in sorted(wanted, key=lambda w: (depth.get(w[2], 3), w[0])):
        cur = have.get(name)
        want_parent = parent or "root"
        if cur is None:
            argv = [SACCTMGR, "-i", "add", "account", name, f"parent={want_parent}",
                    f"Description=railgang {level}"]
            if level == "org":
                argv.append(f"Organization={name}")
            if level == "team" and limit is not None:
                argv.append(f"GrpTRES=gres/gpu={limit}")
            calls.append(argv)
            continue
        sets: list[str] = []
        if (cur.parent or "root") != want_parent:
            sets.append(f"parent={want_parent}")
        if level == "team" and cur.grp_gpus != limit:
            sets.append(f"GrpTRES=gres/gpu={limit if limit is not None else -1}")
        if sets:
            calls.append([SACCTMGR, "-i", "modify", "account", "where", f"name={name}", "set",
                          *sets])
    return calls


__all__ = ["SlurmAccount", "parse_assoc", "plan", "read_slurm_accounts"]
