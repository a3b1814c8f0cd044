"""``python -m server [--host H] [--port P] [--no-workers]``: the same as ``ailower serve``."""

import argparse

from server import serve

p = argparse.ArgumentParser(prog="python -m server", description="Run the ailower REST service.")
p.add_argument("--host")
p.add_argument("--port", type=int)
p.add_argument("--no-workers", action="store_true")
p.add_argument("--log-level", default="info")
a = p.parse_args()
serve(a.host, a.port, workers=not a.no_workers, log_level=a.log_level)
