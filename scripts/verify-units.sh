#!/usr/bin/env bash
# Checks the systemd units in configs/systemd (make units-check, part of
# make test): the hardening every unit must keep, then `systemd-analyze
# verify` with ExecStart pointed at the binaries just built (verify refuses
# a unit whose binary is missing, and /usr/local/bin holds none here). Any
# line verify prints (an unknown key, a bad value, both only "ignored" by
# systemd) fails the check. Where systemd-analyze cannot run (no systemd),
# it says so and the hardening check alone stands.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "${BIN:-$ROOT/bin}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for unit in "$ROOT"/configs/systemd/*.service; do
	name=$(basename "$unit")
	for want in '^NoNewPrivileges=yes$' '^ProtectSystem=strict$' '^ProtectHome=yes$' '^PrivateTmp=yes$' '^User=agentvault$' \
		'^StateDirectory=agentvault\( \|$\)' '^Environment=AGENTVAULT_DATA=%S/agentvault$' '^CapabilityBoundingSet=$'; do
		grep -q "$want" "$unit" || { echo "$name: lacks ${want//[\^\$]/}" >&2; status=1; }
	done
	sed "s|/usr/local/bin/|$BIN/|" "$unit" >"$work/$name"
done
if ! systemd-analyze --version >/dev/null 2>&1; then
	echo "units-check: systemd-analyze cannot run here; checked the hardening keys only" >&2
	exit "$status"
fi
if ! out=$(systemd-analyze verify "$work"/*.service 2>&1) || [ -n "$out" ]; then
	echo "$out" >&2
	echo "units-check: systemd-analyze verify found problems in configs/systemd" >&2
	exit 1
fi
[ "$status" -eq 0 ] && echo "units-check: configs/systemd verified ($(ls "$work" | tr '\n' ' '))"
exit "$status"
