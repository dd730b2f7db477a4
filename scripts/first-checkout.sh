#!/usr/bin/env bash
# An MCP client's first checkout, scripted: the calls an agent makes to the
# MCP endpoint `make run` serves (streamable HTTP), buying from the test
# shop (scripts/testsite) with the vault's first card in the proxied
# Chromium. It sees only tokens; the shop gets the real number.
#
# Over HTTP a call that waits on the owner answers at once with
# status=pending and a wait id; this script then says what to approve and
# asks for the answer with get_pending_result until the owner decides
# (approve on the dashboard's Approvals page, or `proxyd owner pending` and
# `proxyd owner approve apr_...`), up to 10 minutes.
#
# Environment: BIN (default ./bin), the data directory as proxyd finds it
# (--data is not taken here: AGENTVAULT_DATA or DATA). Exit 0 once the
# shop confirmed the purchase.
set -euo pipefail

BIN=${BIN:-./bin}
addrs=$("$BIN/proxyd" addresses)
DATA=$(sed -n 's/^data_dir //p' <<<"$addrs")
MCP="http://$(sed -n 's/^mcp //p' <<<"$addrs")/mcp"
shop_url_file="$DATA/testshop/url"
[ -f "$shop_url_file" ] || { echo "first-checkout: no test shop set up in $DATA (./bin/testsite --configure)" >&2; exit 1; }
SHOP=$(cat "$shop_url_file")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The shop answers once `testsite` runs (bounded wait).
shop_addr=$(cat "$DATA/testshop/addr")
for _ in $(seq 1 50); do
	curl -fsk --max-time 2 -o /dev/null "https://$shop_addr/checkout" 2>/dev/null && break
	sleep 0.2
done
curl -fsk --max-time 2 -o /dev/null "https://$shop_addr/checkout" || { echo "first-checkout: the test shop does not answer at $shop_addr (./bin/testsite &)" >&2; exit 1; }

sid=""
rpc_id=0
# rpc METHOD PARAMS: one JSON-RPC call; prints the result's JSON line.
rpc() {
	rpc_id=$((rpc_id + 1))
	local body
	body=$(curl -sS --max-time 120 -D "$tmp/h" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' ${sid:+-H "Mcp-Session-Id: $sid"} \
		-d "{\"jsonrpc\":\"2.0\",\"id\":$rpc_id,\"method\":\"$1\",\"params\":$2}" "$MCP")
	[ -z "$sid" ] && sid=$(tr -d '\r' <"$tmp/h" | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *//p')
	sed -n 's/^data: //p' <<<"$body" | grep "\"id\":$rpc_id" || echo "$body"
}
# tool NAME ARGS: a tool call; a pending answer is followed up with
# get_pending_result until it is final. Prints the final result.
tool() {
	local r wait said=""
	r=$(rpc tools/call "{\"name\":\"$1\",\"arguments\":$2}")
	for _ in $(seq 1 24); do # get_pending_result waits up to ~25 s: 10 minutes in all
		wait=$(grep -o 'status=pending wait=w_[a-z0-9]*' <<<"$r" | head -n1 | sed 's/.*wait=//' || true)
		[ -n "$wait" ] || break
		if [ -z "$said" ] && grep -q 'waiting for the account owner' <<<"$r"; then
			echo "   $1 $(sed -n 's/.*\(is waiting for the account owner to .*\)\. Tell the user.*/\1/p' <<<"$r" | head -n1)" >&2
			echo "   approve it on the dashboard (Approvals), or: $BIN/proxyd owner pending; $BIN/proxyd owner approve apr_..." >&2
			said=1
		fi
		r=$(rpc tools/call "{\"name\":\"get_pending_result\",\"arguments\":{\"session\":\"$h\",\"wait\":\"$wait\"}}")
	done
	if grep -q '"isError":true' <<<"$r"; then
		echo "first-checkout: $1 failed: $(grep -o 'status=error[^"]*' <<<"$r" | head -n1)" >&2
		exit 1
	fi
	printf '%s' "$r"
}
# text R: the first line of a tool result's text.
text() { grep -o '"text":"\([^"\\]\|\\.\)*"' <<<"$1" | head -n1 | sed 's/^"text":"//; s/"$//; s/\\n.*//; s/\\"/"/g'; }

echo "MCP endpoint $MCP, test shop $SHOP"
rpc initialize '{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"first-checkout","version":"0"}}' >/dev/null
curl -sS -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-H "Mcp-Session-Id: $sid" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$MCP"
h=""
r=$(tool get_token_catalog "{\"url\":\"$SHOP\"}")
num=$(grep -o 'av_card_1_number_[a-z0-9]*' <<<"$r" | head -n1)
cvc=$(grep -o 'av_card_1_cvv_[a-z0-9]*' <<<"$r" | head -n1)
h=$(grep -o 'session: s_[a-z2-7]*' <<<"$r" | head -n1 | cut -d' ' -f2)
[ -n "$num" ] && [ -n "$cvc" ] && [ -n "$h" ] || { echo "first-checkout: no card in the catalog (add one: README)" >&2; exit 1; }
echo "1. get_token_catalog: the agent sees $num and $cvc, never the number"
tool open_page "{\"session\":\"$h\",\"url\":\"$SHOP\"}" >/dev/null
echo "2. open_page: the checkout, in Chromium behind proxyd"
echo "3. fill_checkout: the page gets stand-ins; proxyd swaps in the real values on the wire, to shop.test only"
r=$(tool fill_checkout "{\"session\":\"$h\",\"fields\":[{\"selector\":\"#exp-month\",\"value\":\"12\"},{\"selector\":\"#exp-year\",\"value\":\"2031\"},{\"selector\":\"#card\",\"value\":\"$num\"},{\"selector\":\"#cvc\",\"value\":\"$cvc\"}]}")
echo "   $(text "$r")"
tool click "{\"session\":\"$h\",\"selector\":\"#pay\"}" >/dev/null
r=$(tool get_session_outcome "{\"session\":\"$h\",\"successSelector\":\"#ok\",\"confirmsCheckout\":true,\"submitSelector\":\"#pay\"}")
echo "4. click, get_session_outcome: $(text "$r")"
tool close_session "{\"session\":\"$h\"}" >/dev/null
echo "done: the shop's log of what it received is $DATA/testshop/received.log"
