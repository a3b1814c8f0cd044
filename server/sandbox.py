"""OS-level isolation of untrusted work: the compile of a submitted kernel runs in a bubblewrap box.

Untrusted Triton source executes Python at compile time (Triton's code generator calls what it
reaches), so the compile is treated as arbitrary code. :func:`run_isolated` runs a command as
follows (the server must start as root; it never runs untrusted code as root):

* ``bwrap`` (bubblewrap, Debian package ``bubblewrap``) builds new mount, PID, network, IPC, UTS
  and cgroup namespaces; the new root is a tmpfs holding, read-only, ``/usr`` and the Python
  environment's own folders (``sys.prefix``, ``sys.base_prefix``, the ``sys.path`` folders outside
  the project and the data directory), the two project packages the compile needs
  (``harness``, ``kernels``, at ``/opt/ailower``), a fresh ``/proc`` (only the box's processes),
  a minimal ``/dev``, a size-capped private ``/tmp`` and, read-write, one work folder of the job
  at ``/sandbox``. Nothing else of the host is visible: not the data directory, the database,
  the repository (its ``.env``), ``/etc``, ``/root``, other processes or their environments.
  The network namespace has only a down loopback.
* ``setpriv`` (util-linux) then drops to an unprivileged uid/gid (default 65534, ``nobody``)
  with no supplementary groups, an empty capability bounding set and ``no_new_privs``; the
  environment is emptied (``--clearenv``) and only ``HOME``, ``PATH``, ``TRITON_CACHE_DIR`` set.
* rlimits: ``RLIMIT_CPU`` (CPU seconds), ``RLIMIT_AS`` (address space), ``RLIMIT_FSIZE`` (bytes per
  file), ``RLIMIT_NPROC`` (processes of the sandbox uid), ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0;
  the parent enforces the wall-clock limit, a cap on the bytes written under ``/sandbox`` (polled)
  and a cap on stdout+stderr bytes (only a head and a tail are kept, so a flood cannot grow the
  parent's memory).
* at the end (normal exit, a limit, or the parent dying: ``--die-with-parent`` and
  ``PR_SET_PDEATHSIG``), the box's PID namespace is torn down, which kills every descendant,
  ``setsid`` daemons included. Afterwards every symlink, FIFO, socket, device node and
  multiply-linked file is removed from the work folder before the caller reads it.

When bwrap or setpriv is missing, user namespaces are disabled, or the service is not root,
:func:`isolation_status` says why and :func:`run_isolated` raises :class:`IsolationUnavailable`;
the service then refuses source submissions (suite-kernel submissions still work).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SandboxLimits", "SandboxResult", "SandboxError", "IsolationUnavailable",
           "IsolatedRun", "compile_untrusted", "run_isolated", "isolation_status",
           "forbid_text_source_import", "SANDBOX_DIR", "PACKAGES_DIR"]

SANDBOX_DIR = "/sandbox"       # the work folder inside the box
PACKAGES_DIR = "/opt/ailower"  # the project packages inside the box
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("harness", "kernels")
_CHILD = Path(__file__).resolve().parent / "_compile_child.py"


class SandboxError(RuntimeError):
    """The sandboxed run failed, ran out of a limit, or answered garbage (message says which)."""


class IsolationUnavailable(SandboxError):
    """The host cannot isolate untrusted code (bwrap/setpriv missing, not root, no namespaces)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run.

    Attributes:
        cpu_s: ``RLIMIT_CPU`` per process (CPU seconds).
        memory_mb: ``RLIMIT_AS`` per process (MiB).
        wall_s: wall-clock limit of the whole run (seconds).
        file_mb: ``RLIMIT_FSIZE``: largest file a process may write (MiB).
        disk_mb: bytes the run may leave under its work folder (MiB, polled every 0.5 s).
        tmp_mb: size of the private ``/tmp`` tmpfs (MiB).
        nproc: ``RLIMIT_NPROC`` (processes and threads of the sandbox uid).
        nofile: ``RLIMIT_NOFILE`` (open files per process).
        output_bytes: stdout + stderr bytes the run may write before it is killed.
        uid, gid: the unprivileged identity the code runs as (65534 = ``nobody``/``nogroup``).
    """

    cpu_s: int = 300
    memory_mb: int = 8192
    wall_s: float = 600.0
    file_mb: int = 256
    disk_mb: int = 2048
    tmp_mb: int = 512
    nproc: int = 512
    nofile: int = 1024
    output_bytes: int = 16 << 20
    uid: int = 65534
    gid: int = 65534


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
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    output_bytes: int
    killed: str | None
    seconds: float


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


@functools.lru_cache(maxsize=1)
def isolation_status() -> tuple[bool, str]:
    """Whether :func:`run_isolated` can work on this host, and why not (probed once per process).

    Needs: effective uid 0 (to build the box and drop to the sandbox uid), ``bwrap`` and
    ``setpriv`` on the system ``PATH``, and a probe run of ``/bin/true`` in a box to succeed.
    """
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
    argv = [bwrap, *_base_args(SandboxLimits()), setpriv, "--reuid=65534", "--regid=65534",
            "--clear-groups", "--no-new-privs", "--", "/usr/bin/env", "true"]
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                           env={}, close_fds=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"a probe of bubblewrap failed: {type(exc).__name__}: {exc}"
    if r.returncode != 0:
        return False, (f"a probe of bubblewrap failed (exit {r.returncode}): "
                       f"{r.stderr.decode(errors='replace').strip()[:300]}")
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
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "01777",
             "--size", str(lim.tmp_mb << 20), "--tmpfs", "/tmp"]
    return args


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _python_dirs(exclude: list[Path]) -> list[Path]:
    """Folders of the Python environment to show read-only: prefixes and those ``sys.path``
    folders that are inside a prefix or named ``site-packages``/``dist-packages``, minus anything
    inside (or containing) the project, the data directory or ``exclude``, and any folder that
    looks like a source checkout (``.git``, ``pyproject.toml``, ``.env``)."""
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
        if any(_inside(p, e) or _inside(e, p) for e in [_ROOT, *exclude]):
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


def _rlimits(lim: SandboxLimits):
    def apply() -> None:
        os.setsid()
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 5))
        mem = lim.memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb << 20, lim.file_mb << 20))
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


def _sanitise(root: Path) -> list[str]:
    """Remove from ``root`` everything but regular, singly-linked files and folders (the box is
    dead, so nothing can race this). Returns the removed paths (relative)."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                os.chmod(p, 0o700)
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                os.unlink(p)
                removed.append(os.path.relpath(p, root))
        dirnames[:] = [d for d in dirnames if os.path.isdir(os.path.join(dirpath, d))
                       and not os.path.islink(os.path.join(dirpath, d))]
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), 0, 0)
    return removed


