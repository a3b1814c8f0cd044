#!/usr/bin/env bash
# Run the GPU tests on a GPU host whose Python lacks some of our dependencies (the H200 device
# image: python3.12 with torch, triton 3.6 and cuda-bindings, but no pydantic & co.).
#   here:   ./scripts/device_wheels.sh            (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_gpu_tests.sh [pytest args]   (with .whl carried along)
# On a GPU host with a normal environment, `pip install -e '.[test]' && pytest -m gpu` is enough.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
python3 -m pytest -m gpu -v -p no:cacheprovider "$@"
