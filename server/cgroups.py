"""Per-box control groups: memory, process-count and CPU limits that count what the kernel counts.

A box (:mod:`server.sandbox`) gets its own group in each of three controllers:

* ``memory``: cgroup v2 ``memory.max`` (+ ``memory.swap.max`` = 0, ``memory.oom.group`` = 1) or
  cgroup v1 ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes`` where swap accounting
  exists). Both count anonymous memory *and* shmem/tmpfs/memfd pages charged to the group (the
  kernel's ``shmem`` accounting), which ``RLIMIT_AS`` never sees.
* ``pids``: ``pids.max`` (v1 and v2): processes and threads of the box, whatever their uid.
* ``cpu``: v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (CFS bandwidth:
  ``cpus`` cores' worth of time per period).

:func:`probe` looks, once per process, for a writable hierarchy of each controller: cgroup v2 (the
unified mount at ``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``, the controller listed in the
parent's ``cgroup.controllers`` and enabled, or enableable, in its ``cgroup.subtree_control``)
first, else the v1 hierarchy mounted for that controller. Groups are made under this process's own
group of each hierarchy (``/proc/self/cgroup``), named ``ailower-<pid>-<hex>``; a group left
behind by a killed process (the server was SIGKILLed) is removed by a later :class:`BoxGroup`
once it is empty and older than :data:`STALE_AFTER_S`.

Sources: the kernel's ``Documentation/admin-guide/cgroup-v2.rst`` (memory.max, memory.events,
pids.max, cpu.max, cgroup.kill, "no internal processes") and ``cgroup-v1/memory.rst``,
``cgroup-v1/pids.rst``, ``scheduler/sched-bwc.rst`` (CFS bandwidth).
"""

from __future__ import annotations

import functools
import os
import re
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTROLLERS", "Hierarchy", "BoxGroup", "probe", "enforced", "describe"]

CONTROLLERS = ("memory", "pids", "cpu")
_PREFIX = "ailower-"
_PERIOD_US = 100_000  # CFS period (the kernel's default, sched-bwc.rst)


@dataclass(frozen=True)
class Hierarchy:
    """Where one controller's box groups are made.

    Attributes:
        controller: ``memory`` | ``pids`` | ``cpu``.
        version: 1 or 2.
        parent: the folder (this process's own group) under which box groups are made.
    """

    controller: str
    version: int
    parent: Path


def _own_groups() -> dict[str, str]:
    """``/proc/self/cgroup``: controller (or ``""`` for v2) -> this process's group path."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else [""]):
            out[c] = path
    return out


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, fstype, options)`` of every cgroup/cgroup2 mount (``/proc/self/mounts``)."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[1], parts[2], set(parts[3].split(","))))
    return out


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _try_group(h: Hierarchy) -> str | None:
    """Make a probe group under ``h.parent``, set a limit, remove it; None or why it failed."""
    d = h.parent / f"{_PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        d.mkdir()
    except OSError as exc:
        return f"cannot create a group in {h.parent}: {exc.strerror}"
    try:
        _limit(h, d, memory=64 << 20, pids=64, cpus=1.0)
    except OSError as exc:
        return f"cannot set {h.controller} limits in {d}: {exc.strerror}"
    finally:
        try:
            d.rmdir()
        except OSError:
            pass
    return None


def _limit(h: Hierarchy, d: Path, *, memory: int, pids: int, cpus: float) -> None:
    """Write ``h.controller``'s limit into group ``d`` (bytes, processes, cores)."""
    c, v = h.controller, h.version
    if c == "memory":
        if v == 2:
            _write(d / "memory.max", str(memory))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            if (d / "memory.oom.group").exists():
                _write(d / "memory.oom.group", "1")
        else:
            _write(d / "memory.limit_in_bytes", str(memory))
            if (d / "memory.memsw.limit_in_bytes").exists():
                _write(d / "memory.memsw.limit_in_bytes", str(memory))
    elif c == "pids":
        _write(d / "pids.max", str(pids))
    elif c == "cpu":
        quota = max(1000, int(cpus * _PERIOD_US))
        if v == 2:
            _write(d / "cpu.max", f"{quota} {_PERIOD_US}")
        else:
            _write(d / "cpu.cfs_period_us", str(_PERIOD_US))
            _write(d / "cpu.cfs_quota_us", str(quota))


@functools.lru_cache(maxsize=1)
def probe() -> tuple[dict[str, Hierarchy], dict[str, str]]:
    """Find a writable hierarchy per controller (once per process).

    Returns:
        ``(found, why_not)``: controller -> :class:`Hierarchy` for those that work, and
        controller -> the reason for each that does not.
    """
    found: dict[str, Hierarchy] = {}
    why: dict[str, str] = {}
    try:
        own, mounts = _own_groups(), _mounts()
    except OSError as exc:
        return {}, {c: f"cannot read /proc/self/cgroup or mounts: {exc}" for c in CONTROLLERS}
    v2 = next((m for m, t, _ in mounts if t == "cgroup2"), None)
    if v2 is not None and "" in own:
        parent = Path(v2) / own[""].lstrip("/")
        try:
            avail = set((parent / "cgroup.controllers").read_text().split())
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
        except OSError as exc:
            avail, enabled = set(), set()
            why.update({c: f"cgroup v2 at {parent}: {exc.strerror}" for c in CONTROLLERS})
        for c in CONTROLLERS:
            if c not in avail:
                why.setdefault(c, f"cgroup v2 at {parent}: controller not available "
                                  f"(cgroup.controllers: {' '.join(sorted(avail)) or 'empty'})")
                continue
            if c not in enabled:
                try:
                    _write(parent / "cgroup.subtree_control", f"+{c}")
                except OSError as exc:
                    why[c] = (f"cgroup v2 at {parent}: cannot enable {c} in cgroup.subtree_control "
                              f"({exc.strerror}; a group holding processes cannot delegate: run "
                              "the service in a delegated group, e.g. systemd Delegate=yes)")
                    continue
            h = Hierarchy(c, 2, parent)
            err = _try_group(h)
            if err is None:
                found[c] = h
                why.pop(c, None)
            else:
                why[c] = f"cgroup v2: {err}"
    for c in CONTROLLERS:
        if c in found:
            continue
        m = next((m for m, t, opts in mounts if t == "cgroup" and c in opts), None)
        if m is None or c not in own:
            why.setdefault(c, f"no cgroup v1 hierarchy with the {c} controller is mounted")
            continue
        h = Hierarchy(c, 1, Path(m) / own[c].lstrip("/"))
        err = _try_group(h)
        if err is None:
            found[c] = h
            why.pop(c, None)
        else:
            why[c] = f"cgroup v1: {err}"
    return found, why


