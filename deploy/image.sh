#!/usr/bin/env bash
# Builds guardian's container image (default guardian:latest) without any
# registry: the binary is compiled here (static, CGO_ENABLED=0, -trimpath)
# and copied with the host's CA bundle into the FROM scratch image of
# deploy/Dockerfile, stamped with the version and revision (VERSION and
# REVISION override them). Set GUARDIAN_IMAGE for another tag, GO for
# another go.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${GUARDIAN_IMAGE:-guardian:latest}"
go="${GO:-go}"
ca=/etc/ssl/certs/ca-certificates.crt

if [ ! -r "$ca" ]; then
	echo "image: $ca not found (apt-get install ca-certificates)" >&2
	exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# guardian version and guardian_build_info report what was built.
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
revision="${REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
pkg=github.com/guardian-sec/guardian/internal/version
CGO_ENABLED=0 "$go" build -trimpath -ldflags "-X $pkg.version=$version -X $pkg.revision=$revision" \
	-o "$ctx/guardian" ./cmd/guardian
cp "$ca" "$ctx/ca-certificates.crt"
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker build -q -f deploy/Dockerfile -t "$image" "$ctx" >/dev/null
new=$(docker image inspect -f '{{.Id}}' "$image")
# The image this tag named before is left untagged: remove it unless a
# container still uses it.
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	docker rmi "$old" >/dev/null 2>&1 || true
fi
echo "image: built $image"