def run_isolated(argv: list[str], *, work: Path, limits: SandboxLimits, stdin: bytes = b"",
                 env: dict[str, str] | None = None, ro_binds: dict[str, Path] | None = None,
                 exclude: list[Path] | None = None) -> IsolatedRun:
    """Run ``argv`` in the box described in the module docstring.

    Args:
        argv: the command inside the box (absolute paths of the Python environment work as is).
        work: host folder shown read-write at ``/sandbox`` (created; owned by the sandbox uid
            while the box runs, then by root again with links and special files removed).
        limits: see :class:`SandboxLimits`.
        stdin: bytes fed to the command's stdin.
        env: variables set inside (everything else is cleared); ``PATH`` and ``HOME`` default to
            ``/usr/local/bin:/usr/bin:/bin`` and ``/sandbox``.
        ro_binds: extra read-only binds, box path -> host path.
        exclude: host folders that must never be shown, even if on ``sys.path`` (data directory).

    Raises:
        IsolationUnavailable: see :func:`isolation_status`.
    """
    ok, why = isolation_status()
    if not ok:
        raise IsolationUnavailable(f"untrusted code cannot be isolated on this host: {why}")
    bwrap, setpriv = _which("bwrap"), _which("setpriv")
    work.mkdir(parents=True, exist_ok=True)
    os.chown(work, limits.uid, limits.gid)
    os.chmod(work, 0o700)
    args = [bwrap, *_base_args(limits)]  # type: ignore[list-item]
    made: set[Path] = set()
    bound: list[Path] = [Path("/usr"), Path("/proc"), Path("/dev"), Path("/tmp")]
    for d in _python_dirs(list(exclude or [])):
        _mkdirs(args, d, made, bound)
        args += ["--ro-bind", str(d), str(d)]
        bound.append(d)
    for inside, host in (ro_binds or {}).items():
        _mkdirs(args, Path(inside), made, bound)
        args += ["--ro-bind", str(host), inside]
    args += ["--bind", str(work), SANDBOX_DIR, "--chdir", SANDBOX_DIR]
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SANDBOX_DIR, "LANG": "C.UTF-8",
                **(env or {})}
    for k, v in full_env.items():
        args += ["--setenv", k, v]
    args += [setpriv, f"--reuid={limits.uid}", f"--regid={limits.gid}", "--clear-groups",
             "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--",
             *argv]  # type: ignore[list-item]
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={}, cwd="/", close_fds=True,
                                preexec_fn=_rlimits(limits))
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"the sandbox could not start: {type(exc).__name__}: {exc}") from None
    total, over = [0], threading.Event()
    out = _Capped(proc.stdout, total, limits.output_bytes, over)
    err = _Capped(proc.stderr, total, limits.output_bytes, over)

    def feed() -> None:
        try:
            proc.stdin.write(stdin)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=feed, daemon=True).start()
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
                if _du(work) > limits.disk_mb << 20:
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
        proc.wait()
    # the box's init died with bwrap (--die-with-parent): its PID namespace is gone, so every
    # process that held the pipes is dead and the readers see EOF
    out.thread.join(10)
    err.thread.join(10)
    _sanitise(work)
    os.chown(work, 0, 0)
    return IsolatedRun(proc.returncode, out.value(), err.value(), total[0], killed,
                       time.monotonic() - t0)


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


