#!/usr/bin/env bash
# `make run`: proxyd in the background, mcpd serving MCP over HTTP in the
# foreground. Ctrl-C (or SIGTERM to this script) stops both; if either one
# exits, the other is stopped too.
#
# Environment: DATA (data dir, default ~/.agentvault), BIN (default ./bin),
# MCP_ADDR (default 127.0.0.1:7704), PROXYD_ARGS (extra `proxyd run` flags,
# e.g. "--config configs/proxyd.yaml"), PLAYWRIGHT_DRIVER_PATH, CHROMIUM_PATH.
set -uo pipefail

DATA=${DATA:-$HOME/.agentvault}
BIN=${BIN:-./bin}
MCP_ADDR=${MCP_ADDR:-127.0.0.1:7704}
ADMIN=${ADMIN:-127.0.0.1:7702}
DASHBOARD=${DASHBOARD:-https://127.0.0.1:7703/}
# `make driver` puts playwright's driver here; mcpd never downloads one.
export PLAYWRIGHT_DRIVER_PATH=${PLAYWRIGHT_DRIVER_PATH:-$PWD/.cache/playwright-driver}

proxyd_pid=""
mcpd_pid=""

stop_all() {
	trap - INT TERM EXIT
	for pid in $mcpd_pid $proxyd_pid; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $mcpd_pid $proxyd_pid; do
		wait "$pid" 2>/dev/null
	done
	echo "agentvault: stopped"
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap 'stop_all' EXIT

mkdir -p "$DATA"
# shellcheck disable=SC2086 # PROXYD_ARGS is a list of flags
"$BIN/proxyd" run --data "$DATA" ${PROXYD_ARGS:-} &
proxyd_pid=$!

# proxyd is up when its admin listener answers /healthz (it writes the
# control token and the default API key before listening).
up=""
for _ in $(seq 1 150); do
	if ! kill -0 "$proxyd_pid" 2>/dev/null; then
		echo "agentvault: proxyd exited during start-up (see above)" >&2
		exit 1
	fi
	if curl -fsS "http://$ADMIN/healthz" >/dev/null 2>&1; then
		up=1
		break
	fi
	sleep 0.2
done
if [ -z "$up" ]; then
	echo "agentvault: proxyd did not answer http://$ADMIN/healthz within 30 s" >&2
	exit 1
fi

"$BIN/mcpd" --http="$MCP_ADDR" \
	--control-token-file "$DATA/control-token" \
	--api-key-file "$DATA/api-key" &
mcpd_pid=$!

cat <<MSG

agentvault is running (data in $DATA)
  owner dashboard   $DASHBOARD   (self-signed local certificate)
  MCP endpoint      http://$MCP_ADDR/mcp   (streamable HTTP; stdio clients run bin/mcpd themselves)
  health, metrics   http://$ADMIN/healthz   http://$ADMIN/metrics
  proxy, control    127.0.0.1:7700, 127.0.0.1:7701

First run, in another terminal:
  1. $BIN/proxyd owner --data $DATA set-password --email you@example.com   # then sign in to the dashboard
  2. $BIN/proxyd vault --data $DATA add-card --exp MM/YYYY --sites shop.example   # number, then code, on stdin
  3. point your MCP client at http://$MCP_ADDR/mcp (README: "Registering mcpd")
  The agent's API key is $DATA/api-key; the first fill on a new site waits for your approval on the dashboard.

Ctrl-C stops both.
MSG

# Whichever exits first ends the run; `wait -n` returns on a signal too,
# so the traps above run at once.
wait -n "$proxyd_pid" "$mcpd_pid"
rc=$?
echo "agentvault: proxyd or mcpd exited (status $rc); stopping both" >&2
exit "$rc"
