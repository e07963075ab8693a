#!/usr/bin/env bash
# Builds guardian's container image (default guardian:latest) without any
# registry: the binary is compiled here (static, CGO_ENABLED=0, -trimpath)
# and copied with the host's CA bundle into the FROM scratch image of
# deploy/Dockerfile. Set GUARDIAN_IMAGE for another tag, GO for another go.
#
# The version (GUARDIAN_VERSION, default from git describe: the tag, or
# 0.0.0-dev+COMMIT between tags; -dirty with uncommitted changes) and the
# commit go into the binary (guardian version, guardian_build_info) and into
# the image's OCI labels.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${GUARDIAN_IMAGE:-guardian:latest}"
go="${GO:-go}"
ca=/etc/ssl/certs/ca-certificates.crt

if [ ! -r "$ca" ]; then
	echo "image: $ca not found (apt-get install ca-certificates)" >&2
	exit 1
fi

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	dirty=-dirty
fi
version="${GUARDIAN_VERSION:-$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null ||
	echo "0.0.0-dev+${revision:0:12}${dirty}")}"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

pkg=github.com/guardian-sec/guardian/internal/version
CGO_ENABLED=0 "$go" build -trimpath -ldflags "-X $pkg.version=$version -X $pkg.revision=$revision" \
	-o "$ctx/guardian" ./cmd/guardian
cp "$ca" "$ctx/ca-certificates.crt"
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker build -q -f deploy/Dockerfile -t "$image" \
	--build-arg "VERSION=$version" --build-arg "REVISION=$revision" "$ctx" >/dev/null
new=$(docker image inspect -f '{{.Id}}' "$image")
# The image this tag named before is left untagged: remove it unless a
# container still uses it.
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	docker rmi "$old" >/dev/null 2>&1 || true
fi
echo "image: built $image ($version)"
