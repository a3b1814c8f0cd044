"""OS-level isolation of untrusted work: a source job's compile, and the agent loop on what it
produced, each run in a bubblewrap box with limits the kernel counts.

Untrusted Triton source executes Python at compile time (Triton's code generator calls what it
reaches), so the compile is treated as arbitrary code (:func:`compile_untrusted`); the loop on
its output (the reference cache, which that code could have replaced) runs in a second box
(:func:`lower_in_box`). :func:`run_isolated` builds a box as follows (the server must start as
root; it never runs untrusted code as root). ``docs/threat-model.md`` ("Isolation: the box") has
the full table, what a host needs for each limit, and measured figures.

* ``bwrap`` (bubblewrap) builds new mount, PID, network, IPC, UTS and cgroup namespaces; the new
  root is a tmpfs holding, read-only, ``/usr`` and the Python environment's own folders (prefixes
  and ``site-packages``/``dist-packages``, wherever they are: a venv under ``/tmp`` too), the
  project packages the box needs (at ``/opt/ailower``), a fresh ``/proc``, a minimal ``/dev``, a
  size-capped private ``/tmp`` and ``/sandbox`` (tmpfs; ``HOME``), and, read-write, one host
  folder at ``/sandbox/out`` for the declared output. Nothing else of the host is visible. The
  network namespace has only a down loopback.
* cgroups (:mod:`server.cgroups`, v2 or v1, probed): the box's memory (tmpfs/shmem/memfd pages
  included), its processes + threads and its CPU quota; the limits the server requires are a
  setting, and a box that cannot get them is refused (:class:`IsolationUnavailable`).
* ``setpriv`` (util-linux) drops to an unprivileged uid/gid (the server gives each job slot its
  own) with no supplementary groups, an empty capability bounding set and ``no_new_privs``; the
  environment is emptied and only ``HOME``, ``PATH`` and what the caller names are set.
* rlimits: ``RLIMIT_CPU``, ``RLIMIT_AS`` (unless ``as_limit`` is off), ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0, and ``RLIMIT_NPROC`` only where the pids cgroup is
  missing; the parent enforces the wall clock, a cap on the bytes in ``/sandbox/out`` (polled)
  and a cap on stdout+stderr bytes (only a head and a tail are kept).
* at the end (normal exit, a limit, or the parent dying: ``--die-with-parent`` and
  ``PR_SET_PDEATHSIG``) the box's PID namespace is torn down and what is left in its cgroups is
  SIGKILLed; then every undeclared file, symlink, FIFO, socket, device node and multiply-linked
  file is removed from the output folder before the caller reads it.

When bwrap or setpriv is missing, the service is not root, a required cgroup limit cannot be
enforced, or a probe box cannot import the job's packages, :func:`isolation_status` says why and
the service refuses source submissions (suite-kernel submissions still work).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server import cgroups

__all__ = ["SandboxLimits", "SandboxResult", "SandboxError", "IsolationUnavailable",
           "IsolatedRun", "compile_untrusted", "run_isolated", "isolation_status",
           "forbid_text_source_import", "SANDBOX_DIR", "PACKAGES_DIR"]

SANDBOX_DIR = "/sandbox"       # the box's private, size-capped tmpfs (HOME)
OUT_DIR = "/sandbox/out"       # the host folder the box hands its declared output back in
PACKAGES_DIR = "/opt/ailower"  # the project packages inside the box
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("harness", "kernels")
#: the project packages the runner's box needs (the agent loop, ptxas, verifier, emulator)
RUNNER_PACKAGES = ("agent", "harness", "kernels", "verifier", "emulator")


def _packages(names: tuple[str, ...]) -> dict[str, Path]:
    """Box path -> host path of the project packages ``names`` (read-only binds)."""
    return {f"{PACKAGES_DIR}/{p}": _ROOT / p for p in names}
_CHILD = Path(__file__).resolve().parent / "_compile_child.py"


class SandboxError(RuntimeError):
    """The sandboxed run failed, ran out of a limit, or answered garbage (message says which)."""


class IsolationUnavailable(SandboxError):
    """The host cannot isolate untrusted code (bwrap/setpriv missing, not root, no namespaces)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one box.

    Attributes:
        cpu_s: ``RLIMIT_CPU`` per process (CPU seconds).
        memory_mb: the box's memory cgroup limit (MiB: every process's memory *and* the
            shmem/tmpfs/memfd pages the box holds, its ``/tmp`` and ``/sandbox`` included), and
            ``RLIMIT_AS`` per process (address space).
        cpus: the box's CPU cgroup quota (cores' worth of time; 1.0 = one core).
        pids: the box's pids cgroup limit (processes + threads, whatever their uid).
        require: cgroup controllers (``memory``, ``pids``, ``cpu``) the box must get; a run on a
            host that cannot enforce one raises :class:`IsolationUnavailable`.
        wall_s: wall-clock limit of the whole run (seconds).
        file_mb: ``RLIMIT_FSIZE``: largest file a process may write (MiB).
        disk_mb: bytes the run may leave in its output folder ``/sandbox/out`` (MiB; polled every
            0.5 s and checked after the run: over it, the output is discarded).
        max_entries: files and folders the run may leave in ``/sandbox/out`` (polled and checked
            with ``disk_mb``; over it the run is killed as ``disk`` and the output discarded).
            Each poll walks the folder outside the box, in the server: 190,000 empty files (no
            bytes, so under ``disk_mb``) made that walk cost 0.75 of a core for the whole wall
            clock. The declared outputs are a handful of files per config.
        scratch_mb: size of the private ``/sandbox`` tmpfs (MiB; ``HOME``, Triton's cache).
        tmp_mb: size of the private ``/tmp`` tmpfs (MiB).
        nproc: ``RLIMIT_NPROC`` (processes of the uid host-wide); applied only where the pids
            cgroup is not enforced (it counts every box of the uid, so one box could starve
            another that shares its uid).
        nofile: ``RLIMIT_NOFILE`` (open files per process).
        output_bytes: stdout + stderr bytes the run may write before it is killed.
        as_limit: apply ``RLIMIT_AS`` (off for a box that initialises CUDA, which reserves
            address space far past any use; the memory cgroup still holds it).
        uid, gid: the unprivileged identity the code runs as (65534 = ``nobody``/``nogroup``;
            the server gives each job slot its own, :meth:`server.settings.ServerSettings.
            sandbox_limits`).
    """

    cpu_s: int = 300
    memory_mb: int = 8192
    cpus: float = 1.0
    pids: int = 512
    require: tuple[str, ...] = ("memory", "pids", "cpu")
    wall_s: float = 600.0
    file_mb: int = 256
    disk_mb: int = 2048
    max_entries: int = 10_000
    scratch_mb: int = 2048
    tmp_mb: int = 512
    nproc: int = 512
    nofile: int = 1024
    output_bytes: int = 16 << 20
    uid: int = 65534
    gid: int = 65534
    as_limit: bool = True


@dataclass
class IsolatedRun:
    """The outcome of :func:`run_isolated`.

    Attributes:
        returncode: the box's exit status (negative: killed by that signal).
        stdout, stderr: a head and tail of each stream (at most ``_KEEP_HEAD + _KEEP_TAIL``
            bytes; a marker shows where bytes were dropped).
        output_bytes: bytes written to stdout + stderr in total.
        killed: why the parent killed the box (``"wall"``, ``"output"``, ``"disk"``) or None.
        seconds: wall time (s).
        cgroups: the controllers the box had a group in (``memory``, ``pids``, ``cpu``).
        memory_peak: peak memory of the box's memory cgroup (bytes) or None.
        oom_killed: the kernel killed a process of the box at its memory limit.
        pids_refused: a fork was refused at the box's pids limit.
        discarded: output files removed afterwards (undeclared, special, or over ``disk_mb``).
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    output_bytes: int
    killed: str | None
    seconds: float
    cgroups: set[str] = field(default_factory=set)
    memory_peak: int | None = None
    oom_killed: bool = False
    pids_refused: bool = False
    discarded: list[str] = field(default_factory=list)


@dataclass
class SandboxResult:
    """What the sandboxed compile produced: the config keys compiled and Triton's failures."""

    compiled: list[str]
    failures: list[str]
    expected: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cache_dir: Path | None = None

    @property
    def complete(self) -> bool:
        """Every config of the autotune space compiled."""
        return not self.failures and sorted(self.compiled) == sorted(self.expected)


_KEEP_HEAD = 16 << 10
_KEEP_TAIL = 48 << 10


class _Talk:
    """Runs ``interact(stdin, stdout)`` (the parent's side of a box's line protocol) in a thread;
    an exception there (a protocol violation) sets ``over`` so the box is killed."""

    def __init__(self, proc, interact, over: threading.Event):
        self.error: BaseException | None = None
        self.over = over

        def run() -> None:
            try:
                interact(proc.stdin, proc.stdout)
            except BaseException as exc:  # reported by the caller: the box is killed
                self.error = exc
                over.set()
            finally:
                for f in (proc.stdin, proc.stdout):
                    try:
                        f.close()
                    except OSError:
                        pass

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def value(self) -> bytes:
        return b""


class _Capped:
    """Reads a pipe to EOF keeping the first ``_KEEP_HEAD`` and last ``_KEEP_TAIL`` bytes."""

    def __init__(self, pipe, total: list[int], cap: int, over: threading.Event):
        self.head, self.tail = bytearray(), bytearray()
        self.dropped = 0
        self.pipe, self.total, self.cap, self.over = pipe, total, cap, over
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
            if not chunk:
                break
            self.total[0] += len(chunk)
            if self.total[0] > self.cap:
                self.over.set()
            room = _KEEP_HEAD - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > _KEEP_TAIL:
                self.dropped += len(self.tail) - _KEEP_TAIL
                del self.tail[:len(self.tail) - _KEEP_TAIL]
        self.pipe.close()

    def value(self) -> bytes:
        mid = f"\n[... {self.dropped} bytes dropped ...]\n".encode() if self.dropped else b""
        return bytes(self.head) + mid + bytes(self.tail)


def _which(name: str) -> str | None:
    for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def _required_default() -> tuple[str, ...]:
    """The server's ``sandbox_require`` setting (``AILOWER_SERVER_SANDBOX_REQUIRE``)."""
    from server.settings import ServerSettings

    return ServerSettings().required_cgroups()


def isolation_status(require: tuple[str, ...] | None = None) -> tuple[bool, str]:
    """Whether :func:`run_isolated` can work on this host, and which limits it enforces.

    Probed once per process and ``require``: effective uid 0 (to build the box and drop to the
    sandbox uid), ``bwrap`` and ``setpriv`` on the system ``PATH``, the cgroup controllers in
    ``require`` (default: the server's ``sandbox_require`` setting) enforceable
    (:mod:`server.cgroups`), and a real box, built as a job's is, importing the packages a job
    needs (``numpy``, ``ml_dtypes``, ``triton`` and the project's ``harness``, ``kernels``,
    ``verifier``, ``emulator``, ``agent``) from wherever the Python environment is installed.

    Returns:
        ``(ok, text)``: ``text`` names the enforced limits (ok) or says what is missing.
    """
    return _isolation_status(tuple(sorted(require if require is not None
                                          else _required_default())))


@functools.lru_cache(maxsize=8)
def _isolation_status(require: tuple[str, ...]) -> tuple[bool, str]:
    ok, why = _host_ready(require)
    if not ok:
        return ok, why
    mods = ("numpy", "ml_dtypes", "triton", *RUNNER_PACKAGES)
    code = (f"import sys; sys.path.insert(0, {PACKAGES_DIR!r})\n"
            f"for m in {mods!r}: __import__(m)\nprint('imported', len({mods!r}))")
    work = Path(tempfile.mkdtemp(prefix="ailower-probe-", dir="/var/tmp"))
    try:
        run = _run_box([sys.executable, "-I", "-c", code], work=work, binds=_packages(
            RUNNER_PACKAGES), limits=SandboxLimits(wall_s=120, memory_mb=4096,
                                                   require=require), keep=())
    except SandboxError as exc:
        return False, f"a probe box failed to start: {exc}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if run.returncode != 0 or b"imported" not in run.stdout:
        return False, (f"a probe box could not import the job's packages (exit {run.returncode}): "
                       f"{run.stderr.decode(errors='replace').strip()[-600:]}")
    return True, (f"bubblewrap + setpriv (namespaces: mount, pid, net, ipc, uts, cgroup); "
                  f"limits: {cgroups.describe()}; rlimits: CPU, AS, FSIZE, NOFILE, CORE; "
                  f"private tmpfs /tmp and /sandbox (size-capped, charged to the memory group); "
                  f"probe imported {', '.join(mods)} in {run.seconds:.1f} s")


@functools.lru_cache(maxsize=8)
def _host_ready(require: tuple[str, ...]) -> tuple[bool, str]:
    """The cheap part of :func:`isolation_status` (no probe box): platform, root, tools, cgroups."""
    if sys.platform != "linux":
        return False, f"isolation needs Linux namespaces; this is {sys.platform}"
    if os.geteuid() != 0:
        return False, ("the service must start as root so the compile of untrusted source can run "
                       "in a bubblewrap box as a separate unprivileged uid; it runs as uid "
                       f"{os.geteuid()}")
    bwrap, setpriv = _which("bwrap"), _which("setpriv")
    if bwrap is None:
        return False, "bubblewrap ('bwrap') is not installed (Debian: apt-get install bubblewrap)"
    if setpriv is None:
        return False, "'setpriv' (util-linux) is not installed"
    missing = [c for c in require if c not in cgroups.enforced()]
    if missing:
        return False, (f"the box's required cgroup limits ({', '.join(missing)}) cannot be "
                       f"enforced on this host: {cgroups.describe()} (setting "
                       "AILOWER_SERVER_SANDBOX_REQUIRE lists the required ones)")
    return True, "bubblewrap + setpriv"


def _base_args(lim: SandboxLimits) -> list[str]:
    args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "ailower-sandbox", "--die-with-parent",
            "--new-session", "--clearenv", "--ro-bind", "/usr", "/usr"]
    for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / d
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "01777", "--size", str(lim.tmp_mb << 20), "--tmpfs", "/tmp",
             "--perms", "01777", "--size", str(lim.scratch_mb << 20), "--tmpfs", SANDBOX_DIR]
    return args


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _python_dirs(exclude: list[Path]) -> list[Path]:
    """Folders of the Python environment to show read-only: prefixes and those ``sys.path``
    folders that are inside a prefix or named ``site-packages``/``dist-packages``, wherever they
    are (under ``/tmp``, inside the project: a ``.venv`` of the checkout), minus any that contains
    the project, the data directory or an ``exclude`` folder, any inside the data directory or
    an ``exclude`` folder, any inside the project that is not itself a prefix (``pyvenv.cfg``) or
    a ``site-packages``/``dist-packages`` folder, and any that looks like a source checkout
    (``.git``, ``pyproject.toml``, ``.env``)."""
    prefixes = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                  sys.base_exec_prefix)}
    prefixes.add(Path(os.path.realpath(sys.executable)).parent.parent)
    prefixes = {Path(os.path.realpath(p)) for p in prefixes}
    cand = set(prefixes)
    for p in sys.path:
        if not p or not os.path.isdir(p):
            continue
        rp = Path(os.path.realpath(p))
        # only the environment: a folder inside a prefix, or a site-packages/dist-packages folder
        # (user site, a venv's); never a loose PYTHONPATH folder or a script's own folder (/tmp)
        if any(_inside(rp, pre) for pre in prefixes) \
                or rp.name in ("site-packages", "dist-packages"):
            cand.add(rp)
    keep: list[Path] = []
    for p in sorted({Path(os.path.realpath(c)) for c in cand}, key=lambda x: len(x.parts)):
        if p == Path("/") or _inside(p, Path("/usr")) or _inside(p, Path("/proc")):
            continue
        if any(_inside(p, k) for k in keep):
            continue
        if any(_inside(e, p) for e in [_ROOT, *exclude]) or any(_inside(p, e) for e in exclude):
            continue
        if _inside(p, _ROOT) and not ((p / "pyvenv.cfg").is_file()
                                      or p.name in ("site-packages", "dist-packages")):
            continue
        if any((p / marker).exists() for marker in (".git", "pyproject.toml", ".env")):
            continue  # a source checkout on sys.path (editable install): never shown whole

        keep.append(p)
    return keep


