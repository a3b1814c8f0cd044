#!/usr/bin/env bash
# GPU check of the ncu path (harness/profile.py) on a GPU host: profile one bench-size launch of
# a suite kernel's Triton reference with the exact command ailower uses, keep ncu's raw output
# in $OUT (or ./ncu-check), and print the parsed report.
#   here:   ./scripts/device_wheels.sh   (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_ncu_check.sh [KERNEL]   (with .whl carried along)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
OUTDIR="${OUT:-ncu-check}"
mkdir -p "$OUTDIR"
python3 - "${1:-softmax}" "$OUTDIR" <<'PY'
import os, subprocess, sys, time
import kernels
from harness import GPUEvaluator, compile_reference, device_arch
from harness.evaluate import kernel_under_test
from harness.profile import find_ncu, ncu_command, parse_ncu_csv

name, out = sys.argv[1], sys.argv[2]
arch = device_arch()
spec = kernels.get(name)
art = compile_reference(spec, arch, spec.configs()[0])
ev = GPUEvaluator()
abi = art.abi
kut = kernel_under_test(spec, abi, art.cubin, label="profiled", role="candidate",
                        config=art.config, threads=abi.threads, dynamic_smem=abi.dynamic_smem,
                        cluster=(abi.num_ctas, 1, 1), global_scratch_bytes=abi.global_scratch_size,
                        global_scratch_align=abi.global_scratch_align)
req = ev.request(spec, "launch_once", [kut], seeds=[0], time=False, secret_seed=False,
                 launch_size="bench")
ncu = find_ncu()
print("ncu:", ncu, flush=True)
subprocess.run([ncu, "--version"])
cmd = ncu_command(ncu, sys.executable, abi.entry)
env = dict(os.environ)
t0 = time.perf_counter()
p = subprocess.run(cmd, input=req.model_dump_json() + "\n", capture_output=True, text=True,
                   timeout=300, env=env)
print(f"exit {p.returncode} after {time.perf_counter() - t0:.1f} s", flush=True)
open(os.path.join(out, f"ncu_{name}_stdout.txt"), "w").write(p.stdout)
open(os.path.join(out, f"ncu_{name}_stderr.txt"), "w").write(p.stderr)
print(p.stderr[-3000:])
for rep in parse_ncu_csv(p.stdout + "\n" + p.stderr):
    print(rep.model_dump_json(indent=1))
    print("stalls:", rep.stalls(3))
PY
