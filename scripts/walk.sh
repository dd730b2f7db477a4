#!/usr/bin/env bash
# The README's first walk, run by `make test` (make walk): `make run` on a
# fresh data directory, a card added with the CLI, a curl through the proxy
# to a local test shop (the real number arrives, only the stand-in comes
# back), then an MCP client's first checkout over mcpd's HTTP endpoint in
# the proxied Chromium. Loopback only, every port chosen free, bounded
# waits, and everything it started is stopped and removed on exit.
#
# Environment: BIN (default ./bin), PLAYWRIGHT_DRIVER_PATH, CHROMIUM_PATH.
set -euo pipefail

BIN=$(cd "${BIN:-./bin}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
site_pid=""
run_pid=""
bystanders=""

cleanup() {
	set +e
	if [ -n "$run_pid" ]; then
		kill -TERM "$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
	fi
	for pid in $site_pid $bystanders; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
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

# Another appliance on every default port (7700 to 7706), as when `make run`
# on the embedded defaults is still open in another terminal: the walk must
# not touch one of them (issue 26). When any is held already, whatever holds
# it plays that part.
held=""
for p in 7700 7701 7702 7703 7704 7705 7706; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then held="$held $p"; fi
done
if [ -n "$held" ]; then
	step "default ports already held:$held (the walk runs beside whatever holds them)"
else
	step "a bystander proxyd on the default ports"
	"$BIN/proxyd" run --data "$work/bystander" --credentials 127.0.0.1:7705 >"$work/bystander.log" 2>&1 &
	bystanders="$!"
	# and one more on mcpd's defaults (7704 MCP, 7706 metrics)
	"$BIN/proxyd" run --data "$work/bystander2" --proxy 127.0.0.1:7704 --control 127.0.0.1:7706 \
		--admin "127.0.0.1:$(free_port)" --dashboard "" >"$work/bystander2.log" 2>&1 &
	bystanders="$bystanders $!"
	for p in 7700 7701 7702 7703 7704 7705 7706; do
		for _ in $(seq 1 150); do
			(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
			sleep 0.2
		done
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || die "the bystander did not take port $p: $(tail -n 3 "$work"/bystander*.log)"
	done
fi

PROXY_PORT=$(free_port); CONTROL_PORT=$(free_port); ADMIN_PORT=$(free_port); DASH_PORT=$(free_port)
CRED_PORT=$(free_port); MCP_PORT=$(free_port); METRICS_PORT=$(free_port); SITE_PORT=$(free_port)

step "a local test shop on https://shop.test:$SITE_PORT (loopback)"
mkdir -p "$work/site"
(cd "$ROOT" && go build -o "$work/testsite" ./scripts/testsite)
"$work/testsite" --addr "127.0.0.1:$SITE_PORT" --dir "$work/site" >"$work/site.log" 2>&1 &
site_pid=$!
for _ in $(seq 1 50); do [ -f "$work/site/addr" ] && break; sleep 0.1; done
[ -f "$work/site/addr" ] || die "the test shop did not start"

step "make run with a config in the data directory (every port moved, every one free)"
mkdir -m 700 "$work/data"
cat >"$work/data/proxyd.yaml" <<YAML
listen:
  proxy: 127.0.0.1:$PROXY_PORT
  control: 127.0.0.1:$CONTROL_PORT
  admin: 127.0.0.1:$ADMIN_PORT
  dashboard: 127.0.0.1:$DASH_PORT
  credentials: 127.0.0.1:$CRED_PORT
  mcp: 127.0.0.1:$MCP_PORT
  mcp_metrics: 127.0.0.1:$METRICS_PORT
tls:
  extra_roots: [$work/site/ca.pem]     # the test shop's own CA
unsafe_allow_private_ranges: true       # the shop is on loopback (tests only)
unsafe_test_hosts:
  shop.test: 127.0.0.1                  # its name, without DNS (tests only)
YAML
DATA="$work/data" BIN="$BIN" \
	setsid bash "$ROOT/scripts/run.sh" >"$work/run.log" 2>&1 &
run_pid=$!
for _ in $(seq 1 150); do
	grep -q "agentvault is running" "$work/run.log" && break
	kill -0 "$run_pid" 2>/dev/null || die "make run exited"
	sleep 0.2
done
grep -q "agentvault is running" "$work/run.log" || die "make run did not start within 30 s"
for a in "127.0.0.1:$DASH_PORT" "http://127.0.0.1:$MCP_PORT/mcp" "127.0.0.1:$PROXY_PORT" "127.0.0.1:$CONTROL_PORT" \
	"127.0.0.1:$ADMIN_PORT" "127.0.0.1:$CRED_PORT" "127.0.0.1:$METRICS_PORT/metrics"; do
	grep -q "$a" "$work/run.log" || die "the banner does not show $a"
done
curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" | grep -q agentvault_build_info || die "mcpd's metrics are not on listen.mcp_metrics"
export AGENTVAULT_DATA="$work/data"

step "add a card and authorize the shop (the owner, from a second terminal)"
CARD=$(printf '4242%.0s' 1 2 3 4) # the public test card number
printf '%s\n737\n' "$CARD" | "$BIN/proxyd" vault add-card --exp 12/31 --sites shop.test
"$BIN/proxyd" owner authorize-site shop.test

step "curl through the proxy"
out=$("$BIN/proxyd" session create)
sid=$(sed -n 's/^session: *//p' <<<"$out")
proxy=$(sed -n 's/^proxy: *//p' <<<"$out")
CT=$(cat "$work/data/control-token"); KEY=$(cat "$work/data/api-key")
catalog=$(curl -fsS -H "Authorization: Bearer $CT" "http://127.0.0.1:$CONTROL_PORT/v1/catalog?apiKey=$KEY")
token=$(grep -o 'av_card_1_number_[a-z0-9]*' <<<"$catalog" | head -n1)
[ -n "$token" ] || die "no card token in the catalog"
auth=$(curl -fsS -H "Authorization: Bearer $CT" \
	-d "{\"token\":\"$token\",\"pageURL\":\"https://shop.test:$SITE_PORT/checkout\",\"orderTotal\":{\"amount\":\"12.00\",\"currency\":\"EUR\"}}" \
	"http://127.0.0.1:$CONTROL_PORT/v1/sessions/$sid/authorize")
standin=$(sed -n 's/.*"value":"\([0-9]*\)".*/\1/p' <<<"$auth")
[ -n "$standin" ] && [ "$standin" != "$CARD" ] || die "authorize gave no stand-in: $auth"
echo "stand-in for this session: $standin"
answer=$(curl -fsS --max-time 20 --proxy "$proxy" --cacert "$work/data/ca.pem" \
	-d "card=$standin&amount=12.00&currency=EUR" "https://shop.test:$SITE_PORT/pay")
grep -qx "$CARD" "$work/site/received.log" || die "the shop did not receive the real number"
grep -q "$CARD" <<<"$answer" && die "the real number came back through the proxy"
grep -q "$standin" <<<"$answer" || die "the echo was not replaced by the stand-in"
echo "the shop received the real number; the answer carries the stand-in"
curl -fsS -X DELETE -H "Authorization: Bearer $CT" "http://127.0.0.1:$CONTROL_PORT/v1/sessions/$sid" >/dev/null

step "an MCP client's first checkout (streamable HTTP, proxied Chromium)"
MCP="http://127.0.0.1:$MCP_PORT/mcp"
msid=""
rpc_id=0
# mcp METHOD PARAMS: one JSON-RPC call; prints the result's JSON line.
mcp() {
	rpc_id=$((rpc_id + 1))
	local body
	body=$(curl -sS --max-time 120 -D "$work/mcp.h" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' ${msid:+-H "Mcp-Session-Id: $msid"} \
		-d "{\"jsonrpc\":\"2.0\",\"id\":$rpc_id,\"method\":\"$1\",\"params\":$2}" "$MCP")
	[ -z "$msid" ] && msid=$(tr -d '\r' <"$work/mcp.h" | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *//p')
	sed -n 's/^data: //p' <<<"$body" | grep "\"id\":$rpc_id" || echo "$body"
}
tool() { mcp tools/call "{\"name\":\"$1\",\"arguments\":$2}"; }
mcp initialize '{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"walk","version":"0"}}' >/dev/null
curl -sS -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-H "Mcp-Session-Id: $msid" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$MCP"
r=$(tool get_token_catalog "{\"url\":\"https://shop.test:$SITE_PORT/checkout\"}")
num=$(grep -o 'av_card_1_number_[a-z0-9]*' <<<"$r" | head -n1)
cvc=$(grep -o 'av_card_1_cvv_[a-z0-9]*' <<<"$r" | head -n1)
[ -n "$num" ] && [ -n "$cvc" ] || die "get_token_catalog: $r"
# Over HTTP a browser belongs to the session handle a result names; every
# later call passes it (the hosted rules apply on loopback too).
h=$(grep -o 'session: s_[a-z2-7]*' <<<"$r" | head -n1 | cut -d' ' -f2)
[ -n "$h" ] || die "get_token_catalog named no session handle: $r"
r=$(tool open_page "{\"session\":\"$h\",\"url\":\"https://shop.test:$SITE_PORT/checkout\"}")
grep -q '"isError":true' <<<"$r" && die "open_page: $r"
r=$(tool fill_checkout "{\"session\":\"$h\",\"fields\":[{\"selector\":\"#exp-month\",\"value\":\"12\"},{\"selector\":\"#exp-year\",\"value\":\"2031\"},{\"selector\":\"#card\",\"value\":\"$num\"},{\"selector\":\"#cvc\",\"value\":\"$cvc\"}]}")
grep -q '"isError":true' <<<"$r" && die "fill_checkout: $r"
r=$(tool click "{\"session\":\"$h\",\"selector\":\"#pay\"}")
grep -q '"isError":true' <<<"$r" && die "click: $r"
r=$(tool get_session_outcome "{\"session\":\"$h\",\"successSelector\":\"#ok\",\"confirmsCheckout\":true,\"submitSelector\":\"#pay\"}")
grep -q '"isError":true' <<<"$r" && die "get_session_outcome: $r"
[ "$(grep -cx "$CARD" "$work/site/received.log")" -ge 2 ] || die "the checkout did not deliver the real number"
tool close_session "{\"session\":\"$h\"}" >/dev/null
echo "the agent bought from the test shop without seeing the card"

step "Ctrl-C stops both cleanly"
kill -INT -- "-$run_pid" 2>/dev/null || kill -INT "$run_pid"
wait "$run_pid" 2>/dev/null || true
run_pid=""
grep -q "agentvault: stopped" "$work/run.log" || die "no clean stop"
grep -q "exited (status" "$work/run.log" && die "Ctrl-C was reported as a crash"
echo
echo "walk: OK"
