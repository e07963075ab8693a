#!/usr/bin/env bash
# Builds guardian's container image, guardian:VERSION, without any registry:
# the binary is compiled here (static, CGO_ENABLED=0, -trimpath) and copied
# with the host's CA bundle into the FROM scratch image of
# deploy/Dockerfile. Set GUARDIAN_IMAGE for another name or tag, GO for
# another go.
#
# VERSION is internal/version/VERSION, guardian's one version string: the
# binary embeds it (guardian version, guardian_build_info), it is the image's
# tag and its org.opencontainers.image.version label, and the Kubernetes
# and compose manifests pin it. The commit is the revision label, and the
# binary's revision (with -dirty for a tree with changes), as `make build`
# stamps it.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(cat internal/version/VERSION)
image="${GUARDIAN_IMAGE:-guardian:$version}"
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

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 "$go" build -trimpath \
	-ldflags "-X github.com/guardian-sec/guardian/internal/version.revision=$revision$dirty" \
	-o "$ctx/guardian" ./cmd/guardian
cp "$ca" "$ctx/ca-certificates.crt"
mkdir "$ctx/var-lib-guardian"
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
