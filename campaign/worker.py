"""``python -m campaign.worker``: one worker process of a local campaign batch.

It claims cells of its campaign one at a time (GPU workers: cells of their GPU's arch, pinned to
that GPU by the ``CUDA_VISIBLE_DEVICES`` the batch set; static workers: cells of every other arch)
and runs each with :func:`campaign.execute.run_cell` until none is left. One JSON line per finished
cell goes to stdout.

The worker dies with its batch: on Linux it asks the kernel for ``SIGKILL`` when its parent exits
(``prctl(PR_SET_PDEATHSIG)``, man 2 prctl), so a ``kill -9`` of the batch leaves no worker behind;
the cell it held stays ``running`` under a dead owner and is claimed again by the next run.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from typing import Any

__all__ = ["main", "die_with_parent"]

PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h)."""


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel send SIGKILL to this process when its parent exits (Linux); exit at once
    if the parent is already gone (it died before the request took effect)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            sys.stderr.write(f"campaign worker: prctl(PR_SET_PDEATHSIG) failed: "
                             f"{os.strerror(err)}\n")
    if os.getppid() != parent_pid:
        os._exit(3)


def main(argv: list[str] | None = None) -> int:
    """Parse the batch's arguments and work until no cell is left; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m campaign.worker")
    ap.add_argument("--campaign-id", type=int, required=True)
    ap.add_argument("--mode", choices=("gpu", "static"), required=True)
    ap.add_argument("--arch", action="append", default=[], help="gpu mode: this GPU's arch")
    ap.add_argument("--exclude-arch", action="append", default=[],
                    help="static mode: archs left to the GPU workers")
    ap.add_argument("--parent", type=int, default=None, help="die when this process exits")
    ap.add_argument("--max-cells", type=int, default=None)
    args = ap.parse_args(argv)
    if args.parent is not None:
        die_with_parent(args.parent)
    payload = json.loads(sys.stdin.read())
    from campaign.execute import CampaignOptions, run_cell
    from campaign.store import CampaignStore, owner_id

    opts = CampaignOptions.model_validate(payload["options"])
    reasons: dict[str, str] = payload.get("static_reasons", {})
    store = CampaignStore(opts.db_url, lease_s=opts.lease_s, max_attempts=opts.max_attempts)
    camp = store.campaign_by_id(args.campaign_id)
    if camp is None:
        sys.stderr.write(f"campaign worker: no campaign with id {args.campaign_id}\n")
        return 2
    owner = owner_id()
    n = 0
    while args.max_cells is None or n < args.max_cells:
        if args.mode == "gpu":
            cell = store.claim(camp.id, owner, archs=args.arch, mode="gpu")
        else:
            cell = store.claim(camp.id, owner, exclude_archs=args.exclude_arch, mode="static",
                               static_reasons=reasons)
        if cell is None:
            break
        out: dict[str, Any] = run_cell(store, cell, owner, opts, campaign=camp.name,
                                       iterations=camp.iterations, gpu=args.mode == "gpu")
        print(json.dumps({"event": "cell", "worker": owner, **out}, default=str), flush=True)
        n += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
