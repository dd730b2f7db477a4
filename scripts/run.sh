#!/usr/bin/env bash
# `make run`: proxyd in the background, mcpd serving MCP over HTTP in the
# foreground. Ctrl-C (or SIGTERM to this script) stops both; if either one
# exits, the other is stopped too.
#
# Environment: DATA or AGENTVAULT_DATA (the data directory; otherwise the
# config file's data_dir, then ~/.agentvault: `proxyd data-dir` says which),
# BIN (default ./bin), MCP_ADDR (default 127.0.0.1:7704), ADMIN (proxyd's
# admin address, default 127.0.0.1:7702), PROXYD_ARGS (extra `proxyd run`
# flags: make run PROXYD_ARGS="--config configs/proxyd.yaml"),
# MCPD_ARGS (extra mcpd flags, e.g. "--metrics-addr=127.0.0.1:7805"),
# PLAYWRIGHT_DRIVER_PATH, CHROMIUM_PATH.
set -uo pipefail

BIN=${BIN:-./bin}
MCP_ADDR=${MCP_ADDR:-127.0.0.1:7704}
ADMIN=${ADMIN:-127.0.0.1:7702}
DASHBOARD=${DASHBOARD:-https://127.0.0.1:7703/}
# `make driver` puts playwright's driver here; mcpd never downloads one.
export PLAYWRIGHT_DRIVER_PATH=${PLAYWRIGHT_DRIVER_PATH:-$PWD/.cache/playwright-driver}

proxyd_pid=""
mcpd_pid=""
stopped=""

stop_all() {
	trap - INT TERM EXIT
	for pid in $mcpd_pid $proxyd_pid; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $mcpd_pid $proxyd_pid; do
		wait "$pid" 2>/dev/null
	done
	if [ -z "$stopped" ]; then
		stopped=1
		echo "agentvault: stopped"
	fi
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap 'stop_all' EXIT

# The data directory by proxyd's own rule (--data, AGENTVAULT_DATA, DATA,
# the config's data_dir, ~/.agentvault), so mcpd reads the same files.
# shellcheck disable=SC2086 # PROXYD_ARGS is a list of flags
DATA=$("$BIN/proxyd" data-dir ${PROXYD_ARGS:-}) || exit 2
export DATA

# shellcheck disable=SC2086
"$BIN/proxyd" run ${PROXYD_ARGS:-} &
proxyd_pid=$!

# proxyd is up when its admin listener answers /healthz with ITS pid: an
# instance already running on the same port answers too, and must not be
# taken for this one (it writes the control token and the default API key
# before listening).
up=""
for _ in $(seq 1 150); do
	if ! kill -0 "$proxyd_pid" 2>/dev/null; then
		wait "$proxyd_pid" 2>/dev/null
		stopped=1
		echo "agentvault: proxyd did not start (see its error above)" >&2
		proxyd_pid=""
		exit 1
	fi
	body=$(curl -fsS "http://$ADMIN/healthz" 2>/dev/null)
	if [ "$body" = "ok pid=$proxyd_pid" ]; then
		up=1
		break
	fi
	sleep 0.2
done
if [ -z "$up" ]; then
	stopped=1
	echo "agentvault: proxyd (pid $proxyd_pid) did not answer http://$ADMIN/healthz within 30 s" >&2
	exit 1
fi

"$BIN/mcpd" --http="$MCP_ADDR" \
	--control-token-file "$DATA/control-token" \
	--api-key-file "$DATA/api-key" ${MCPD_ARGS:-} &
mcpd_pid=$!

cat <<MSG

agentvault is running (data in $DATA)
  owner dashboard   $DASHBOARD   (trust $DATA/dashboard-ca.pem once: README "Trust the dashboard once")
  MCP endpoint      http://$MCP_ADDR/mcp   (streamable HTTP; stdio clients run bin/mcpd themselves)
  health, metrics   http://$ADMIN/healthz   http://$ADMIN/metrics
  proxy, control    127.0.0.1:7700, 127.0.0.1:7701

First run, in another terminal:
  1. $BIN/proxyd owner --data $DATA set-password --email you@example.com   # then sign in to the dashboard
  2. $BIN/proxyd vault --data $DATA add-card --exp MM/YY --sites shop.example   # number, then code, on stdin
  3. point your MCP client at http://$MCP_ADDR/mcp (README: "Registering mcpd")
  The agent's API key is $DATA/api-key; the first fill on a new site waits for your approval on the dashboard.
  $BIN/proxyd doctor --data $DATA checks the deployment and says what to fix.

Ctrl-C stops both.
MSG

# Whichever exits first ends the run; `wait -n` returns on a signal too,
# so the traps above run at once. Ctrl-C reaches proxyd and mcpd as well
# (one process group): one of them exiting 0 is that clean stop.
wait -n "$proxyd_pid" "$mcpd_pid"
rc=$?
if [ "$rc" -eq 0 ]; then
	stop_all
	exit 0
fi
who=mcpd
kill -0 "$proxyd_pid" 2>/dev/null || who=proxyd
echo "agentvault: $who failed (exit status $rc); stopping the other" >&2
exit "$rc"
