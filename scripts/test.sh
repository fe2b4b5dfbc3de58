#!/usr/bin/env bash
# The test command: the developer's install on top of the user's, then pytest.
#
#   scripts/test.sh                      # the default tier: every capability proven once (25 minutes at most)
#   scripts/test.sh --full               # the full tier: the default tier, then each slice in its own pytest
#   scripts/test.sh --full --slice 2/6   # one slice of the tests only the full tier runs (.ci/run runs one)
#   scripts/test.sh --full --slice next  # the slice .ci/slice names: the one CI runs at the next landing
#   scripts/test.sh tests/unit           # any pytest arguments: a folder, a file, -k EXPR (within the tier)
#
# The tiers, the slices and the budget table a run ends with: tests/tiers.py, docs/testing.md.
#
# 1. scripts/setup.sh (RAYLAB_SETUP picks its choice; default: all, every framework, as the suite needs):
#    .venv with raylab, the frameworks and Fashion-MNIST;
# 2. the test tools (pyproject.toml's `test` extra, at constraints.txt's pins) into .venv;
# 3. headless Chromium and its driver (Debian's chromium, chromium-driver), for the MLflow UI test;
# 4. .venv/bin/python -m pytest "$@".
#    `--full` alone runs the default tier and then slices 1..K of the full-only tests, each its own pytest, as
#    .ci/run runs them: one run proves every slice passes on its own, and no process holds TF, torch, JAX and Ray
#    for two hours. It goes on past a failed part and fails at the end. `--full` with other arguments (a file,
#    -k) is one pytest, as is `.venv/bin/python -m pytest --full`.
# Each step is skipped when what it installs is there already.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck disable=SC2086  # RAYLAB_SETUP is a space-separated choice
scripts/setup.sh ${RAYLAB_SETUP:-all}

tools=$(.venv/bin/python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]))')
stamp=.venv/.raylab-test-tools
want="$tools $(sha256sum constraints.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "test: installing the test tools ($tools)"
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install --quiet --no-cache-dir -c constraints.txt $tools
    .venv/bin/python -m pip check
    echo "$want" > "$stamp"
fi

if ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "test: installing Debian's chromium and chromium-driver (for the MLflow UI test)"
        apt_cache_before=$(ls /var/cache/apt/archives/ 2>/dev/null | grep '\.deb$' | sort || true)
        apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
        # apt keeps what it downloaded (over 100 MB); the suite needs the disk more. What was cached before stays.
        comm -13 <(echo "$apt_cache_before") <(ls /var/cache/apt/archives/ 2>/dev/null | grep '\.deb$' | sort) \
            | sed 's|^|/var/cache/apt/archives/|' | xargs -r rm -f
    else
        echo "test: note: chromium and chromium-driver are not installed (apt-get as root installs them);" \
             "the MLflow UI test fails without them" >&2
    fi
fi

if [ "${1:-}" = "--full" ] && [ "${2:-}" = "--slice" ] && [ "${3:-}" = next ]; then  # the slice CI runs next
    set -- --full --slice "$(.venv/bin/python -c 'from tests.tiers import ci_slice, SLICES; print(f"{ci_slice()}/{SLICES}")')" "${@:4}"
fi
if [ "$*" = "--full" ]; then
    k=$(.venv/bin/python -c 'from tests.tiers import SLICES; print(SLICES)')
    started=$SECONDS failed=()
    parts=("default tier")
    for i in $(seq 1 "$k"); do parts+=("slice $i/$k"); done
    for part in "${parts[@]}"; do
        case $part in
            "default tier") args=() ;;
            *) args=(--full --slice "${part#slice }") ;;
        esac
        echo "test: --full: the $part ($(( (SECONDS - started) / 60 )) min in)"
        .venv/bin/python -m pytest "${args[@]}" || failed+=("$part")
    done
    echo "test: --full: the default tier and $k slices in $(( (SECONDS - started) / 60 )) min;" \
         "${#failed[@]} failed${failed:+: ${failed[*]}}"
    [ ${#failed[@]} = 0 ]
    exit
fi
exec .venv/bin/python -m pytest "$@"
