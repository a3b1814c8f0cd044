# Sourced by the scripts/device_*.sh scripts, from the repository root: when the carried .whl/
# folder exists (scripts/device_wheels.sh), install its wheels into /tmp/ailower-site (the device
# image lacks pydantic & co. and reaches no index) and put them and this checkout on PYTHONPATH.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ailower-site .whl/*.whl
  export PYTHONPATH="/tmp/ailower-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
