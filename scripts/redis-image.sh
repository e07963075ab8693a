#!/usr/bin/env bash
# Builds guardian's local Redis test image (default guardian-redis:7) from Debian's
# redis-server package: the binary and the libraries ldd lists, in a FROM scratch image.
# No registry is needed. Idempotent: does nothing when the image already exists.
# Set GUARDIAN_REDIS_IMAGE to use another tag; set REBUILD=1 to force a rebuild.
set -euo pipefail

image="${GUARDIAN_REDIS_IMAGE:-guardian-redis:7}"

if ! command -v redis-server >/dev/null 2>&1; then
	echo "redis-image: redis-server not installed (apt-get install redis-server)" >&2
	exit 1
fi

exec bash "$(dirname "$0")/binary-image.sh" "$image" "$(command -v redis-server)" \
	'["/usr/bin/redis-server"]' '["--protected-mode", "no"]' 6379
