"""The OS sandbox on its own (no server): code that got past the source policy runs as the
unprivileged sandbox uid in its own namespaces and can read no server file, no environment of the
parent, cannot write outside its work folder, has no network, and leaves no process behind.

The payload is a real Triton escape (``tl.core.builtins.exec``) compiled by the sandbox child
directly, i.e. as if a hole in :mod:`server.source_check` had let it through.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from server.sandbox import (
    IsolationUnavailable,
    SandboxError,
    SandboxLimits,
    compile_untrusted,
    run_isolated,
)
from server.source_check import SourceRejected, check_triton_source

from .sandbox_payloads import softmax_with

from .conftest import needs_isolation  # noqa: E402  (an error, not a skip, in CI)

pytestmark = needs_isolation

SECRET = "sk-ant-test-" + "7" * 24


def _nobody_pids() -> set[int]:
    """Host pids of processes owned by uid 65534 (the sandbox uid)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = Path(f"/proc/{d}/status").read_text()
            except OSError:
                continue
            uid = next((ln.split()[1] for ln in st.splitlines() if ln.startswith("Uid:")), "")
            if uid == "65534":
                out.add(int(d))
    return out


PROBE = r'''
import json, os, socket, subprocess
r = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
def t(name, f):
    try:
        r[name] = ["ok", repr(f())[:300]]
    except BaseException as e:
        r[name] = ["err", type(e).__name__]
t("db", lambda: open(DB, "rb").read())
t("data_dir", lambda: os.listdir(DATA))
t("repo", lambda: os.listdir(REPO))
t("dotenv", lambda: open(REPO + "/.env").read())
t("parent_environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read())
t("host_pid_environ", lambda: open("/proc/%d/environ" % HOSTPID, "rb").read())
t("pid1_environ", lambda: open("/proc/1/environ", "rb").read())
t("own_environ", lambda: dict(os.environ))
t("etc_passwd", lambda: open("/etc/passwd").read())
t("root_home", lambda: os.listdir("/root"))
t("write_outside", lambda: open(OUTSIDE, "w").write("x"))
t("write_usr", lambda: open("/usr/ail_probe", "w").write("x"))
t("write_tmp", lambda: open("/tmp/ail_probe", "w").write("x"))
t("symlink_db", lambda: os.symlink(DB, "/sandbox/out/link_to_db"))
t("net_out", lambda: socket.create_connection(("1.1.1.1", 80), timeout=2))
t("net_host", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))
t("procs", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
t("setuid0", lambda: os.setuid(0))
t("daemon", lambda: subprocess.Popen(["setsid", "sleep", "300"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)
open("/sandbox/out/probe.json", "w").write(json.dumps(r))
'''


