#!/bin/sh
# tests/app/test-ui-billing.sh - what the cockpit says servers cost, on the
# real spotdeck in tmux at 120x40: a transient K80, an
# on-demand P100 (whose price the catalog only estimates) and a local
# worker train together, and the scripted market
# (tests/ui-e2e/billing-trace.jsonl) raises the K80 offer's price after the
# K80 was acquired.  Then, with every figure taken from the run's journal:
#   the market pane shows the K80 offer at its new price, while the K80's
#     row in the cluster pane keeps the rate it was acquired (and is billed)
#     at;
#   the P100's row shows its rate with the '*' of an estimated price, and
#     the pane's footer says what '*' means;
#   the local worker's row has no type and no price: "-" for type, $/h and
#     $ so far, not "od" and 0.00;
#   the header's totals add the billed rates, with '*' for the estimated
#     part and "+?" for the local server's unknown cost;
#   the market pane marks with '*' the $/h and $/Mimg of exactly the offers
#     whose catalog price_source says "estimated" (the P100 and V100
#     on-demand ones), not the measured ones, marks every speed '~' (the
#     catalog's ResNet-32 figures scaled to this job's mlp by FLOPs), and
#     its footer says what both marks mean.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

# journal_py CODE: runs CODE with `ev` (the journal's events) and `cents`
# (a rate as the panes print it) defined; prints what CODE prints.
journal_py() {
	python3 - "$RUN/journal.jsonl" "$1" <<-'PY'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
	acq = {e["server"]: e for e in ev if e["type"] == "acquired"}
	def cents(x):
	    return "%.2f" % x
	exec(sys.argv[2])
	PY
}

# row SERVER: the fields of SERVER's row in the cluster pane on screen now,
# as "ID ZONE GPU TYPE ... RATE SO_FAR"; row_field SERVER N|last|prev.
row() {
	tmux_capture >/dev/null
	$CHECK pane "$T/screen" "Cluster (" | awk -v s="$1" '$1 == s'
}
row_field() {
	row "$1" | awk -v n="$2" '{ print (n == "last" ? $NF : n == "prev" ? $(NF - 1) : $n) }'
}

tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/billing-job.json --run-dir $RUN --trace $E2E/billing-trace.jsonl"
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

# The three servers, by what the journal says they are.
tmux_wait_file "$RUN/journal.jsonl" '"type":"price"' 30
k80=$(journal_py 'print(next(s for s, e in acq.items() if e["offer"] == "gce/us-west1-b/k80/spot"))')
p100=$(journal_py 'print(next(s for s, e in acq.items() if e["offer"] == "gce/us-west1-b/p100/on-demand"))')
loc=$(journal_py 'print(next(s for s, e in acq.items() if e["offer"] == "local"))')
k80_rate=$(journal_py "print(cents(acq['$k80']['usd_per_hour']))")
p100_rate=$(journal_py "print(cents(acq['$p100']['usd_per_hour']))")
new_rate=$(journal_py 'print(cents(next(e["usd_per_hour"] for e in ev if e["type"] == "price")))')
[ "$k80_rate" != "$new_rate" ] || fail "the trace's price $new_rate equals the K80's acquisition price"
for s in "$k80" "$p100" "$loc"; do
	tmux_wait_re "^│ $s .*training" 40
done
ok "servers: K80 $k80 acquired at \$$k80_rate/h, then its offer's price went to \$$new_rate/h; P100 on-demand $p100 at \$$p100_rate/h; local $loc"

# The market moved; the K80 is still billed at its acquisition price.
tmux_wait_re "gce/us-west1-b/k80/spot +$new_rate " 10
got=$(row_field "$k80" prev)
[ "$got" = "$k80_rate" ] || { row "$k80" >&2; fail "$k80's \$/h is '$got', expected the billed $k80_rate (market now $new_rate)"; }
ok "market pane: the K80 offer at $new_rate; $k80's row: $got, the rate it is billed at"

