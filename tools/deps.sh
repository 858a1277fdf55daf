#!/bin/sh
# Install the Debian packages stackprobe needs to build and test.
#
# Idempotent and quiet: asks dpkg first and calls apt-get only for what is
# missing. Non-interactive. Needs root only when something is missing.
# Parts that need more packages list them in tools/deps.d/<part>.list
# (one package per line, '#' comments; 'arch:arm64' lines add a dpkg
# foreign architecture before installing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)

base="make gcc clang llvm pkg-config libbpf-dev bpftool libelf-dev libdw-dev
zlib1g-dev libunwind-dev libcmocka-dev"

want="$base"
arches=""
for f in "$here"/deps.d/*.list; do
	[ -e "$f" ] || continue
	while IFS= read -r line; do
		line=${line%%#*}
		set -- $line
		[ $# -gt 0 ] || continue
		case "$1" in
		arch:*) arches="$arches ${1#arch:}" ;;
		*) want="$want $*" ;;
		esac
	done < "$f"
done

added_arch=0
for a in $arches; do
	if ! dpkg --print-foreign-architectures | grep -qx "$a"; then
		echo "deps: adding dpkg architecture $a"
		dpkg --add-architecture "$a"
		added_arch=1
	fi
done

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -n "$missing" ] || [ $added_arch -eq 1 ] || exit 0
[ -n "$missing" ] || exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages:$missing" >&2
	echo "deps: run 'sudo make deps' (or install them with apt-get) and retry" >&2
	exit 1
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