@pytest.fixture()
def host(tmp_path, monkeypatch):
    """A fake server data dir (DB with a secret row), a secret in this process's environment, a
    listening loopback port, and an outside marker path."""
    data = Path("/var/tmp") / f"ail-sb-{os.getpid()}-{time.monotonic_ns()}"  # not under /tmp
    data.mkdir(mode=0o700)
    (data / "ailower.db").write_text("SECRET-ROW tenant-b job")
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    yield {"data": data, "db": data / "ailower.db", "outside": data / "outside-marker",
           "port": srv.getsockname()[1], "work": tmp_path / "work"}
    srv.close()
    for p in sorted(data.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() else p.rmdir()
    data.rmdir()


def _check_probe(r: dict, host: dict) -> None:
    assert r["uid"] == 65534 and r["gid"] == 65534 and r["groups"] == []
    for k in ("db", "data_dir", "dotenv", "parent_environ", "host_pid_environ",
              "pid1_environ", "etc_passwd", "write_outside", "write_usr",
              "net_out", "net_host", "setuid0"):
        assert r[k][0] == "err", (k, r[k])
    # /root shows only the folders leading to the Python environment, if it lives there
    from server.sandbox import _python_dirs

    shown = {d.relative_to("/root").parts[0] for d in _python_dirs([]) if d.parts[1:2] == ("root",)}
    if r["root_home"][0] == "ok":
        assert set(json.loads(r["root_home"][1].replace("'", '"'))) <= shown, r["root_home"]
    # the checkout likewise: nothing of it but a '.venv' holding the Python environment (the
    # README's layout), never its sources or '.env'
    repo = Path(__file__).resolve().parents[2]
    in_repo = {d.relative_to(repo).parts[0] for d in _python_dirs([]) if d.is_relative_to(repo)}
    if r["repo"][0] == "ok":
        assert set(json.loads(r["repo"][1].replace("'", '"'))) <= in_repo, r["repo"]
    assert SECRET not in json.dumps(r) and "SECRET-ROW" not in json.dumps(r)
    env = r["own_environ"][1]
    assert "ANTHROPIC" not in env and "AILOWER" not in env, env
    assert r["write_tmp"][0] == "ok"  # its own private /tmp
    assert not Path("/tmp/ail_probe").exists() or Path("/tmp/ail_probe").stat().st_uid != 65534
    procs = json.loads(r["procs"][1].replace("'", '"')) if r["procs"][0] == "ok" else []
    assert len(procs) <= 8, procs  # its own PID namespace: a handful of its own processes
    assert not host["outside"].exists()
    assert not Path("/usr/ail_probe").exists()


def _wait_no_new_nobody(before: set[int], timeout: float = 5.0) -> set[int]:
    deadline = time.monotonic() + timeout
    left = _nobody_pids() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _nobody_pids() - before
    return left


def test_python_payload_is_contained(host):
    before = _nobody_pids()
    code = PROBE.replace("DB", repr(str(host["db"]))).replace("DATA", repr(str(host["data"]))) \
        .replace("REPO", repr(str(Path(__file__).resolve().parents[2]))) \
        .replace("HOSTPID", str(os.getpid())).replace("OUTSIDE", repr(str(host["outside"]))) \
        .replace("PORT", str(host["port"]))
    run = run_isolated([sys.executable, "-I", "-c", code], work=host["work"],
                       limits=SandboxLimits(wall_s=60), exclude=[host["data"]])
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    probe = host["work"] / "probe.json"
    assert probe.exists()  # the marker proves the payload ran -- inside the box
    r = json.loads(probe.read_text())
    _check_probe(r, host)
    assert r["daemon"][0] == "ok"  # it could start a setsid daemon ...
    assert _wait_no_new_nobody(before) == set()  # ... which died with the box
    assert not (host["work"] / "link_to_db").exists()  # symlinks are removed afterwards
    assert (host["work"] / "probe.json").stat().st_uid == 0  # handed back to root


def test_triton_escape_that_passed_the_policy_is_contained(host, monkeypatch):
    """The escape from issue 8, compiled by the sandbox child directly (as if it had passed the
    policy): it really executes -- and only inside the box."""
    import server.sandbox as sb

    # the payload's report is undeclared output, which is discarded: declare it for this test
    monkeypatch.setattr(sb, "COMPILE_OUTPUT", (*sb.COMPILE_OUTPUT, "probe.json"))
    before = _nobody_pids()
    code = PROBE.replace("DB", repr(str(host["db"]))).replace("DATA", repr(str(host["data"]))) \
        .replace("REPO", repr(str(Path(__file__).resolve().parents[2]))) \
        .replace("HOSTPID", str(os.getpid())).replace("OUTSIDE", repr(str(host["outside"]))) \
        .replace("PORT", str(host["port"]))
    outer = f"exec({code!r}, {{}})"  # a fresh namespace: exec() would share Triton's frame
    spec = softmax_with([f"tl.core.builtins.exec({outer!r}.value)"])
    with pytest.raises(SourceRejected, match=r"source:5:5: 'tl.core.builtins.exec' is not in"):
        check_triton_source(spec["source"]["text"], "softmax_kernel")
    res = compile_untrusted(spec, "sm_90a", work=host["work"], max_ptx_version=90,
                            limits=SandboxLimits(wall_s=120), exclude=[host["data"]])
    assert res.complete, res
    r = json.loads((host["work"] / "probe.json").read_text())
    _check_probe(r, host)
    assert _wait_no_new_nobody(before) == set()


def test_limits_wall_and_output_and_fsize(tmp_path):
    before = _nobody_pids()
    t0 = time.monotonic()
    run = run_isolated([sys.executable, "-I", "-c", "import subprocess, time\n"
                        "subprocess.Popen(['setsid', 'sleep', '300'])\ntime.sleep(300)"],
                       work=tmp_path / "w1", limits=SandboxLimits(wall_s=2))
    assert run.killed == "wall" and time.monotonic() - t0 < 15
    assert _wait_no_new_nobody(before) == set()
    run = run_isolated([sys.executable, "-I", "-c",
                        "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
                       work=tmp_path / "w2", limits=SandboxLimits(wall_s=60, output_bytes=4 << 20))
    assert run.killed == "output" and run.output_bytes > 4 << 20
    assert len(run.stdout) < 100_000  # only a head and a tail are kept
    run = run_isolated([sys.executable, "-I", "-c",
                        "open('/sandbox/out/big', 'wb').write(b'0' * (3 << 20))"],
                       work=tmp_path / "w3", limits=SandboxLimits(wall_s=60, file_mb=1))
    assert run.returncode != 0 and (tmp_path / "w3" / "big").stat().st_size <= 1 << 20


def _rss_kb() -> int:
    st = Path("/proc/self/status").read_text()
    return int(next(ln.split()[1] for ln in st.splitlines() if ln.startswith("VmRSS:")))


def test_flood_under_the_cap_keeps_parent_memory_flat(tmp_path):
    """96 MiB of output below the kill cap: the parent keeps only a head and a tail."""
    rss0 = _rss_kb()
    run = run_isolated([sys.executable, "-I", "-c",
                        "import sys\nfor _ in range(1536): sys.stdout.write('y' * 65536)"],
                       work=tmp_path / "w", limits=SandboxLimits(wall_s=60, output_bytes=1 << 30))
    assert run.killed is None and run.returncode == 0
    assert run.output_bytes == 1536 * 65536
    assert len(run.stdout) < 100_000 and b"bytes dropped" in run.stdout
    assert _rss_kb() - rss0 < 30_000  # KiB; the flood itself is 96 MiB


def test_disk_and_process_limits(tmp_path):
    run = run_isolated([sys.executable, "-I", "-c",
                        "import os\nfor i in range(40):\n"
                        "    open(f'/sandbox/out/f{i}', 'wb').write(os.urandom(8 << 20))"],
                       work=tmp_path / "w1", limits=SandboxLimits(wall_s=60, disk_mb=32,
                                                                  file_mb=16))
    assert run.killed == "disk", run
    run = run_isolated([sys.executable, "-I", "-c",
                        "import subprocess\nn = 0\ntry:\n    for _ in range(200):\n"
                        "        subprocess.Popen(['sleep', '30']); n += 1\n"
                        "except OSError as e:\n    print('stopped', n, type(e).__name__)"],
                       work=tmp_path / "w2", limits=SandboxLimits(wall_s=30, pids=24))
    out = run.stdout.decode()
    assert out.startswith("stopped"), (out, run.stderr[-500:])
    assert int(out.split()[1]) < 24 and run.pids_refused  # the box's pids cgroup said no


def test_compile_wall_limit_is_a_clear_error(tmp_path):
    spec = softmax_with(["for i in tl.static_range(100000000):", "    pass"])
    check_triton_source(spec["source"]["text"], "softmax_kernel")  # passes the policy
    with pytest.raises(SandboxError, match="wall-clock limit"):
        compile_untrusted(spec, "sm_90a", work=tmp_path / "w", max_ptx_version=90,
                          limits=SandboxLimits(wall_s=4))


def test_isolation_unavailable_is_explicit(monkeypatch, tmp_path):
    import server.sandbox as sb

    monkeypatch.setattr(sb, "_host_ready", lambda *a: (False, "bwrap missing (test)"))
    with pytest.raises(IsolationUnavailable, match="bwrap missing"):
        run_isolated(["/usr/bin/true"], work=tmp_path / "w", limits=SandboxLimits())


MEMFD = r'''
import os, sys
kind, n = sys.argv[1], 0
if kind == "memfd":
    fd = os.memfd_create("hold")
else:
    fd = os.open("/tmp/hold" if kind == "tmp" else "/sandbox/hold", os.O_CREAT | os.O_WRONLY)
chunk = b"x" * (16 << 20)
try:
    for _ in range(64):          # up to 1 GiB of shmem pages, far past the 256 MiB limit
        os.write(fd, chunk); n += 1
        print(n * 16, flush=True)
except OSError as e:
    print("refused", type(e).__name__, flush=True)
'''


@pytest.mark.parametrize("kind", ["memfd", "tmp", "scratch"])
def test_shared_memory_is_held_to_the_memory_limit(tmp_path, kind):
    """memfd / tmpfs pages are not address space (RLIMIT_AS never sees them); the box's memory
    cgroup counts them: the writer is stopped (killed or refused) near 256 MiB, not at 1 GiB."""
    lim = SandboxLimits(wall_s=60, memory_mb=256, tmp_mb=2048, scratch_mb=2048)
    run = run_isolated([sys.executable, "-I", "-c", MEMFD, kind], work=tmp_path / "w", limits=lim)
    lines = run.stdout.decode().split()
    held = max((int(x) for x in lines if x.isdigit()), default=0)  # MiB written and held
    assert "memory" in run.cgroups
    assert held <= 256, (held, run)
    assert run.oom_killed or "refused" in lines, run
    assert run.memory_peak is not None and run.memory_peak <= (256 << 20) + (4 << 20)


def test_one_box_process_flood_leaves_another_uid_box_working(tmp_path):
    """A box holding its whole pids limit (and sleeping on) does not stop a second box from
    starting processes: pids are per box (cgroup), not per uid host-wide (RLIMIT_NPROC)."""
    import subprocess as sp
    import threading

    flood = ("import subprocess, time\nps = []\ntry:\n    for _ in range(400):\n"
             "        ps.append(subprocess.Popen(['sleep', '60']))\n"
             "except OSError:\n    pass\nprint('holding', len(ps), flush=True)\ntime.sleep(60)")
    res: dict = {}
    t = threading.Thread(target=lambda: res.setdefault("flood", run_isolated(
        [sys.executable, "-I", "-c", flood], work=tmp_path / "flood",
        limits=SandboxLimits(wall_s=25, pids=64, uid=65534, gid=65534))))
    t.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(_nobody_pids()) < 50:
            time.sleep(0.2)
        assert len(_nobody_pids()) >= 50  # the flood holds its processes now
        other = run_isolated([sys.executable, "-I", "-c",
                              "import subprocess\nps = [subprocess.Popen(['true']) "
                              "for _ in range(32)]\nprint(sum(p.wait() == 0 for p in ps))"],
                             work=tmp_path / "other",
                             limits=SandboxLimits(wall_s=30, pids=64, uid=65534, gid=65534))
        assert other.returncode == 0 and other.stdout.split() == [b"32"], other
    finally:
        t.join(40)
    assert res["flood"].pids_refused and res["flood"].killed == "wall"


def test_undeclared_output_is_discarded(tmp_path):
    """Only declared files (regular, bounded in total) leave the box; the private /sandbox and
    /tmp go with it."""
    code = ("import os\nos.makedirs('/sandbox/out/cache/reference/k', exist_ok=True)\n"
            "open('/sandbox/out/result.json', 'w').write('{}')\n"
            "open('/sandbox/out/cache/reference/k/kernel.ptx', 'w').write('ptx')\n"
            "open('/sandbox/out/junk.bin', 'wb').write(b'0' * (4 << 20))\n"
            "open('/sandbox/out/cache/reference/k/extra.bin', 'wb').write(b'1')\n"
            "open('/sandbox/scratch.bin', 'wb').write(b'2' * (8 << 20))\n")
    work = tmp_path / "w"
    run = run_isolated([sys.executable, "-I", "-c", code], work=work,
                       limits=SandboxLimits(wall_s=30),
                       keep=("result.json", "cache/reference/*/kernel.ptx"))
    assert run.returncode == 0, run.stderr
    files = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    assert files == ["cache/reference/k/kernel.ptx", "result.json"]
    assert sorted(run.discarded) == ["cache/reference/k/extra.bin", "junk.bin"]
    # over the disk cap after the run: everything is discarded
    run = run_isolated([sys.executable, "-I", "-c",
                        "open('/sandbox/out/result.json', 'wb').write(b'0' * (3 << 20))"],
                       work=tmp_path / "w2", limits=SandboxLimits(wall_s=30, disk_mb=1, file_mb=8))
    assert list((tmp_path / "w2").iterdir()) == []


@pytest.mark.parametrize("layout", ["tmp", "in-project"])
def test_venv_under_tmp_is_visible_in_the_box(tmp_path, layout):
    """A venv under /tmp (the box has its own private /tmp) holding a package of its own, alone or
    as the ``.venv`` of a checkout under /tmp: the box imports the package from the venv."""
    import subprocess as sp

    top = Path("/tmp") / f"ail-venv-{os.getpid()}-{time.monotonic_ns()}"
    venv = top if layout == "tmp" else top / "proj" / ".venv"
    root = "" if layout == "tmp" else (f"import server.sandbox as sb; "
                                       f"sb._ROOT = Path({str(top / 'proj')!r})\n")
    venv.parent.mkdir(parents=True, exist_ok=True)
    if layout == "in-project":
        (top / "proj" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    sp.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
           check=True, timeout=120)
    try:
        site = next(venv.glob("lib/python*/site-packages"))
        (site / "ail_venv_probe").mkdir()
        (site / "ail_venv_probe" / "__init__.py").write_text("WHERE = 'venv'\n")
        py = venv / "bin" / "python"
        code = ("import sys; sys.path.insert(0, '.')\n"
                "from pathlib import Path\n"
                "from server.sandbox import run_isolated, SandboxLimits, _python_dirs\n"
                + root +
                "r = run_isolated([sys.executable, '-I', '-c', 'import ail_venv_probe, ml_dtypes;"
                " print(ail_venv_probe.WHERE, ail_venv_probe.__file__)'],"
                f" work=Path({str(tmp_path / 'w')!r}), limits=SandboxLimits(wall_s=60))\n"
                "print(r.returncode, r.stdout.decode().strip(), r.stderr.decode()[-300:])")
        out = sp.run([str(py), "-c", code], capture_output=True, text=True, timeout=120,
                     cwd=str(Path(__file__).resolve().parents[2]))
        assert out.stdout.split()[:2] == ["0", "venv"], (out.stdout, out.stderr[-2000:])
        assert str(venv) in out.stdout
    finally:
        import shutil

        shutil.rmtree(top, ignore_errors=True)


def test_required_cgroup_limit_missing_is_refused(monkeypatch, tmp_path):
    """A host that cannot enforce a required limit refuses the box, naming the limit; the server
    gives each job slot its own uid."""
    import server.cgroups as cg
    import server.sandbox as sb
    from server.settings import ServerSettings

    found, why = cg.probe()
    monkeypatch.setattr(cg, "probe", lambda: ({k: v for k, v in found.items() if k != "pids"},
                                              {**why, "pids": "not mounted (test)"}))
    sb._host_ready.cache_clear()
    try:
        ok, text = sb.isolation_status(("memory", "pids"))
        assert not ok and "pids" in text and "not mounted (test)" in text
        with pytest.raises(IsolationUnavailable, match=r"required cgroup limits \(pids\)"):
            run_isolated(["/usr/bin/true"], work=tmp_path / "w",
                         limits=SandboxLimits(require=("pids",)))
        assert sb.isolation_status(("memory",))[0]  # what is enforced still works
    finally:
        sb._host_ready.cache_clear()
        sb._isolation_status.cache_clear()
    ss = ServerSettings(sandbox_require="memory,pids")
    a, b = ss.sandbox_limits(0), ss.sandbox_limits(1)
    assert (a.uid, b.uid) == (100_000, 100_001) and a.require == ("memory", "pids")
    with pytest.raises(ValueError, match="unknown cgroup controller"):
        ServerSettings(sandbox_require="memory,disk").required_cgroups()


def test_stale_box_groups_are_removed(monkeypatch):
    """A group a killed runner left (empty; the runner was pid 1 of its namespace, so its name
    cannot tell) is removed by the next box; a group holding a process is not."""
    import uuid

    import server.cgroups as cg

    found, _ = cg.probe()
    h = found["pids"]
    stale = h.parent / f"ailower-1-{uuid.uuid4().hex[:12]}"
    stale.mkdir()
    monkeypatch.setattr(cg, "STALE_AFTER_S", 0.0)
    time.sleep(0.05)
    g = cg.BoxGroup(memory=64 << 20, pids=16, cpus=1.0)
    try:
        assert not stale.exists()
    finally:
        g.remove()
        if stale.exists():
            stale.rmdir()
