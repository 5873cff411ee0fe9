#!/usr/bin/env bash
# Generate the tf2_msgs interface package (tools/tf2_msgs) into a virtualenv.
#
# Usage: tools/build_tf2_msgs.sh VENV_DIR [BUILD_DIR]
#
# tf2_msgs is not on PyPI, but the ROS 2 (Kilted) rosidl generators are, so we
# build the message package with CMake and install it into the venv prefix:
#   1. pip install -r requirements-build.txt (the generators)
#   2. make the two /opt/python/cp311-cp311/... directories that the ROS
#      wheels' exported CMake targets name (symlinks to the real ones)
#   3. cmake configure + build + install into VENV_DIR (out of source, in
#      BUILD_DIR, default: <repo>/.build/tf2_msgs; it is wiped first)
#   4. check that `from tf2_msgs.msg import TFMessage` works.
#
# Idempotent: running it again rebuilds and reinstalls the same files.  The
# Makefile calls it only when its inputs changed (stamp file).
# Needs: cmake, make, a C/C++ compiler (see `make system-deps`).
set -euo pipefail

die() {
    echo "build_tf2_msgs.sh: ERROR: $*" >&2
    exit 1
}
# Any other failing command (set -e) is reported with its line.
trap 'echo "build_tf2_msgs.sh: ERROR: command failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 VENV_DIR [BUILD_DIR]"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
src_dir="$script_dir/tf2_msgs"

[ -d "$1" ] || die "virtualenv '$1' does not exist (run 'make venv' first)"
venv="$(cd "$1" && pwd)"
py="$venv/bin/python"
[ -x "$py" ] || die "'$py' is not an executable Python; is '$venv' a virtualenv?"

build_dir="${2:-$repo_root/.build/tf2_msgs}"
mkdir -p "$(dirname "$build_dir")" || die "cannot create the parent of build dir '$build_dir'"
build_dir="$(cd "$(dirname "$build_dir")" && pwd)/$(basename "$build_dir")"
case "$build_dir" in
    "$src_dir"|"$src_dir"/*) die "build dir '$build_dir' must be outside the source tree '$src_dir'" ;;
esac

for tool in cmake make c++ cc; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "'$tool' not found; install it (Debian: apt-get install -y cmake build-essential, or run 'make system-deps')"
done

echo "==> tf2_msgs: installing generators (requirements-build.txt) into $venv"
"$py" -m pip install -r "$repo_root/requirements-build.txt" \
    || die "pip install -r requirements-build.txt failed"

echo "==> tf2_msgs: checking the /opt/python paths named by the ROS wheels' CMake exports"
py_include="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
    || die "cannot query the Python include dir"
np_include="$("$py" -c 'import numpy; print(numpy.get_include())')" \
    || die "numpy is not importable from $py (install requirements.txt first: 'make deps')"
[ -f "$py_include/Python.h" ] \
    || die "Python headers not found in '$py_include' (Debian: apt-get install -y python3.11-dev)"
[ -d "$np_include/numpy" ] || die "numpy headers not found in '$np_include'"

# link_dir TARGET LINK: make LINK point at TARGET.  A real directory at LINK
# (e.g. a manylinux image's /opt/python) is kept as it is; a symlink (perhaps
# left dangling by an earlier, deleted venv) is re-pointed.
link_dir() {
    local target="$1" link="$2"
    if [ -d "$link" ] && [ ! -L "$link" ]; then
        echo "    $link exists (real directory), keeping it"
        return 0
    fi
    if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
        echo "    $link -> $target (ok)"
        return 0
    fi
    if ! mkdir -p "$(dirname "$link")" 2>/dev/null || ! ln -sfn "$target" "$link" 2>/dev/null; then
        die "cannot create symlink '$link' -> '$target'.
    The ROS 2 wheels' exported CMake targets require this path to exist.
    Create it as root, e.g.:
        sudo mkdir -p '$(dirname "$link")' && sudo ln -sfn '$target' '$link'"
    fi
    echo "    $link -> $target (created)"
}
link_dir "$py_include" /opt/python/cp311-cp311/include/python3.11
link_dir "$np_include" /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include

echo "==> tf2_msgs: configuring in $build_dir"
rm -rf "$build_dir"
mkdir -p "$build_dir"
export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
# The generators are Python scripts run by CMake; make sure they find the
# venv's interpreter and packages first.
export PATH="$venv/bin:$PATH"
cmake -S "$src_dir" -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$venv" \
    -DCMAKE_INSTALL_PREFIX="$venv" \
    -DPython3_EXECUTABLE="$py" \
    -DBUILD_TESTING=OFF \
    || die "cmake configure failed (see the output above; build dir: $build_dir)"

jobs="$(nproc 2>/dev/null || echo 2)"
echo "==> tf2_msgs: building (-j$jobs)"
cmake --build "$build_dir" -- -j"$jobs" \
    || die "cmake build failed (see the output above; build dir: $build_dir)"

echo "==> tf2_msgs: installing into $venv"
cmake --install "$build_dir" || die "cmake install into '$venv' failed"

echo "==> tf2_msgs: verifying the import"
(cd / && "$py" -c 'from tf2_msgs.msg import TFMessage; TFMessage(); print("    from tf2_msgs.msg import TFMessage: ok")') \
    || die "tf2_msgs was installed but '$py -c \"from tf2_msgs.msg import TFMessage\"' fails"

echo "==> tf2_msgs: done"
