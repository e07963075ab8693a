#!/usr/bin/env bash
# Runs docker compose on deploy/docker-compose.yaml from anywhere in the
# repository: `deploy/compose.sh ps`, `deploy/compose.sh logs guardian-a`.
# It uses the compose plugin (`docker compose`) where docker has it and the
# docker-compose CLI otherwise; the file is in the compose specification's
# syntax, which both read. Nothing needs exporting: every variable has a
# default, and the signing key defaults to deploy/.secrets/signing-key, which
# `make compose-up` creates.
set -euo pipefail
cd "$(dirname "$0")/.."

if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
else
	echo "compose: neither the docker compose plugin nor docker-compose is installed" >&2
	exit 1
fi
exec "${compose[@]}" -f deploy/docker-compose.yaml "$@"
