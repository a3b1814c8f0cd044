"""Does compute-sanitizer racecheck follow ``barrier.sync`` reached from different program points?

Triton's warp-specialized kernels dispatch their partitions through a small table in shared
memory: warps 0-3 write it, every other warp reads it after the CTA-wide, non-``.aligned`` named
barrier 1, which each partition reaches at its *own* ``barrier.sync 1`` instruction. PTX ISA 9.0
§9.7.13.1 (``barrier``): the non-aligned form may be executed by threads at different
instructions; all threads of the CTA arriving complete one barrier generation, and memory accesses
requested before it are performed relative to the participants after it. racecheck reported a RAW
hazard on that table in Triton 3.6's ``fast.attention_ws`` (2026-12-02). This probe launches tiny
hand-written kernels, one CTA of 384 threads each, and prints racecheck's verdict per kernel:

* ``no_barrier``   - positive control: the readers do not wait at all (a real RAW race);
* ``same_pc``      - every thread at one ``barrier.sync 1``;
* ``same_pc_aligned`` - every thread at one ``bar.sync 1`` (the ``.aligned`` form);
* ``divergent_pc`` - writers and readers each at their own ``barrier.sync 1``;
* ``divergent_pc_count`` - the same with ``barrier.sync 1, 384``;
* ``ws_dispatch``  - Triton's dispatch loop: table written twice (run, then exit state), four
  generations of barrier 1 reached from five different instructions;
* ``ws_setmaxnreg`` / ``ws_bar0`` / ``ws_setmaxnreg_bar0`` - the same with what else Triton's
  partitions do around it: ``setmaxnreg.inc/dec`` next to the barriers, and a partial
  ``bar.sync 0, 128`` among the writers' 128 threads before the write;
* ``ws_bar0_racy`` - the bug twin of ``ws_bar0``: the writers arrive (``barrier.arrive``) before
  they write, so the readers' first read races with the write.

Measured on the H200 (2026-12-02, driver 580.159.04): racecheck reports the positive control
(9 hazards) and nothing on ``same_pc``, ``same_pc_aligned``, ``divergent_pc``,
``divergent_pc_count``, ``ws_dispatch``: it does follow non-aligned barriers from different PCs.

Usage (a GPU host; the kernels are JIT-compiled by the driver from the PTX text below)::

    python bench/racecheck_probe/probe.py --kernel NAME      # run one kernel once
    python bench/racecheck_probe/probe.py --all              # each under racecheck, a table

Every kernel writes out[tid] = the byte it read (1, or 2 after the exit state in ws_dispatch);
the launcher checks the values, so a probe that ran wrong says so.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys

HEAD = """.version 8.0
.target sm_90a
.address_size 64
"""

# the reader side shared by every kernel: out[tid] = table[warp - 4]
READ = """
	sub.u32 	%r4, %r2, 4;
	mov.u32 	%r3, table;
	add.u32 	%r3, %r3, %r4;
	ld.shared.u8 	%rs2, [%r3];
	cvt.u32.u16 	%r5, %rs2;
	mul.wide.u32 	%rd2, %r1, 4;
	add.u64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r5;
"""

PRO = """
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<6>;
	.reg .pred 	%p<6>;
	.reg .b16 	%rs<4>;
	.shared .align 8 .b8 table[16];
	mov.u32 	%r1, %tid.x;
	shr.u32 	%r2, %r1, 5;
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd1, %rd1;
"""

# warps 0-3: thread t < 8 writes table[t] = 1
WRITE = """
	setp.ge.u32 	%p2, %r1, 8;
	@%p2 bra 	$SKIPW;
	mov.u32 	%r3, table;
	add.u32 	%r3, %r3, %r1;
	mov.u16 	%rs1, 1;
	st.shared.u8 	[%r3], %rs1;