# An estimated price carries its '*', and the footer says so.
got=$(row_field "$p100" prev)
[ "$got" = "$p100_rate*" ] || { row "$p100" >&2; fail "$p100's \$/h is '$got', expected '$p100_rate*' (estimated)"; }
tmux_expect "* estimated price ─┘"
ok "$p100 (on-demand P100, estimated price): $got, footer explains '*'"

# A local server: no type, no price, no cost.
set -- $(row "$loc")
[ "$2 $3 $4" = "localhost CPU -" ] || { row "$loc" >&2; fail "$loc: zone/GPU/type '$2 $3 $4', expected 'localhost CPU -'"; }
got="$(row_field "$loc" prev) $(row_field "$loc" last)"
[ "$got" = "- -" ] || { row "$loc" >&2; fail "$loc: \$/h and \$ so far '$got', expected '- -'"; }
ok "$loc (local): type, \$/h and \$ so far all '-'"
# Its worker's precision: the job's default auto resolves to fp32 for the mlp
# (no convolution), and the cluster pane's prec column says so.
row "$loc" | grep -q ' fp32 ' || { row "$loc" >&2; fail "$loc: no 'fp32' in its prec column (the mlp's auto)"; }
ok "$loc: prec fp32 (auto, the mlp has no convolution)"

# The header adds the billed rates: estimated part '*', unknown part '+?'.
want_now=$(journal_py "print('\$' + cents(acq['$k80']['usd_per_hour'] + acq['$p100']['usd_per_hour']))")
tmux_expect "now $want_now*+?/h"
tmux_capture | grep -qE "spent \\\$[0-9]+\.[0-9][0-9]\*\+\?( |\$)" || { cat "$T/screen" >&2; fail "header: no 'spent \$N.NN*+?'"; }
ok "header: now $want_now*+?/h (billed K80 + estimated P100 + unknown local), $(grep -oE 'spent [^ ]+' "$T/screen")"

# The market pane: '*' on exactly the offers the catalog estimates.
cat_py() {
	python3 - "$top_srcdir/data/gce-2019.json" "$1" <<-'PY'
	import json, sys
	cat = json.load(open(sys.argv[1]))
	offers = [o for o in cat["offers"]]
	exec(sys.argv[2])
	PY
}
tmux_capture >/dev/null
$CHECK pane "$T/screen" "Market (" >"$T/market"
nest=0
nmeas=0
for id in $(cat_py 'print(" ".join(o["id"] for o in offers))'); do
	line=$(awk -v id="$id" '$1 == id' "$T/market")
	[ -n "$line" ] || continue
	est=$(cat_py "print(int(next(o for o in offers if o['id'] == '$id').get('price_source', '').startswith('estimated')))")
	set -- $line
	if [ "$est" = 1 ]; then
		case "$2 $3" in *[0-9]\**[0-9]\*) nest=$((nest + 1)) ;;
		*) fail "market pane: $id's price is estimated in the catalog, but its \$/h and \$/Mimg are '$2 $3' (no '*')" ;; esac
	else
		case "$2 $3" in *\**) fail "market pane: $id's price is measured, but its \$/h and \$/Mimg are '$2 $3'" ;; esac
		nmeas=$((nmeas + 1))
	fi
done
[ "$nest" -ge 4 ] && [ "$nmeas" -ge 4 ] || { cat "$T/market" >&2; fail "market pane: $nest estimated and $nmeas measured offers on screen, expected at least 4 of each"; }
# The job trains the mlp: the catalog's ResNet-32 speeds scaled by FLOPs,
# each marked '~', and the footer says both marks.
grep -q "~ img/s est\. from FLOPs, \* estimated price ─┘" "$T/screen" ||
	{ cat "$T/screen" >&2; fail "market pane: no footer '~ img/s est. from FLOPs, * estimated price'"; }
noest=$(awk '$1 ~ /^gce\// && $5 !~ /^~/' "$T/market" | head -1)
[ -z "$noest" ] || fail "market pane: an mlp speed without its '~': $noest"
ok "market pane: '*' on the $nest estimated offers' \$/h and \$/Mimg, none on the $nmeas measured ones; '~' on every speed; footer explains both"

quit_confirmed
exit 0
