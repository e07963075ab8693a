#!/usr/bin/env bash
# Builds a FROM scratch image holding one host binary and the shared libraries
# ldd lists for it, at their own paths, with /data and /tmp writable by anyone.
# No registry is needed. Used by redis-image.sh and prometheus-image.sh.
#
#   binary-image.sh IMAGE BINARY ENTRYPOINT_JSON CMD_JSON [PORT]
#
# Idempotent: does nothing when IMAGE exists, unless REBUILD=1.
set -euo pipefail

image=$1 binary=$2 entrypoint=$3 cmd=$4 port=${5:-}
name=$(basename "$binary")

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "$name image: $image already present"
	exit 0
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

bin=$(readlink -f "$binary")
mkdir -p "$ctx/usr/bin" "$ctx/data" "$ctx/tmp"
cp "$bin" "$ctx/usr/bin/$name"
# Copy every shared library the binary loads, and the loader itself, at their own paths.
ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' | sort -u | while read -r lib; do
	mkdir -p "$ctx$(dirname "$lib")"
	cp -L "$lib" "$ctx$lib"
done
chmod 1777 "$ctx/tmp" "$ctx/data"

{
	echo "FROM scratch"
	echo "COPY . /"
	echo "WORKDIR /data"
	[ -z "$port" ] || echo "EXPOSE $port"
	echo "ENTRYPOINT $entrypoint"
	echo "CMD $cmd"
} >"$ctx/Dockerfile"

docker build -q -t "$image" "$ctx" >/dev/null
echo "$name image: built $image"
