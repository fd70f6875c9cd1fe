#!/bin/sh
# Creates one virtual environment per CPython at build/venv/3.X/ with the pinned PyPI torch of
# tests/requirements/torch.txt: Debian's python3.11, pyenv's 3.12 and 3.13 where this machine has them.
# pip's cache (~/.cache/pip) is shared, so the nvidia-* wheels (3-4 GB) are fetched once for all of them.
# A venv is rebuilt only when the requirements file changed (its copy is kept in the venv); one that cannot be
# built is reported and left out, and the tests say which versions ran.
set -u
cd "$(dirname "$0")/.."
REQ=tests/requirements/torch.txt
VERSIONS=${VENV_VERSIONS:-"3.11 3.12 3.13"}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
status=0

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
	if ! "$py" -m venv "$dir" || ! "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"; then
		echo "make-venv: $dir: could not be built (see above)" >&2
		rm -rf "$dir"
		status=1
		continue
	fi
	cp "$REQ" "$dir/requirements.txt"
done
exit $status
