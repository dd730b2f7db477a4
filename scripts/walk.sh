#!/usr/bin/env bash
# The README's first ten minutes, run by `make test` (make walk): every
# command block of that section, as written, in order, against a fresh data
# directory, then the blocks of docs/walkthrough.md (the proxy by hand with
# curl) and Ctrl-C. A README line that drifts from what works fails here.
#
# What stands in for the person at the keyboard, and nothing more: the data
# directory is chosen with AGENTVAULT_DATA (the rule every command follows)
# and holds a proxyd.yaml with free ports, so the walk runs beside a proxyd
# on the default ports (it starts one when they are free); a `make run`
# block runs in the background (terminal 1), and one when make run is
# already up is Ctrl-C then start again; the password prompt reads one line
# of stdin; the system trust store is a scratch directory (cp into
# /usr/local/share/ca-certificates and update-ca-certificates are shimmed);
# the owner approves what the first checkout asks (proxyd owner approve).
# Loopback only, bounded waits, and everything it started is stopped and
# everything it wrote removed on exit.
#
# Environment: PLAYWRIGHT_DRIVER_PATH, CHROMIUM_PATH. Run from the clone
# after `make build` (make walk does both).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN=./bin
work=$(mktemp -d)
groups=""    # process groups to stop on exit (make run, the shop, bystanders)
run_pgid=""
approver=""

