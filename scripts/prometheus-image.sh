#!/usr/bin/env bash
# Builds the local Prometheus image of the compose monitoring profile (default
# guardian-prometheus:2) from Debian's prometheus package, the way
# redis-image.sh builds Redis's: no registry is needed. Idempotent. Set
# PROMETHEUS_IMAGE to use another tag; set REBUILD=1 to force a rebuild.
set -euo pipefail

image="${PROMETHEUS_IMAGE:-guardian-prometheus:2}"

if ! command -v prometheus >/dev/null 2>&1; then
	echo "prometheus-image: prometheus not installed (apt-get install prometheus)" >&2
	exit 1
fi

exec bash "$(dirname "$0")/binary-image.sh" "$image" "$(command -v prometheus)" \
	'["/usr/bin/prometheus"]' '["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/data"]' 9090
