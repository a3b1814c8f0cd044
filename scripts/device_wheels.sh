#!/usr/bin/env bash
# Download the wheels the GPU device image lacks (it has python3.12, torch, triton 3.6,
# cuda-bindings, numpy, ml-dtypes, typer, rich, pyyaml, httpx, anyio but not pydantic & co.)
# into .whl/ (git-ignored). The device command then installs them with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# See scripts/device_gpu_tests.sh and README "GPU tests".
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(
  "pydantic==2.13.5" "pydantic-core==2.46.5" "annotated-types" "typing-inspection" "typing-extensions>=4.14"
  "pydantic-settings" "python-dotenv"
  "sqlalchemy>=2.0" "greenlet"
  "openai==3.57.0" "anthropic==2.14.0" "distro" "jiter" "sniffio" "docstring-parser"
  "fastapi" "starlette" "uvicorn" "argon2-cffi" "argon2-cffi-bindings" "cffi" "pycparser"
  "httpx2" "httpcore2" "opentelemetry-api" "truststore" "idna>=3.18" "anyio>=4.10" "h11>=0.16"
  # the leaderboard's HTML page (scripts/device_campaign_resume.sh); ray (~79 MB) does not fit the carry
  "plotly" "narwhals" "packaging"
)
mkdir -p .whl
for p in "${PKGS[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d .whl "$p"
done
ls .whl
