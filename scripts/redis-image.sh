#!/usr/bin/env bash
# Builds guardian's local Redis test image (default guardian-redis:7) from Debian's
# redis-server package: the binary and the libraries ldd lists, in a FROM scratch image.
# No registry is needed. Idempotent: does nothing when the image already exists.
# Set GUARDIAN_REDIS_IMAGE to use another tag; set REBUILD=1 to force a rebuild.
set -euo pipefail

image="${GUARDIAN_REDIS_IMAGE:-guardian-redis:7}"

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "redis-image: $image already present"
	exit 0
fi

if ! command -v redis-server >/dev/null 2>&1; then
	echo "redis-image: redis-server not installed (apt-get install redis-server)" >&2
	exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

bin=$(readlink -f "$(command -v redis-server)")
mkdir -p "$ctx/usr/bin" "$ctx/data" "$ctx/tmp"
cp "$bin" "$ctx/usr/bin/redis-server"
# Copy every shared library the binary loads, and the loader itself, at their own paths.
ldd "$bin" | grep -oE '/[^ ]+' | sort -u | while read -r lib; do
	mkdir -p "$ctx$(dirname "$lib")"
	cp -L "$lib" "$ctx$lib"
done
chmod 1777 "$ctx/tmp"

cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY . /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--protected-mode", "no"]
DOCKERFILE

docker build -q -t "$image" "$ctx" >/dev/null
echo "redis-image: built $image"
