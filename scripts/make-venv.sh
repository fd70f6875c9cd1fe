#!/bin/sh
# Creates one virtual environment per CPython at build/venv/3.X/ with the pinned PyPI torch of
# tests/requirements.txt: Debian's python3.11, pyenv's 3.12 and 3.13 where this machine has them.
# They are made by uv (from PyPI, pinned here, in build/venv/.uv), whose cache (~/.cache/uv) is shared and linked
# from: the nvidia-* wheels (3-4 GB) are fetched once, and a venv takes 20 s to make where pip took 75 s.
# A venv is rebuilt only when the requirements file changed (its copy is kept in the venv); one that cannot be
# built is reported and left out, and the tests say which versions ran.
set -u
cd "$(dirname "$0")/.."
REQ=tests/requirements.txt
VERSIONS=${VENV_VERSIONS:-"3.11 3.12 3.13"}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
UV_VERSION=0.13.9
UV=build/venv/.uv/bin/uv
status=0

# uv itself, from PyPI into a venv of its own, with whichever python3 comes first.
if ! [ -x "$UV" ] || [ "$("$UV" --version 2>/dev/null)" != "uv $UV_VERSION" ]; then
	rm -rf build/venv/.uv
	if ! python3 -m venv build/venv/.uv ||
		! build/venv/.uv/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"; then
		echo "make-venv: cannot install uv $UV_VERSION from PyPI into build/venv/.uv" >&2
		exit 1
	fi
fi

# Debian's python3.11 first (the distribution's, as a user's `python3` on Debian 12); pyenv's for the others.
interpreter() {
	if [ "$1" = 3.11 ] && [ -x /usr/bin/python3.11 ]; then
		echo /usr/bin/python3.11
		return
	fi
	for p in "$PYENV_ROOT"/versions/"$1".*/bin/python"$1"; do
		[ -x "$p" ] && { echo "$p"; return; }
	done
	command -v "python$1" 2>/dev/null
}

for v in $VERSIONS; do
	dir=build/venv/$v
	py=$(interpreter "$v")
	if [ -z "$py" ]; then
		echo "make-venv: no CPython $v on this machine: its venv is left out" >&2
		continue
	fi
	if [ -x "$dir/bin/python" ] && cmp -s "$REQ" "$dir/requirements.txt"; then
		continue
	fi
	echo "make-venv: $dir from $py" >&2
	rm -rf "$dir"
	if ! "$UV" venv -q --python "$py" "$dir" || ! "$UV" pip install -q --python "$dir/bin/python" -r "$REQ"; then
		echo "make-venv: $dir: could not be built (see above)" >&2
		rm -rf "$dir"
		status=1
		continue
	fi
	cp "$REQ" "$dir/requirements.txt"
done
exit $status
