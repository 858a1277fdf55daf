#!/bin/sh
# The tests that run a build product as another user (uid 65534), from a
# clone in a directory that user cannot enter, as root's home (0700) or a
# `mktemp -d` directory are: they must run copies it can reach
# (tests/uid_dir_helper.h), never build/ itself. Clones HEAD (the committed
# state, as CI sees it) into a fresh `mktemp -d`, builds there only what
# those tests need, runs them with run-tests.sh (counts to RESULT), removes
# the clone.
#   other-user-lane.sh RESULT MAKE TARGET... -- PROG [PROG...]
# TARGETs are built in the clone with MAKE; each PROG ("cmd with args") runs
# there. Not root: nothing is built, each PROG counts as one skipped test.
set -u
res=$(realpath -m "$1")
make=$2
shift 2
targets=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	targets="$targets $1"
	shift
done
[ $# -gt 0 ] && shift
here=$(dirname "$(realpath "$0")")
mkdir -p "$(dirname "$res")"
if [ "$(id -u)" != 0 ]; then
	echo "other-user lane: skipped: running something as another user needs root"
	echo "0 0 $#" > "$res"
	exit 0
fi
if ! command -v git >/dev/null; then
	echo "!! other-user lane: git is not installed: cannot clone this checkout"
	echo "0 1 0" > "$res"
	exit 1
fi

# CI may check out as another user than the one running the tests: git
# refuses such a repository ("dubious ownership") unless told it is safe.
# A global config of our own says so for this script's git commands only.
tmp=$(mktemp -d) || { echo "0 1 0" > "$res"; exit 1; }
chmod 0700 "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
printf '[safe]\n\tdirectory = *\n' > "$tmp/gitconfig"
export GIT_CONFIG_GLOBAL="$tmp/gitconfig"

top=$(git rev-parse --show-toplevel 2>/dev/null)
head=$(git rev-parse --verify -q HEAD)
if [ "$top" != "$(pwd -P)" ] || [ -z "$head" ]; then
	echo "other-user lane: skipped: $(pwd -P) is not a git checkout with a commit, nothing to clone"
	echo "0 0 $#" > "$res"
	exit 0
fi
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] &&
	echo "other-user lane: testing HEAD $(git rev-parse --short HEAD); uncommitted changes are not in it"
if ! git clone --no-local -q . "$tmp/sp" </dev/null ||
	! git -C "$tmp/sp" checkout -q --detach "$head"; then
	echo "!! other-user lane: cannot clone this checkout into $tmp"
	echo "0 1 0" > "$res"
	exit 1
fi
# The point of the lane: uid 65534 cannot enter the clone's directory.
if command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups ls "$tmp/sp" >/dev/null 2>&1; then
	echo "!! other-user lane: uid 65534 can enter $tmp: the lane would prove nothing"
	echo "0 1 0" > "$res"
	exit 1
fi
echo "other-user lane: $(ls -ld "$tmp")"
# Our own jobs when no parent make shares its job slots.
case " ${MAKEFLAGS:-} " in
*jobserver*) jobs= ;;
*) jobs=-j$(nproc 2>/dev/null || echo 2) ;;
esac
echo "other-user lane: building$targets in $tmp/sp"
if ! (cd "$tmp/sp" && $make --no-print-directory $jobs $targets </dev/null); then
	echo "!! other-user lane: the build in $tmp/sp failed"
	echo "0 1 0" > "$res"
	exit 1
fi
cd "$tmp/sp" && "$here/run-tests.sh" "$res" "$@" </dev/null
