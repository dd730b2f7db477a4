#!/usr/bin/env bash
# `make run`: proxyd in the background, mcpd serving MCP over HTTP in the
# foreground. Ctrl-C (or SIGTERM to this script) stops both; if either one
# exits, the other is stopped too.
#
# Every address comes from proxyd itself (`proxyd addresses`: the data
# directory and config rule both daemons follow, package deploy), so a
# config that moves one port moves what this script checks and prints.
#
# Environment: DATA or AGENTVAULT_DATA (the data directory; otherwise the
# config file's data_dir, then ~/.agentvault), BIN (default ./bin),
# PROXYD_ARGS (extra `proxyd run` flags: make run PROXYD_ARGS="--config
# configs/proxyd.yaml"), MCPD_ARGS (extra mcpd flags), MCP_ADDR (mcpd's
# HTTP address instead of the config's listen.mcp), CHROMIUM_PATH,
# PLAYWRIGHT_DRIVER_PATH (mcpd finds the checkout's .cache/playwright-driver
# by itself).
set -uo pipefail

BIN=${BIN:-./bin}

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

# shellcheck disable=SC2086 # PROXYD_ARGS is a list of flags
addrs=$("$BIN/proxyd" addresses ${PROXYD_ARGS:-}) || exit 2
CONFIG=off CREDENTIALS=off MCP_METRICS=off DASHBOARD=off
while read -r key value; do
	case $key in
	data_dir) DATA=$value ;;
	config) CONFIG=$value ;;
	proxy) PROXY=$value ;;
	control) CONTROL=$value ;;
	admin) ADMIN=$value ;;
	dashboard) DASHBOARD=$value ;;
	credentials) CREDENTIALS=$value ;;
	mcp) MCP_CONFIG=$value ;;
	mcp_metrics) MCP_METRICS=$value ;;
	esac
done <<<"$addrs"
MCP_ADDR=${MCP_ADDR:-$MCP_CONFIG}
export AGENTVAULT_DATA=$DATA

# shellcheck disable=SC2086
"$BIN/proxyd" run ${PROXYD_ARGS:-} &
proxyd_pid=$!

# wait_for NAME PID URL: until URL answers "ok pid=PID" (another instance
# already on the port answers too, and must not be taken for this one), or
# the process exits. Bounded: 150 tries, 0.2 s apart.
wait_for() {
	local name=$1 pid=$2 url=$3 body
	for _ in $(seq 1 150); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			stopped=1
			echo "agentvault: $name did not start (see its error above)" >&2
			return 1
		fi
		body=$(curl -fsS --max-time 2 "$url" 2>/dev/null)
		if [ "$body" = "ok pid=$pid" ]; then
			return 0
		fi
		sleep 0.2
	done
	stopped=1
	echo "agentvault: $name (pid $pid) did not answer $url within 30 s" >&2
	return 1
}
wait_for proxyd "$proxyd_pid" "http://$ADMIN/healthz" || exit 1

mcpd_args=(--data "$DATA" --http="$MCP_ADDR")
[ "$CONFIG" != off ] && mcpd_args+=(--config "$CONFIG")
# A run flag (PROXYD_ARGS="--control ADDR") moves the control API past
# what the config says: mcpd is told where proxyd listens.
case $CONTROL in
http://*) mcpd_args+=(--control-url "$CONTROL") ;;
esac
# shellcheck disable=SC2086
"$BIN/mcpd" "${mcpd_args[@]}" ${MCPD_ARGS:-} &
mcpd_pid=$!
wait_for mcpd "$mcpd_pid" "http://$MCP_ADDR/healthz" || exit 1

dash=off
[ "$DASHBOARD" != off ] && dash="https://$DASHBOARD/   (trust $DATA/dashboard-ca.pem once: README, first ten minutes)"
cat <<MSG

agentvault is running (data in $DATA, config: ${CONFIG/#off/the embedded defaults})
  owner dashboard   $dash
  MCP endpoint      http://$MCP_ADDR/mcp   (streamable HTTP; stdio clients run bin/mcpd themselves)
  health, metrics   http://$ADMIN/healthz   http://$ADMIN/metrics
  proxy, control    $PROXY, $CONTROL
MSG
[ "$CREDENTIALS" != off ] && echo "  credential use    http://$CREDENTIALS/v1/credential-use"
[ "$MCP_METRICS" != off ] && echo "  mcpd metrics      http://$MCP_METRICS/metrics"
cat <<MSG

Next, in another terminal (README: "The first ten minutes"):
  $BIN/proxyd owner set-password --email you@example.com --data $DATA   # then sign in to the dashboard
  $BIN/proxyd mcp-config --http --data $DATA                             # your MCP client's config
  $BIN/proxyd doctor --data $DATA                                        # checks the deployment, says what to fix

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