$SKIPW:
"""


def _entry(name: str, body: str) -> str:
    reg = f".maxnreg {MAXNREG[name]}\n" if name in MAXNREG else ""
    return f".visible .entry {name}(.param .u64 out)\n{reg}{{{PRO}{body}\n}}\n"


def _same_pc(bar: str) -> str:
    return (WRITE + f"\t{bar};\n\tsetp.lt.u32 \t%p1, %r2, 4;\n\t@%p1 bra \t$DONE;\n" + READ
            + "$DONE:\n\tret;")


def _divergent(bar: str) -> str:
    return ("\tsetp.ge.u32 \t%p1, %r2, 4;\n\t@%p1 bra \t$WORKER;\n" + WRITE
            + f"\t{bar};\n\t{bar};\n\tret;\n$WORKER:\n\t{bar};\n" + READ + f"\t{bar};\n\tret;")


NO_BARRIER = ("\tsetp.ge.u32 \t%p1, %r2, 4;\n\t@%p1 bra \t$WORKER;\n" + WRITE
              + "\tret;\n$WORKER:\n" + READ + "\tret;")

# Triton's dispatch: G1 (table = run), G2 (partitions start), G3 (partitions done),
# table = exit, G4; the workers loop: barrier, read their state byte, exit on 2
WS = """
	setp.ge.u32 	%p1, %r2, 4;
	@%p1 bra 	$WORKER;
	mov.u32 	%r6, 16843009;
	st.shared.v2.b32 	[table], {%r6, %r6};
	barrier.sync 	1;
	barrier.sync 	1;
	barrier.sync 	1;
	mov.u32 	%r6, 33686018;
	st.shared.v2.b32 	[table], {%r6, %r6};
	barrier.sync 	1;
	ret;
$WORKER:
	sub.u32 	%r4, %r2, 4;
	mov.u32 	%r3, table;
	add.u32 	%r3, %r3, %r4;
	mul.wide.u32 	%rd2, %r1, 4;
	add.u64 	%rd3, %rd1, %rd2;
$LOOP:
	barrier.sync 	1;
	ld.shared.u8 	%rs2, [%r3];
	cvt.u32.u16 	%r5, %rs2;
	st.global.u32 	[%rd3], %r5;
	setp.eq.u32 	%p3, %r5, 2;
	@%p3 bra 	$EXIT;
	barrier.sync 	1;
	barrier.sync 	1;
	bra.uni 	$LOOP;
$EXIT:
	ret;"""

WS_SETMAXNREG = (WS.replace("\tmov.u32 \t%r6, 16843009;",
                            "\tsetmaxnreg.inc.sync.aligned.u32 \t256;\n\tmov.u32 \t%r6, 16843009;", 1)
                 .replace("$LOOP:\n", "$LOOP:\n\tsetmaxnreg.dec.sync.aligned.u32 \t120;\n", 1)
                 .replace("\t@%p3 bra \t$EXIT;\n", "\t@%p3 bra \t$EXIT;\n\tsetmaxnreg.inc.sync.aligned.u32 \t120;\n", 1))
WS_BAR0 = WS.replace("\tmov.u32 \t%r6, 16843009;", "\tbar.sync \t0, 128;\n\tmov.u32 \t%r6, 16843009;", 1)
WS_BOTH = WS_SETMAXNREG.replace("\tmov.u32 \t%r6, 16843009;", "\tbar.sync \t0, 128;\n\tmov.u32 \t%r6, 16843009;", 1)
# the bug twin of ws_bar0: the writers arrive at generation 1 *before* writing the table, so the
# readers' first read races with the write (a real RAW hazard); counts given everywhere so
# barrier.arrive (which needs one) and barrier.sync agree
WS_RACY = (WS_BAR0.replace("\tbarrier.sync \t1;", "\tbarrier.sync \t1, 384;")
           .replace("\tmov.u32 \t%r6, 16843009;\n\tst.shared.v2.b32 \t[table], {%r6, %r6};\n"
                    "\tbarrier.sync \t1, 384;\n",
                    "\tbarrier.arrive \t1, 384;\n\tmov.u32 \t%r6, 16843009;\n"
                    "\tst.shared.v2.b32 \t[table], {%r6, %r6};\n", 1))

KERNELS = {
    "no_barrier": (NO_BARRIER, 1),
    "same_pc": (_same_pc("barrier.sync 1"), 1),
    "same_pc_aligned": (_same_pc("bar.sync 1"), 1),
    "divergent_pc": (_divergent("barrier.sync 1"), 1),
    "divergent_pc_count": (_divergent("barrier.sync 1, 384"), 1),
    "ws_dispatch": (WS, 2),
    "ws_setmaxnreg": (WS_SETMAXNREG, 2),
    "ws_bar0": (WS_BAR0, 2),
    "ws_setmaxnreg_bar0": (WS_BOTH, 2),
    "ws_bar0_racy": (WS_RACY, 2),
}
# setmaxnreg needs the kernel's register count fixed at launch (PTX ISA 9.7.19.4: .maxnreg)
MAXNREG = {"ws_setmaxnreg": 168, "ws_setmaxnreg_bar0": 168}


def ptx() -> str:
    """The PTX module holding every probe kernel (sm_90a, PTX ISA 8.0)."""
    return HEAD + "".join(_entry(n, b) for n, (b, _) in KERNELS.items())


def run_one(name: str, module: str | None = None, want: int | None = None) -> int:
    """Launch kernel ``name`` of ``module`` (PTX text; default :func:`ptx`) once, 1 CTA x 384
    threads; 0 when every reader (threads 128-383) saw ``want`` (default: the probe's value)."""
    from cuda.bindings import driver as cu

    def ok(res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{name}: CUDA error {err}")
        return rest[0] if len(rest) == 1 else rest

    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    mod = ok(cu.cuModuleLoadData((module or ptx()).encode() + b"\0"))
    fn = ok(cu.cuModuleGetFunction(mod, name.encode()))
    n = 384
    buf = ok(cu.cuMemAlloc(n * 4))
    ok(cu.cuMemsetD32(buf, 0xFFFFFFFF, n))
    arg = ctypes.c_uint64(int(buf))
    ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, n, 1, 1, 0, 0, ctypes.addressof(ptrs), 0))
    ok(cu.cuCtxSynchronize())
    host = (ctypes.c_uint32 * n)()
    ok(cu.cuMemcpyDtoH(ctypes.addressof(host), buf, n * 4))
    want = KERNELS[name][1] if want is None else want
    got = [host[i] for i in range(128, n)]
    bad = sum(v != want for v in got)
    print(f"{name}: readers {len(got)}, wrong {bad} (want {want}; first {got[:4]})")
    return 0 if bad == 0 or name == "no_barrier" or module is not None else 1