def compile_untrusted(spec: dict[str, Any], arch: str, *, work: Path, max_ptx_version: int,
                      limits: SandboxLimits, exclude: list[Path] | None = None) -> SandboxResult:
    """Compile ``spec`` (a KernelSpec as JSON data, source given as text) in the box.

    The child (:mod:`server._compile_child`) compiles every config into ``work/cache`` (the cache
    the job then reads) and writes ``work/result.json``.

    Args:
        spec: the KernelSpec's JSON form (already checked by :mod:`server.source_check`).
        arch: the target (``sm_90a`` ...).
        work: the job's sandbox folder (shown read-write at ``/sandbox``).
        max_ptx_version: as for :func:`harness.compile_reference`.
        limits: see :class:`SandboxLimits`.
        exclude: host folders never to show (the data directory).

    Raises:
        IsolationUnavailable: the host cannot isolate the compile.
        SandboxError: the box was killed (a limit), exited non-zero, or its answer is unreadable.
    """
    work.mkdir(parents=True, exist_ok=True)
    (work / "result.json").unlink(missing_ok=True)
    req = json.dumps({"spec": spec, "arch": arch, "cache_dir": f"{SANDBOX_DIR}/cache",
                      "home": f"{SANDBOX_DIR}/home", "result": f"{SANDBOX_DIR}/result.json",
                      "max_ptx_version": max_ptx_version})
    binds = {f"{PACKAGES_DIR}/{p}": _ROOT / p for p in _PACKAGES}
    binds[f"{PACKAGES_DIR}/_compile_child.py"] = _CHILD
    boot = (f"import sys; sys.path.insert(0, {PACKAGES_DIR!r}); import _compile_child; "
            "_compile_child.main()")
    run = run_isolated([sys.executable, "-I", "-c", boot], work=work, limits=limits,
                       stdin=req.encode(), ro_binds=binds, exclude=exclude,
                       env={"TRITON_CACHE_DIR": f"{SANDBOX_DIR}/home/triton-cache"})
    tail = run.stderr.decode(errors="replace")[-2000:]
    if run.killed == "wall":
        raise SandboxError(f"the sandboxed compile ran past its wall-clock limit "
                           f"({limits.wall_s:g} s) and was killed")
    if run.killed == "output":
        raise SandboxError(f"the sandboxed compile wrote more than {limits.output_bytes} bytes "
                           "to stdout/stderr (e.g. tl.static_print) and was killed")
    if run.killed == "disk":
        raise SandboxError(f"the sandboxed compile wrote more than {limits.disk_mb} MiB and was "
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
