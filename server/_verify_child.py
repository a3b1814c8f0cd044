"""``python -m server._verify_child``: one ``/v1/verify`` run in its own process.

Reads ``{"ptx", "arch", "threads"}`` as JSON on stdin, runs :func:`verifier.verify` and writes
``{"ok", "findings", "rendered", "report"}`` or ``{"usage_error": message}`` as JSON on stdout.
The API process starts it with CPU and memory rlimits and kills it at its wall-time limit or when
the client disconnects (:func:`server.routers.misc.verify_ptx`), so a pathological PTX never keeps
working for nobody.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    """Entry point; see the module docstring."""
    req = json.loads(sys.stdin.read())
    import verifier
    from verifier.errors import VerifierUsageError

    try:
        rep = verifier.verify(req["ptx"], arch=req["arch"], threads=req.get("threads"),
                              filename="input.ptx")
    except VerifierUsageError as exc:
        out = {"usage_error": str(exc)}
    else:
        d = rep.to_dict()
        out = {"ok": rep.ok, "findings": d.get("findings", []), "rendered": rep.render("full"),
               "report": d}
    sys.stdout.write(json.dumps(out, default=str))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
