#!/usr/bin/env bash
# On the H200: start `ailower serve` (python -m server), create a key, submit a `softmax` lowering
# over HTTP, stream its events to the end, fetch the PTX and report, print submit-to-result latency.
# Run with .whl carried (scripts/device_wheels.sh, plus the server wheels listed in the report).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-server}"
OUTDIR="${OUT:-/tmp/ailower-server-out}"
mkdir -p "$OUTDIR"
PORT="${PORT:-8765}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
python3 -m server --host 127.0.0.1 --port "$PORT" --log-level warning > "$OUTDIR/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
python3 - "$PORT" "$OUTDIR" <<'PY'
import json, pathlib, sys, time
import httpx
import typer
from typer.testing import CliRunner
from ailower.cmd_server import register

port, out = sys.argv[1], pathlib.Path(sys.argv[2])
app = typer.Typer(); register(app)
r = CliRunner().invoke(app, ["keys", "create", "device", "--json"])
assert r.exit_code == 0, r.output
key = json.loads(r.output)["key"]
base = f"http://127.0.0.1:{port}"
for _ in range(150):
    try:
        if httpx.get(base + "/healthz", timeout=2).status_code == 200:
            break
    except httpx.TransportError:
        time.sleep(0.2)
print("healthz:", httpx.get(base + "/healthz").json())
c = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)
t0 = time.perf_counter()
r = c.post("/v1/lowerings", json={"kernel": "softmax", "arch": "sm_90a", "provider": "triton",
                                  "budget": {"iterations": 3, "wall_time_s": 900}})
print("submit:", r.status_code, r.json())
jid = r.json()["id"]
with c.stream("GET", f"/v1/lowerings/{jid}/events", timeout=900) as s:
    for line in s.iter_lines():
        if line.startswith("event:"):
            print(f"  {time.perf_counter() - t0:7.2f} s  {line[7:]}")
body = c.get(f"/v1/lowerings/{jid}").json()
latency = time.perf_counter() - t0
ptx = c.get(f"/v1/lowerings/{jid}/artifacts/ptx")
rep = c.get(f"/v1/lowerings/{jid}/artifacts/report")
(out / "softmax.ptx").write_bytes(ptx.content)
(out / "report.json").write_bytes(rep.content)
(out / "job.json").write_text(json.dumps(body, indent=2))
print(json.dumps({k: body[k] for k in ("status", "attempts", "best", "gpu", "gpu_note", "error")}, indent=2))
print(f"ptx: {ptx.status_code} {len(ptx.content)} B; report: {rep.status_code} {len(rep.content)} B")
print(f"submit-to-result latency: {latency:.2f} s")
metrics = httpx.get(base + "/metrics").text
print("\n".join(l for l in metrics.splitlines() if l.startswith(("ailower_stage_seconds_sum", "ailower_stage_seconds_count", "ailower_job_seconds_sum"))))
sys.exit(0 if body["status"] == "succeeded" and body["gpu"] else 1)
PY