def _sanitizer() -> str | None:
    found = os.environ.get("AILOWER_COMPUTE_SANITIZER") or shutil.which("compute-sanitizer")
    if found:
        return found
    import glob
    for c in ["/usr/local/cuda/bin/compute-sanitizer",
              *sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"), reverse=True)]:
        if os.path.exists(c):
            return c
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", help="the entry to launch once (one of the probes, or of --ptx)")
    ap.add_argument("--ptx", help="a PTX file to take the entry from instead of the probes")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--print-ptx", action="store_true")
    a = ap.parse_args()
    if a.print_ptx:
        print(ptx())
        return 0
    if a.kernel:
        if a.ptx:
            from pathlib import Path
            return run_one(a.kernel, Path(a.ptx).read_text(), want=-1)
        if a.kernel not in KERNELS:
            ap.error(f"--kernel: {a.kernel!r} is not a probe ({', '.join(KERNELS)})")
        return run_one(a.kernel)
    cs = _sanitizer()
    if cs is None:
        print("compute-sanitizer not found")
        return 2
    rows = []
    for name in KERNELS:
        for tool in ("racecheck", "synccheck"):
            p = subprocess.run([cs, "--tool", tool, "--racecheck-report", "all", sys.executable,
                                __file__, "--kernel", name] if tool == "racecheck" else
                               [cs, "--tool", tool, sys.executable, __file__, "--kernel", name],
                               capture_output=True, text=True, timeout=120)
            text = p.stdout + p.stderr
            summ = re.findall(r"(RACECHECK SUMMARY:[^\n]*|ERROR SUMMARY:[^\n]*)", text)
            first = re.search(r"(Error|Warning): [^\n]*", text)
            readers = re.search(rf"{name}: readers[^\n]*", text)
            rows.append((name, tool, p.returncode, "; ".join(summ), first.group(0) if first else "",
                         readers.group(0) if readers else ""))
            if tool == "racecheck":
                print(f"----- {name} racecheck (rc {p.returncode})\n" + text[-2500:])
    print("== table")
    for r in rows:
        print(f"{r[0]:20} {r[1]:9} rc={r[2]:<3} {r[3][:70]:70} | {r[4][:90]} | {r[5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