cleanup() {
	set +e
	[ -n "$approver" ] && kill "$approver" 2>/dev/null
	for g in $run_pgid $groups; do
		kill -TERM -- "-$g" 2>/dev/null
	done
	for g in $run_pgid $groups; do
		for _ in $(seq 1 50); do
			kill -0 -- "-$g" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL -- "-$g" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
die() {
	echo "walk: FAILED: $*" >&2
	[ -f "$work/run.log" ] && { echo "--- make run output (last 30 lines)" >&2; tail -n 30 "$work/run.log" >&2; }
	exit 1
}

# A free loopback port: nothing answers a connect on it.
used=" "
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		case "$used" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used="$used$p "
			echo "$p"
			return
		fi
	done
	die "no free port"
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# bg NAME CMD...: start CMD in a process group of its own, remembered for
# cleanup, its output in $work/NAME.log.
bg() {
	local name=$1
	shift
	setsid "$@" >"$work/$name.log" 2>&1 </dev/null &
	groups="$groups $!"
}

# Another appliance on every default port (7700 to 7706), as when `make run`
# on the embedded defaults is still open in another terminal: the walk must
# not touch one of them (issue 26). When any is held already, whatever holds
# it plays that part.
held=""
for p in 7700 7701 7702 7703 7704 7705 7706; do
	listening "$p" && held="$held $p"
done
if [ -n "$held" ]; then
	step "default ports already held:$held (the walk runs beside whatever holds them)"
else
	step "a bystander proxyd on the default ports"
	bg bystander "$BIN/proxyd" run --data "$work/bystander" --credentials 127.0.0.1:7705
	# and one more on mcpd's defaults (7704 MCP, 7706 metrics)
	bg bystander2 "$BIN/proxyd" run --data "$work/bystander2" --proxy 127.0.0.1:7704 --control 127.0.0.1:7706 \
		--admin "127.0.0.1:$(free_port)" --dashboard ""
	for p in 7700 7701 7702 7703 7704 7705 7706; do
		for _ in $(seq 1 150); do
			listening "$p" && break
			sleep 0.2
		done
		listening "$p" || die "the bystander did not take port $p: $(tail -n 3 "$work"/bystander*.log)"
	done
fi

step "a fresh data directory whose proxyd.yaml moves every port"
export AGENTVAULT_DATA="$work/data"
unset DATA
PROXY_PORT=$(free_port); CONTROL_PORT=$(free_port); ADMIN_PORT=$(free_port); DASH_PORT=$(free_port)
CRED_PORT=$(free_port); MCP_PORT=$(free_port); METRICS_PORT=$(free_port)
mkdir -m 700 "$AGENTVAULT_DATA"
cat >"$AGENTVAULT_DATA/proxyd.yaml" <<YAML
listen:
  proxy: 127.0.0.1:$PROXY_PORT
  control: 127.0.0.1:$CONTROL_PORT
  admin: 127.0.0.1:$ADMIN_PORT
  dashboard: 127.0.0.1:$DASH_PORT
  credentials: 127.0.0.1:$CRED_PORT
  mcp: 127.0.0.1:$MCP_PORT
  mcp_metrics: 127.0.0.1:$METRICS_PORT
YAML

# The README's blocks, in order.
awk -v dir="$work" '
	/^## The first ten minutes/ { on = 1; next }
	/^## / { on = 0 }
	on && /^```sh$/ { n++; inb = 1; next }
	on && inb && /^```$/ { inb = 0; next }
	on && inb { print > (dir "/block." n ".sh") }
' README.md
nblocks=$(ls "$work"/block.*.sh 2>/dev/null | wc -l)
[ "$nblocks" -ge 6 ] || die "found $nblocks command blocks under README's 'The first ten minutes'"

mkdir "$work/trust"
cat >"$work/prelude.sh" <<PRELUDE
cp() {
	local a=() x
	for x in "\$@"; do
		case \$x in /usr/local/share/ca-certificates/*) a+=("$work/trust/\${x#/usr/local/share/ca-certificates/}") ;; *) a+=("\$x") ;; esac
	done
	command cp "\${a[@]}"
}
update-ca-certificates() { ls "$work/trust"/*.crt >/dev/null && echo "(walk: trust store left alone; the root is in $work/trust)"; }
PRELUDE

make_run() {
	if [ -n "$run_pgid" ]; then
		step "terminal 1: Ctrl-C"
		kill -INT -- "-$run_pgid" 2>/dev/null
		for _ in $(seq 1 150); do
			kill -0 -- "-$run_pgid" 2>/dev/null || break
			sleep 0.2
		done
		kill -0 -- "-$run_pgid" 2>/dev/null && die "make run did not stop on Ctrl-C"
		grep -q "agentvault: stopped" "$work/run.log" || die "no clean stop after Ctrl-C"
		run_pgid=""
	fi
	step "terminal 1: make run"
	: >"$work/run.log"
	setsid bash -c 'make run' >"$work/run.log" 2>&1 </dev/null &
	run_pgid=$!
	for _ in $(seq 1 3000); do # 10 minutes: a first build
		grep -q "agentvault is running" "$work/run.log" && break
		kill -0 "$run_pgid" 2>/dev/null || die "make run exited"
		sleep 0.2
	done
	grep -q "agentvault is running" "$work/run.log" || die "make run did not start"
	for a in "127.0.0.1:$DASH_PORT" "http://127.0.0.1:$MCP_PORT/mcp" "127.0.0.1:$PROXY_PORT" "127.0.0.1:$CONTROL_PORT" \
		"127.0.0.1:$ADMIN_PORT" "127.0.0.1:$CRED_PORT" "127.0.0.1:$METRICS_PORT/metrics"; do
		grep -q "$a" "$work/run.log" || die "the banner does not show $a"
	done
	if grep -q "first build takes a few minutes" Makefile; then
		grep -q "first build takes a few minutes" "$work/run.log" || die "make run did not say the first build takes a few minutes"
	fi
}

# The card number the README's owner stores: what the shop must receive,
# and what must never come back through the proxy.
real_number=$(grep -o "printf '[0-9]\{13,19\}" README.md | head -n1 | grep -o '[0-9]*$')
[ -n "$real_number" ] || die "the README stores no card number"

for i in $(seq 1 "$nblocks"); do
	block="$work/block.$i.sh"
	if [ "$(grep -v '^[[:space:]]*#' "$block" | grep -v '^[[:space:]]*$')" = "make run" ]; then
		make_run
		continue
	fi
	step "terminal 2, block $i: $(grep -v '^[[:space:]]*#' "$block" | head -n1)"
	if grep -q 'first-checkout.sh' "$block"; then
		# The owner, on the dashboard: approve what the checkout asks.
		(
			for _ in $(seq 1 600); do
				for id in $("$BIN/proxyd" owner pending --json 2>/dev/null | grep -o 'apr_[0-9a-f]*' | sort -u); do
					"$BIN/proxyd" owner approve "$id" >/dev/null 2>&1 && echo "(walk: the owner approved $id)"
				done
				sleep 0.5
			done
		) &
		approver=$!
	fi
	setsid bash -euo pipefail -c ". '$work/prelude.sh'; . '$block'" <<<"correct horse battery staple" >"$work/out.$i" 2>&1 &
	pid=$!
	groups="$groups $pid"
	wait "$pid" || { cat "$work/out.$i" >&2; die "README block $i failed"; }
	cat "$work/out.$i"
	if [ -n "$approver" ]; then
		kill "$approver" 2>/dev/null
		wait "$approver" 2>/dev/null || true
		approver=""
	fi
	case $(cat "$block") in
	*update-ca-certificates*)
		curl -fsS -o /dev/null --cacert "$work/trust/agentvault-dashboard.crt" "https://127.0.0.1:$DASH_PORT/signin" ||
			die "the trusted root does not verify the dashboard"
		;;
	*first-checkout.sh*)
		grep -qx "$real_number" "$AGENTVAULT_DATA/testshop/received.log" || die "the shop did not receive the real number"
		grep -q "approved" "$work/out.$i" || grep -q "waiting for the account owner" "$work/out.$i" ||
			die "the first checkout did not wait for the owner's approval of a new site"
		;;
	*mcp-config*)
		grep -q "\"url\": \"http://127.0.0.1:$MCP_PORT/mcp\"" "$work/out.$i" || die "mcp-config does not name listen.mcp"
		;;
	esac
done
metrics=$(curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics") || die "mcpd's metrics do not answer on listen.mcp_metrics"
grep -q agentvault_build_info <<<"$metrics" || die "mcpd's metrics are not on listen.mcp_metrics"

step "docs/walkthrough.md: the proxy by hand"
awk '/^```sh$/ { inb = 1; next } inb && /^```$/ { inb = 0; next } inb { print }' docs/walkthrough.md >"$work/walkthrough.sh"
before=$(grep -c . "$AGENTVAULT_DATA/testshop/received.log")
bash -euo pipefail "$work/walkthrough.sh" >"$work/walkthrough.out" 2>&1 || { cat "$work/walkthrough.out" >&2; die "docs/walkthrough.md failed"; }
cat "$work/walkthrough.out"
after=$(grep -c . "$AGENTVAULT_DATA/testshop/received.log")
[ "$after" -eq $((before + 1)) ] || die "the shop received $((after - before)) requests by hand, want the one to shop.test"
tail -n1 "$AGENTVAULT_DATA/testshop/received.log" | grep -qx "$real_number" || die "the shop did not receive the real number by hand"
grep -q '"code":"insecure_site"' "$work/walkthrough.out" || die "plain http was not refused with insecure_site"
grep -q '"code":"destination_unauthorized"' "$work/walkthrough.out" || die "the stand-in sent to other.test was not refused (destination_unauthorized)"
grep -q "id=\"echo\">$(grep -o '"value":"[0-9]*"' "$work/walkthrough.out" | grep -o '[0-9]\{12,\}')<" "$work/walkthrough.out" ||
	die "the shop's echo did not come back as the stand-in"
grep -q "$real_number" <(grep -vx "$real_number" "$work/walkthrough.out") && die "the real number came back through the proxy"

step "terminal 1: Ctrl-C stops both cleanly"
kill -INT -- "-$run_pgid" 2>/dev/null
for _ in $(seq 1 150); do
	kill -0 -- "-$run_pgid" 2>/dev/null || break
	sleep 0.2
done
run_pgid=""
grep -q "agentvault: stopped" "$work/run.log" || die "no clean stop"
grep -q "failed (exit status" "$work/run.log" && die "Ctrl-C was reported as a crash"
echo
echo "walk: OK"
