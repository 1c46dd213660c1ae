"""CPU quotas for the services of a bench's stack: boxes we do not have, simulated (issue 29, goal 3).

Each capped service's processes go into a control group of their own whose CPU quota is the fraction of
a core given (`game=0.5`: half a core, whatever the number of its replicas). cgroup v2 (`cpu.max`) and
v1 (`cpu.cfs_quota_us`) are both handled, as root, without systemd (these machines' PID 1 is not
systemd, so `systemd-run --scope -p CPUQuota=` is not available). The groups are removed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/cpu")


def parse_caps(text: str) -> dict[str, float]:
    """`game=0.5,wallet=0.75` -> {"game": 0.5, "wallet": 0.75} (cores a service may use)."""
    caps = {}
    for item in filter(None, text.split(",")):
        service, _, cores = item.partition("=")
        caps[service.strip()] = float(cores)
        if not 0 < caps[service.strip()] <= os.cpu_count():  # type: ignore[operator]
            raise ValueError(f"{item}: a cap is a number of cores above 0 and at most {os.cpu_count()}")
    return caps


def _controller() -> tuple[Path, str]:
    """The directory new groups go under and the cgroup version ("v2" or "v1")."""
    if (V2_ROOT / "cgroup.controllers").exists():
        return V2_ROOT, "v2"
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return V1_ROOT, "v1"
    raise RuntimeError("no writable CPU controller under /sys/fs/cgroup: CPU caps need cgroups (and root)")


@contextmanager
def capped(pids: Mapping[str, Sequence[int]], caps: Mapping[str, float], tag: str) -> Iterator[dict[str, Path]]:
    """Within the block, each service named in `caps` runs in a group of its own with that many cores."""
    if not caps:
        yield {}
        return
    root, version = _controller()
    groups: dict[str, Path] = {}
    try:
        for service, cores in caps.items():
            if service not in pids:
                raise ValueError(f"no service {service!r} in the stack (it has {sorted(pids)})")
            group = root / f"croupier-bench-{tag}-{service}"
            group.mkdir(exist_ok=True)
            groups[service] = group
            quota = int(cores * PERIOD_US)
            if version == "v2":
                (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
            for pid in pids[service]:
                (group / "cgroup.procs").write_text(str(pid))  # every thread of the process moves with it
        yield groups
    finally:
        for group in groups.values():
            parent = group.parent / "cgroup.procs"
            for pid in filter(None, (group / "cgroup.procs").read_text().split()) if group.exists() else []:
                try:
                    parent.write_text(pid)
                except OSError:
                    pass  # the process ended meanwhile
            try:
                group.rmdir()
            except OSError:
                pass


def predicted_rounds_per_s(cpu_ms_per_round: Mapping[str, float], caps: Mapping[str, float], uncapped_rounds_per_s: float) -> float:
    """docs/scaling.md's formula on a capped stack: a service given `cores` of CPU at `c` ms a round serves at
    most cores x 1000 / c rounds a second; the stack runs at the least of those and of what it reached
    with nothing capped (the box's own ceiling)."""
    limits = [cores * 1000 / cpu_ms_per_round[service] for service, cores in caps.items() if cpu_ms_per_round.get(service)]
    return round(min([uncapped_rounds_per_s, *limits]), 1)