def _mkdirs(args: list[str], target: Path, made: set[Path], bound: list[Path]) -> None:
    """``--dir`` (mode 0755) for each missing ancestor of ``target`` (bwrap would copy the host's
    mode, e.g. 0700 for ``/root``, and the sandbox uid could not traverse it)."""
    for anc in reversed(target.parents):
        if anc == Path("/") or anc in made or any(_inside(anc, b) for b in bound):
            continue
        args += ["--perms", "0755", "--dir", str(anc)]
        made.add(anc)


def _preexec(lim: SandboxLimits, procs_files: list[str], pids_enforced: bool):
    """The box's pre-exec: join its cgroups (before bwrap starts, so every descendant is in them),
    own session, ``PR_SET_PDEATHSIG`` = SIGKILL (dies with the process that started it), rlimits."""
    def apply() -> None:
        for f in procs_files:
            fd = os.open(f, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        os.setsid()
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 5))
        mem = lim.memory_mb << 20
        if lim.as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb << 20, lim.file_mb << 20))
        if not pids_enforced:
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.nproc, lim.nproc))
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim.nofile, lim.nofile))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _du(root: Path, limit_entries: int = 200_000) -> int:
    total, n, stack = 0, 0, [str(root)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                n += 1
                if n > limit_entries:
                    return 1 << 62
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
                else:
                    total += st.st_blocks * 512
    return total


def _declared(rel: str, keep: tuple[str, ...] | None) -> bool:
    """Whether output path ``rel`` matches a declared pattern (``fnmatch``; ``**`` spans folders);
    ``keep`` None declares everything."""
    if keep is None:
        return True
    return any(fnmatch.fnmatchcase(rel, pat) for pat in keep)


def _sanitise(root: Path, keep: tuple[str, ...] | None, cap: int,
              max_entries: int = 200_000) -> list[str]:
    """After the box is dead (nothing can race this): remove from ``root`` everything but
    regular, singly-linked files matching ``keep``, and everything if what is left exceeds ``cap``
    bytes or ``max_entries`` entries; hand what is left to root, world-readable (folders 0755,
    files 0644: a later box of another uid reads them read-only). Returns the removed paths
    (relative)."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                os.chmod(p, 0o700)
                continue
            rel = os.path.relpath(p, root)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or not _declared(rel, keep):
                os.unlink(p)
                removed.append(rel)
        dirnames[:] = [d for d in dirnames if os.path.isdir(os.path.join(dirpath, d))
                       and not os.path.islink(os.path.join(dirpath, d))]
    if _du(root, max_entries) > cap:
        for e in os.listdir(root):
            p = root / e
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            removed.append(e)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames:
            p = os.path.join(dirpath, name)
            os.lchown(p, 0, 0)
            os.chmod(p, 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            os.lchown(p, 0, 0)
            os.chmod(p, 0o644)
    return removed


def run_isolated(argv: list[str], *, work: Path, limits: SandboxLimits, stdin: bytes = b"",
                 env: dict[str, str] | None = None, ro_binds: dict[str, Path] | None = None,
                 exclude: list[Path] | None = None,
                 keep: tuple[str, ...] | None = None) -> IsolatedRun:
    """Run ``argv`` in the box described in the module docstring.

    Args:
        argv: the command inside the box (absolute paths of the Python environment work as is).
        work: host folder shown read-write at ``/sandbox/out`` (created; owned by the sandbox uid
            while the box runs, then by root again): the box's only way to hand files back.
        limits: see :class:`SandboxLimits`.
        stdin: bytes fed to the command's stdin.
        env: variables set inside (everything else is cleared); ``PATH`` and ``HOME`` default to
            ``/usr/local/bin:/usr/bin:/bin`` and ``/sandbox``.
        ro_binds: extra read-only binds, box path -> host path.
        exclude: host folders that must never be shown, even if on ``sys.path`` (data directory).
        keep: the declared output: ``fnmatch`` patterns of paths relative to ``work``; every
            other file is deleted afterwards (None: keep every regular file).

    Raises:
        IsolationUnavailable: see :func:`isolation_status` (also: the host cannot enforce a
            cgroup limit in ``limits.require``).
        SandboxError: the box could not start.
    """
    # the cheap checks only: the probe box of isolation_status ran in the server process that
    # accepted the job (a job's runner must not pay seconds for it on every job)
    ok, why = _host_ready(tuple(sorted(limits.require)))
    if not ok:
        raise IsolationUnavailable(f"untrusted code cannot be isolated on this host: {why}")
    return _run_box(argv, work=work, limits=limits, stdin=stdin, env=env, binds=ro_binds,
                    exclude=exclude, keep=keep)


def _run_box(argv: list[str], *, work: Path, limits: SandboxLimits, stdin: bytes = b"",
             env: dict[str, str] | None = None, binds: dict[str, Path] | None = None,
             exclude: list[Path] | None = None, keep: tuple[str, ...] | None = None,
             interact: Any = None, devices: list[str] | None = None) -> IsolatedRun:
    missing = [c for c in limits.require if c not in cgroups.enforced()]
    if missing:
        raise IsolationUnavailable(f"the box's required cgroup limits ({', '.join(missing)}) "
                                   f"cannot be enforced on this host: {cgroups.describe()}")
    bwrap, setpriv = _which("bwrap"), _which("setpriv")
    work.mkdir(parents=True, exist_ok=True)
    os.chown(work, limits.uid, limits.gid)
    os.chmod(work, 0o700)
    args = [bwrap, *_base_args(limits)]  # type: ignore[list-item]
    # /tmp and /sandbox are the box's tmpfs: folders leading to a venv under /tmp are made in it
    # with mode 0755 (bwrap's own would not be traversable by the sandbox uid)
    made: set[Path] = {Path("/tmp"), Path(SANDBOX_DIR)}
    bound: list[Path] = [Path("/usr"), Path("/proc"), Path("/dev")]
    for d in _python_dirs(list(exclude or [])):
        _mkdirs(args, d, made, bound)
        args += ["--ro-bind", str(d), str(d)]
        bound.append(d)
    for inside, host in (binds or {}).items():
        _mkdirs(args, Path(inside), made, bound)
        args += ["--ro-bind", str(host), inside]
    for dev in devices or []:
        args += ["--dev-bind", dev, dev]
    args += ["--bind", str(work), OUT_DIR, "--chdir", SANDBOX_DIR]
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SANDBOX_DIR, "LANG": "C.UTF-8",
                **(env or {})}
    for k, v in full_env.items():
        args += ["--setenv", k, v]
    args += [setpriv, f"--reuid={limits.uid}", f"--regid={limits.gid}", "--clear-groups",
             "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--",
             *argv]  # type: ignore[list-item]
    try:
        group = cgroups.BoxGroup(memory=limits.memory_mb << 20, pids=limits.pids,
                                 cpus=limits.cpus)
    except OSError as exc:
        raise IsolationUnavailable(f"the box's cgroups could not be made: {exc}") from None
    t0 = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env={}, cwd="/", close_fds=True,
                                    preexec_fn=_preexec(limits, group.procs_files(),
                                                        "pids" in group.controllers))
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"the sandbox could not start: {type(exc).__name__}: "
                               f"{exc}") from None
        total, over = [0], threading.Event()
        err = _Capped(proc.stderr, total, limits.output_bytes, over)
        if interact is None:
            out = _Capped(proc.stdout, total, limits.output_bytes, over)

            def feed() -> None:
                try:
                    proc.stdin.write(stdin)  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except (BrokenPipeError, OSError):
                    pass

            threading.Thread(target=feed, daemon=True).start()
        else:
            out = _Talk(proc, interact, over)
        killed: str | None = None
        last_du = 0.0
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now - t0 > limits.wall_s:
                    killed = "wall"
                elif over.is_set():
                    killed = "output"
                elif now - last_du >= 0.5:
                    last_du = now
                    if _du(work, limits.max_entries) > limits.disk_mb << 20:
                        killed = "disk"
                if killed:
                    break
                over.wait(0.1)
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            group.kill()  # whatever left the session (setsid) is still in the group
            proc.wait()
        # the box's init died with bwrap (--die-with-parent): its PID namespace is gone, so
        # every process that held the pipes is dead and the readers see EOF
        out.thread.join(10)
        err.thread.join(10)
        if killed is None and isinstance(out, _Talk) and out.error is not None:
            killed = f"protocol: {type(out.error).__name__}: {out.error}"[:500]
        peak, oom, refused = group.memory_peak(), group.oom_killed(), group.pids_refused()
        controllers = group.controllers
    finally:
        group.remove()
    try:
        discarded = _sanitise(work, keep, limits.disk_mb << 20, limits.max_entries)
    except OSError as exc:
        # a tree the walk cannot handle (paths past PATH_MAX: folders nested by relative mkdir,
        # ENAMETOOLONG) is not declared output: discard all of it (rmtree works by descriptor)
        for e in os.listdir(work):
            p = work / e
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        discarded = ["*"]
        killed = killed or f"output tree: {type(exc).__name__} ({exc.strerror})"
    os.chown(work, 0, 0)
    os.chmod(work, 0o755)
    return IsolatedRun(proc.returncode, out.value(), err.value(), total[0], killed,
                       time.monotonic() - t0, cgroups=controllers, memory_peak=peak,
                       oom_killed=oom, pids_refused=refused, discarded=discarded)


def forbid_text_source_import() -> None:
    """In this process, refuse to import any kernel source given as text (``SourceRef.text``).

    The job runner calls this before it touches a submitted spec: it must only read the artifacts
    the sandbox produced; if any code path would compile (and so import) the untrusted text
    outside the box, it gets :class:`kernels.SpecError` instead.
    """
    from kernels.spec import SourceRef, SpecError

    original = SourceRef.load
    if getattr(original, "_ailower_guard", False):
        return

    def load(self, cache_dir: Path | None = None) -> Any:
        if self.text is not None:
            raise SpecError("source", "a submitted kernel source is compiled only in the sandbox; "
                            "its compiled artifacts are missing from the sandbox's cache")
        return original(self, cache_dir)

    load._ailower_guard = True  # type: ignore[attr-defined]
    SourceRef.load = load  # type: ignore[method-assign]


def _read_result(path: Path, cap: int = 1 << 20) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(cap + 1)
    if len(data) > cap:
        return None
    try:
        out = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return out if isinstance(out, dict) else None


#: the compile box's declared output: its answer and the reference cache entries
#: (:func:`harness.reference.compile_reference`'s layout); anything else it writes is discarded
COMPILE_OUTPUT = ("result.json",
                  *(f"cache/reference/*/{f}" for f in ("artifacts.json", "kernel.cubin",
                                                       "kernel.ttir", "kernel.ttgir",
                                                       "kernel.llir", "kernel.ptx")))


def compile_untrusted(spec: dict[str, Any], arch: str, *, work: Path, max_ptx_version: int,
                      limits: SandboxLimits, exclude: list[Path] | None = None) -> SandboxResult:
    """Compile ``spec`` (a KernelSpec as JSON data, source given as text) in the box.

    The child (:mod:`server._compile_child`) compiles every config into ``work/cache`` (the cache
    the job then reads) and writes ``work/result.json``.

    Args:
        spec: the KernelSpec's JSON form (already checked by :mod:`server.source_check`).
        arch: the target (``sm_90a`` ...).
        work: the attempt's fresh, empty output folder (shown read-write at ``/sandbox/out``);
            afterwards it holds only :data:`COMPILE_OUTPUT`.
        max_ptx_version: as for :func:`harness.compile_reference`.
        limits: see :class:`SandboxLimits`.
        exclude: host folders never to show (the data directory).

    Raises:
        IsolationUnavailable: the host cannot isolate the compile.
        SandboxError: the box was killed (a limit), exited non-zero, or its answer is unreadable.
    """
    if work.exists() and any(work.iterdir()):
        raise SandboxError(f"the compile's output folder {work} is not empty (each attempt "
                           "gets a fresh one)")
    req = json.dumps({"spec": spec, "arch": arch, "cache_dir": f"{OUT_DIR}/cache",
                      "home": f"{SANDBOX_DIR}/home", "result": f"{OUT_DIR}/result.json",
                      "max_ptx_version": max_ptx_version})
    binds = _packages(_PACKAGES)
    binds[f"{PACKAGES_DIR}/_compile_child.py"] = _CHILD
    boot = (f"import sys; sys.path.insert(0, {PACKAGES_DIR!r}); import _compile_child; "
            "_compile_child.main()")
    run = run_isolated([sys.executable, "-I", "-c", boot], work=work, limits=limits,
                       stdin=req.encode(), ro_binds=binds, exclude=exclude, keep=COMPILE_OUTPUT,
                       env={"TRITON_CACHE_DIR": f"{SANDBOX_DIR}/home/triton-cache"})
    tail = run.stderr.decode(errors="replace")[-2000:]
    if run.killed == "wall":
        raise SandboxError(f"the sandboxed compile ran past its wall-clock limit "
                           f"({limits.wall_s:g} s) and was killed")
    if run.killed == "output":
        raise SandboxError(f"the sandboxed compile wrote more than {limits.output_bytes} bytes "
                           "to stdout/stderr (e.g. tl.static_print) and was killed")
    if run.killed == "disk":
        raise SandboxError(f"the sandboxed compile wrote more than {limits.disk_mb} MiB or "
                           f"{limits.max_entries} files and was killed")
    if run.oom_killed:
        raise SandboxError(f"the sandboxed compile ran out of its memory limit "
                           f"({limits.memory_mb} MiB, tmpfs and shared memory included) and was "
                           "killed")
    if run.returncode != 0:
        sig = -run.returncode if run.returncode < 0 else None
        if run.returncode > 128:
            sig = run.returncode - 128  # bwrap reports a signalled child as 128 + signal
        why = {signal.SIGXCPU: f"CPU-time limit ({limits.cpu_s} s)",
               signal.SIGKILL: "killed (memory or CPU limit)",
               signal.SIGXFSZ: f"file-size limit ({limits.file_mb} MiB)"}.get(
                   sig, f"exit status {run.returncode}")  # type: ignore[arg-type]
        raise SandboxError(f"the sandboxed compile failed: {why}; stderr: {tail}")
    data = _read_result(work / "result.json")
    if data is None:
        raise SandboxError(f"the sandboxed compile gave no readable answer; stderr: {tail}")
    if "error" in data:
        raise SandboxError(f"the sandboxed compile failed: {str(data['error'])[:4000]}")
    try:
        return SandboxResult(compiled=[str(x) for x in data["compiled"]],
                             failures=[str(x) for x in data["failures"]],
                             expected=[str(x) for x in data["expected"]], seconds=run.seconds,
                             cache_dir=work / "cache")
    except (KeyError, TypeError) as exc:
        raise SandboxError(f"the sandboxed compile's answer is malformed: {exc}") from None


_RUNNER_CHILD = Path(__file__).resolve().parent / "_runner_child.py"
#: the runner box's declared output
RUNNER_OUTPUT = ("transcript.jsonl",)
_MAX_LINE = 64 << 20  # bytes of one protocol line from the runner box
#: progress events one job box may send, and the JSON bytes of each (they are stored in the
#: database): a loop sends a handful per iteration, an iteration event is a few KiB
MAX_BOX_EVENTS = 10_000
MAX_EVENT_BYTES = 256 << 10


def _readline(stdout) -> dict[str, Any]:
    line = stdout.readline(_MAX_LINE + 1)
    if not line:
        raise EOFError("the runner box closed its output")
    if len(line) > _MAX_LINE:
        raise SandboxError(f"the runner box sent a line over {_MAX_LINE} bytes")
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise SandboxError("the runner box sent a message that is not an object")
    return msg


def lower_in_box(request: dict[str, Any], *, cache: Path, work: Path, limits: SandboxLimits,
                 provider: Any = None, on_event: Any = None, exclude: list[Path] | None = None,
                 ptxas: str | None = None, devices: list[str] | None = None
                 ) -> tuple[dict[str, Any], bytes, IsolatedRun]:
    """Run the agent loop on a source job's tenant-derived artifacts in a box
    (:mod:`server._runner_child`): the compiled reference cache ``cache`` (written by the compile
    box) is shown read-only, and ptxas, the verifier, the emulator and the GPU harness all run
    under ``limits``.

    Args:
        request: ``spec`` (JSON form), ``arch``, ``iterations``, ``gpu``, ``max_ptx_version``,
            ``provider`` (name), ``hang_timeout_s``, ``job_timeout_s``.
        cache: host folder of the compile box's reference cache (read-only at ``/sandbox/in``).
        work: fresh, empty host folder for the box's declared output (``transcript.jsonl``).
        limits: the box's limits.
        provider: the model provider (called here, outside the box; its tool calls are relayed
            into the box); None for ``triton`` (runs inside).
        on_event: ``(kind, data)`` progress listener.
        exclude: host folders never shown (the data directory).
        ptxas: host path of the ptxas to use (shown read-only at the same path) or None.
        devices: device nodes to show (``/dev/nvidia*`` on a GPU host).

    Returns:
        ``(result, cubin, run)``: the loop's :class:`agent.loop.LoweringResult` as JSON data (the
        caller validates it), the best candidate's cubin, and the box's run record.

    Raises:
        IsolationUnavailable: the host cannot isolate the work.
        SandboxError: the box was killed (a limit, a protocol violation), or the loop failed
            (message: the failure).
    """
    import base64

    if work.exists() and any(work.iterdir()):
        raise SandboxError(f"the runner box's output folder {work} is not empty")
    req = {**request, "cache_dir": f"{SANDBOX_DIR}/in", "transcript": f"{OUT_DIR}/transcript.jsonl",
           "ptxas": ptxas}
    binds = _packages(RUNNER_PACKAGES)
    binds[f"{PACKAGES_DIR}/_runner_child.py"] = _RUNNER_CHILD
    binds[f"{SANDBOX_DIR}/in"] = cache
    if ptxas:
        binds[ptxas] = Path(ptxas)
    answer: dict[str, Any] = {}
    n_events = [0]

    def relay(msg: dict[str, Any]) -> None:
        """One progress event from the box, bounded in number and size before it is stored."""
        n_events[0] += 1
        data = msg.get("data") or {}
        if n_events[0] > MAX_BOX_EVENTS:
            raise SandboxError(f"the job's box sent more than {MAX_BOX_EVENTS} events")
        if not isinstance(data, dict) or len(json.dumps(data, default=str)) > MAX_EVENT_BYTES:
            raise SandboxError(f"the job's box sent an event that is not an object of at most "
                               f"{MAX_EVENT_BYTES} bytes")
        if on_event is not None:
            on_event(str(msg.get("kind"))[:64], data)

    def interact(stdin, stdout) -> None:
        from agent.providers.base import ProposalContext

        def send(msg: dict[str, Any]) -> None:
            stdin.write((json.dumps(msg, default=str) + "\n").encode())
            stdin.flush()

        send(req)
        ctx = None
        while True:
            msg = _readline(stdout)
            op = msg.get("op")
            if op == "event":
                relay(msg)
            elif op == "propose":
                if provider is None:
                    raise SandboxError("the runner box asked for a proposal of the triton provider")
                if "ctx" in msg:
                    ctx = ProposalContext.model_validate(
                        {**msg["ctx"], "reference_cubin": base64.b64decode(msg.get("ctx_cubin")
                                                                           or "")})
                if ctx is None:
                    raise SandboxError("the runner box asked for a proposal without a context")

                def tools(name: str, args: dict[str, Any]) -> str:
                    send({"op": "tool", "name": name, "args": args})
                    while True:
                        m = _readline(stdout)
                        if m.get("op") == "event":
                            relay(m)
                            continue
                        if m.get("op") != "tool_result":
                            raise SandboxError(f"the runner box answered a tool call with "
                                               f"{m.get('op')!r}")
                        if "error" in m:
                            raise ValueError(str(m["error"]))
                        return str(m.get("text", ""))

                prop = provider.propose(ctx, msg.get("feedback"), tools)
                send({"op": "proposal", "proposal": prop.model_dump(mode="json")})
            elif op in ("result", "error"):
                answer.update(msg)
                return
            else:
                raise SandboxError(f"the runner box sent an unknown message {op!r}")

    ready, why = _host_ready(tuple(sorted(limits.require)))
    if not ready:
        raise IsolationUnavailable(f"untrusted work cannot be isolated on this host: {why}")
    run = _run_box([sys.executable, "-I", "-c",
                    f"import sys; sys.path.insert(0, {PACKAGES_DIR!r}); import _runner_child; "
                    "_runner_child.main()"], work=work, limits=limits, binds=binds,
                   exclude=exclude, keep=RUNNER_OUTPUT, interact=interact, devices=devices,
                   env={"PYTHONPATH": PACKAGES_DIR})  # the GPU worker is a `python -m harness...`
    tail = run.stderr.decode(errors="replace")[-2000:]
    if run.oom_killed:
        raise SandboxError(f"the job's box ran out of its memory limit ({limits.memory_mb} MiB) "
                           "and was killed")
    if run.killed == "wall":
        raise SandboxError(f"the job's box ran past its wall-clock limit ({limits.wall_s:g} s)")
    if run.killed:
        raise SandboxError(f"the job's box was killed ({run.killed}); stderr: {tail}")
    if answer.get("op") == "error":
        raise SandboxError(f"{answer.get('type')}: {answer.get('message')}")
    if answer.get("op") != "result":
        raise SandboxError(f"the job's box gave no answer (exit {run.returncode}); "
                           f"stderr: {tail}")
    cubin = base64.b64decode(answer.get("cubin") or "")
    return dict(answer["result"]), cubin, run
