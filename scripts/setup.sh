#!/usr/bin/env bash
# One set-up step for a fresh machine (Debian, Python 3.11): the virtual environment in
# .venv with every pinned package, and the Fashion-MNIST data. Safe to run again: it only
# reinstalls when pyproject.toml or constraints.txt changed.
#
#   scripts/setup.sh          # then: .venv/bin/python recipes/fashion.py
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3.11}
stamp=.venv/.raylab-setup
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $python"
    "$python" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing raylab and its pinned dependencies (about 10 GB, several minutes the first time)"
    .venv/bin/python -m pip install --quiet --upgrade pip
    # The PyPI torch 2.9.0 wheel for x86_64 is the CUDA build; torch-xla 2.9.0 needs exactly it.
    .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[test]"
    .venv/bin/python -m pip check
    echo "$want" > "$stamp"
fi

have_data() {
    .venv/bin/python -c "from raylab.data import find_idx_files, FASHION_FILES; find_idx_files('fashion-mnist', FASHION_FILES)" 2>/dev/null
}
if ! have_data; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "setup: installing Debian's dataset-fashion-mnist"
        apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null; }
    fi
    if ! have_data; then
        cat >&2 <<'TEXT'
setup: Fashion-MNIST not found and apt-get is not available (or not root).
Put these four files (from https://github.com/zalandoresearch/fashion-mnist, gzipped or plain)
  train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
  t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz
in $RAYLAB_DATA_DIR/fashion-mnist, ~/.keras/datasets/fashion-mnist or /usr/share/datasets/fashion-mnist,
or run as root on Debian: apt-get install dataset-fashion-mnist
TEXT
        exit 1
    fi
fi
echo "setup: ready (.venv, Fashion-MNIST)"