def enforced() -> set[str]:
    """The controllers a box gets a group in on this host (see :func:`probe`)."""
    return set(probe()[0])


def describe() -> str:
    """One line: which limits are enforced and how, and why each missing one is missing."""
    found, why = probe()
    parts = [f"{c}: cgroup v{h.version} ({h.parent})" for c, h in sorted(found.items())]
    parts += [f"{c}: NOT enforced ({w})" for c, w in sorted(why.items())]
    return "; ".join(parts)


def _procs(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_and_remove(h: Hierarchy, d: Path, timeout: float = 5.0) -> bool:
    """SIGKILL every process of group ``d`` (``cgroup.kill`` on v2), then rmdir it."""
    if h.version == 2 and (d / "cgroup.kill").exists():
        try:
            _write(d / "cgroup.kill", "1")
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        for pid in _procs(d):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


#: an empty box group older than this (seconds) is stale: its box is gone (a box joins its group
#: within milliseconds of its creation, and a group is removed when its box ends)
STALE_AFTER_S = 60.0


def _sweep(h: Hierarchy) -> None:
    """Remove box groups that a killed process left behind: empty and older than
    :data:`STALE_AFTER_S`. (The creator's pid in the name cannot tell: a runner is pid 1 of its
    own PID namespace.) A group still holding processes is left to its box's own limits."""
    try:
        entries = [e for e in os.scandir(h.parent) if e.is_dir() and e.name.startswith(_PREFIX)]
    except OSError:
        return
    now = time.time()
    for e in entries:
        d = h.parent / e.name
        try:
            old = now - e.stat().st_mtime > STALE_AFTER_S
        except OSError:
            continue
        if old and not _procs(d):
            try:
                d.rmdir()
            except OSError:
                pass


class BoxGroup:
    """One box's groups, one per enforced controller.

    Args:
        memory: bytes (memory + swap) the whole box may hold, tmpfs/shmem/memfd pages included.
        pids: processes + threads of the box.
        cpus: cores' worth of CPU time per CFS period (1.0 = one core).

    Raises:
        OSError: a group could not be made or limited (the caller refuses the job).
    """

    def __init__(self, *, memory: int, pids: int, cpus: float):
        self.dirs: dict[str, tuple[Hierarchy, Path]] = {}
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            for c, h in probe()[0].items():
                _sweep(h)
                d = h.parent / name
                d.mkdir()
                self.dirs[c] = (h, d)
                _limit(h, d, memory=memory, pids=pids, cpus=cpus)
        except OSError:
            self.remove()
            raise

    @property
    def controllers(self) -> set[str]:
        """The controllers this box has a group in."""
        return set(self.dirs)

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a new process writes ``0`` into to join (pre-exec)."""
        return [str(d / "cgroup.procs") for _, d in self.dirs.values()]

    def memory_peak(self) -> int | None:
        """Peak memory of the group (bytes; v1 ``max_usage_in_bytes``, v2 ``memory.peak``)."""
        if "memory" not in self.dirs:
            return None
        h, d = self.dirs["memory"]
        f = d / ("memory.peak" if h.version == 2 else "memory.max_usage_in_bytes")
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of the group (memory limit)."""
        if "memory" not in self.dirs:
            return False
        h, d = self.dirs["memory"]
        try:
            text = (d / ("memory.events" if h.version == 2 else "memory.oom_control")).read_text()
        except OSError:
            return False
        m = re.search(r"^oom_kill (\d+)", text, re.M)
        return bool(m and int(m.group(1)) > 0)

    def pids_refused(self) -> bool:
        """Whether a fork was refused at ``pids.max`` (``pids.events`` ``max`` > 0)."""
        if "pids" not in self.dirs:
            return False
        try:
            m = re.search(r"^max (\d+)", (self.dirs["pids"][1] / "pids.events").read_text(), re.M)
        except OSError:
            return False
        return bool(m and int(m.group(1)) > 0)

    def kill(self) -> None:
        """SIGKILL every process left in the box's groups."""
        for h, d in self.dirs.values():
            if h.version == 2 and (d / "cgroup.kill").exists():
                try:
                    _write(d / "cgroup.kill", "1")
                except OSError:
                    pass
            for pid in _procs(d):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        """Kill what is left and remove the groups."""
        for h, d in list(self.dirs.values()):
            _kill_and_remove(h, d)
        self.dirs.clear()
