#!/bin/sh
# `spotdeck plan`: bad input gets one error line and exit 1 (2 for usage);
# the table and --json agree with each other and with the planner's rules
# (sorted by median cost, the frontier marked, speed-up 1 for one on-demand
# server, no saving for on-demand rows); the same --seed gives the same
# bytes; a job file sets the work; --progress reports on stderr.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
SPOTDECK="$top_builddir/spotdeck"
PLAN="$SPOTDECK plan --runs 200"

expect_error "unknown GPU" "^spotdeck plan: --gpus: no offer of GPU 'x100' in .*gce-2019\.json \(it sells K80, P100, V100\)$" \
	$PLAN --gpus k80,x100
expect_error "cluster size 0" "^spotdeck plan: --sizes: '0': a cluster size is a whole number of servers from 1 to 256$" \
	$PLAN --sizes 1,0
expect_error "cluster size not a number" "^spotdeck plan: --sizes: 'four'" $PLAN --sizes four
expect_error "empty list item" "^spotdeck plan: --sizes: '1,,2': expected cluster sizes" $PLAN --sizes 1,,2
expect_error "deadline that does not parse" "^spotdeck plan: --deadline: cannot read 'tomorrow' as a duration" \
	$PLAN --deadline tomorrow
expect_error "deadline with a bad unit" "^spotdeck plan: --deadline: cannot read '2y' as a duration" $PLAN --deadline 2y
expect_error "negative budget" "^spotdeck plan: --budget: '-5': expected a positive amount" $PLAN --budget -5
expect_error "no runs" "^spotdeck plan: --runs: '0': expected 1 to 10000000 runs" $PLAN --runs 0
expect_error "unknown zone" "^spotdeck plan: --zones: no offer in zone 'mars-1a'" $PLAN --zones mars-1a
expect_error "missing catalog" "^spotdeck plan: --catalog: $T/none\.json: no such file" $PLAN --catalog "$T/none.json"
printf '{"format": "spotdeck-scaling", "version": 1, "series": [{"model": "resnet32"}]}' >"$T/scaling.json"
expect_error "bad scaling file" "^spotdeck plan: $T/scaling\.json: series\[0\]\.gpu: expected a non-empty string" \
	$PLAN --scaling "$T/scaling.json"
printf '{"model": "resnet32", "epochs": -1}' >"$T/job.json"
expect_error "bad job file" "job\.json: epochs: expected a positive integer" $PLAN --job "$T/job.json"
EXPECT_RC=2 expect_error "unknown option" "^spotdeck plan: unknown option or missing value: '--colour'" $PLAN --colour k80

# The table: two GPU sizes, both kinds; a deadline column; the frontier marked.
$PLAN --gpus k80 --sizes 1,8 --seed 4 --deadline 1h >"$T/table" 2>"$T/err" || { cat "$T/err"; fail "plan"; }
[ ! -s "$T/err" ] || { cat "$T/err"; fail "a quick plan wrote to stderr"; }
for row in "8x K80 spot" "1x K80 spot" "8x K80 on-demand" "1x K80 on-demand"; do
	grep -q "^[ *] $row " "$T/table" || { cat "$T/table"; fail "table lacks '$row'"; }
done
grep -q "P(<1h00m)" "$T/table" || { cat "$T/table"; fail "no deadline column"; }
grep -q '^\* ' "$T/table" || { cat "$T/table"; fail "no row on the frontier"; }
grep -q "simulated" "$T/table" || fail "the table does not say its figures are simulated"
ok "table: $(grep -c '^[ *] [0-9]*x ' "$T/table") rows"

# JSON: the same plan; check the planner's rules on it.
$PLAN --gpus k80 --sizes 1,8 --seed 4 --deadline 1h --json >"$T/a.json" || fail "plan --json"
python3 - "$T/a.json" "$T/table" <<'PY' || fail "JSON checks"
import json, math, sys
doc = json.load(open(sys.argv[1]))
rows = doc["configurations"]
assert doc["type"] == "plan" and doc["simulated"] is True and doc["runs"] == 200, doc
assert len(rows) == 4, [r["label"] for r in rows]
med = [r["cost_usd"]["median"] for r in rows]
assert med == sorted(med), "not sorted by median cost: %s" % med
for r in rows:
    dominated = any(o is not r and o["time_s"]["median"] <= r["time_s"]["median"]
                    and o["cost_usd"]["median"] <= r["cost_usd"]["median"]
                    and (o["time_s"]["median"] < r["time_s"]["median"] or o["cost_usd"]["median"] < r["cost_usd"]["median"])
                    for o in rows)
    assert r["pareto"] == (not dominated), (r["label"], r["pareto"], dominated)
    assert 0 <= r["p_deadline"] <= 1, r
    assert r["time_s"]["p10"] <= r["time_s"]["median"] <= r["time_s"]["p90"], r
    if not r["transient"]:
        assert r["saving"] == 0 and r["revocations_mean"] == 0, r
    else:
        assert r["saving"] > 0.5, r
    if r["label"] == "1x K80 on-demand":
        assert r["speedup"] == 1, r
    if r["label"] == "8x K80 on-demand":
        assert 7 < r["speedup"] < 8, r
# The table shows the same rows in the same order, with the same marks.
table = [l for l in open(sys.argv[2]) if l[:1] in " *" and "x K80" in l]
assert [l[2:].split("  ")[0].strip() for l in table] == [r["label"] for r in rows], table
assert [l[0] == "*" for l in table] == [r["pareto"] for r in rows], table
print("ok: JSON: %s" % ", ".join("%s %s%s" % (r["label"], round(r["cost_usd"]["median"], 3), "*" if r["pareto"] else "") for r in rows))
PY

# Determinism: the same seed, the same bytes; another seed, other numbers.
$PLAN --gpus k80 --sizes 1,8 --seed 4 --deadline 1h --json >"$T/b.json"
cmp -s "$T/a.json" "$T/b.json" || fail "the same --seed gave different output"
$PLAN --gpus k80 --sizes 1,8 --seed 5 --deadline 1h --json >"$T/c.json"
! cmp -s "$T/a.json" "$T/c.json" || fail "another --seed gave the same output"
ok "same seed, same JSON; another seed, another"

# A job file sets the work: resnet20 on CIFAR-10, 2 epochs of 390 steps of
# 128, and runs faster than ResNet-32 (fewer FLOPs per image).
printf '{"model": "resnet20", "dataset": "cifar10", "epochs": 2, "global_batch": 128}' >"$T/r20.json"
$PLAN --job "$T/r20.json" --gpus k80 --sizes 1 --on-demand --json >"$T/r20.out" || fail "plan --job"
python3 - "$T/r20.out" <<'PY' || fail "job file"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["images"] == 2 * 390 * 128, doc["images"]
assert 1.3 < doc["speed_factor"] < 2, doc["speed_factor"]
print("ok: job file: %d images, %.2fx the ResNet-32 speed" % (doc["images"], doc["speed_factor"]))
PY
$PLAN --steps 1000 --gpus v100 --sizes 1 --on-demand --json | grep -q '"images":128000,' || fail "--steps 1000"
# The table's header says what is planned: not the seeds' job any more.
$PLAN --steps 1000 --gpus v100 --sizes 1 --on-demand | head -n 1 >"$T/h"
grep -q "(ResNet-32 on CIFAR-10, 1000 steps of 128)" "$T/h" || { cat "$T/h"; fail "--steps 1000: header"; }
ok "--steps 1000: 128000 images; header: $(cat "$T/h")"
$PLAN --gpus "k80, v100" --sizes 1 --on-demand --runs 50 >"$T/h2" || fail "--gpus with a space after the comma"
head -n 1 "$T/h2" | grep -q "64,000 steps of 128: the seeds' job" || { head -n 1 "$T/h2"; fail "default header"; }
grep -q "1x V100 on-demand" "$T/h2" || fail "--gpus 'k80, v100': no V100 row"
ok "without --steps: the seeds' job; --gpus 'k80, v100' plans both"

# Progress on stderr when asked (by default only after the first second).
$PLAN --gpus k80 --sizes 2 --spot --progress >"$T/out" 2>"$T/err" || fail "--progress"
grep -Eq "^spotdeck plan: 600 of 600 simulated runs \(100 %\)$" "$T/err" || { cat "$T/err"; fail "no progress"; }
ok "--progress: $(tail -n 1 "$T/err")"

# Policies: --policy autopilot needs a goal, --replace does not take it, a
# bad objective is one line naming the field; the JSON names each row's
# policy; the autopilot row beats one K80 spot server's time on a deadline
# that server misses (it adds servers).
expect_error "autopilot without a goal" "^spotdeck plan: --policy autopilot: needs --deadline, --budget or --autopilot$" \
	$PLAN --policy autopilot
expect_error "autopilot under its old name" "^spotdeck plan: --replace: 'autopilot': expected none, same, cheapest or other-zone" \
	$PLAN --replace autopilot
expect_error "unknown policy" "^spotdeck plan: --policy: 'smart': expected none, same, cheapest, other-zone or autopilot$" \
	$PLAN --policy smart
expect_error "bad objective" "^spotdeck plan: --autopilot: autopilot\.max_servers: expected an integer from 1 to 256" \
	$PLAN --policy autopilot --autopilot '{"deadline": "2h", "max_servers": 0}'
expect_error "objective without the autopilot" "^spotdeck plan: --autopilot: only with --policy autopilot$" \
	$PLAN --autopilot '{"deadline": "2h"}'
expect_error "two different deadlines" \
	"^spotdeck plan: --deadline \(7200 s\) and --autopilot's deadline \(21600 s\) differ: give it once$" \
	$PLAN --policy autopilot --deadline 2h --autopilot '{"deadline": "6h"}'
$PLAN --gpus k80 --sizes 1 --spot --deadline 2h --policy autopilot --json >"$T/ap.json" || fail "--policy autopilot"
$PLAN --gpus k80 --sizes 1 --spot --deadline 2h --replace same --json >"$T/same.json" || fail "--replace same"
python3 - "$T/ap.json" "$T/same.json" <<'PY' || fail "policy JSON checks"
import json, sys
ap = json.load(open(sys.argv[1]))["configurations"]
same = json.load(open(sys.argv[2]))["configurations"]
assert [r["policy"] for r in ap] == ["autopilot"], [r["policy"] for r in ap]
assert [r["policy"] for r in same] == ["same"] and same[0]["replace"] == "same", same[0]
a, s = ap[0], same[0]
# One K80 takes about 4 h: alone it misses 2 h; the autopilot adds servers.
assert s["p_deadline"] < 0.05, s["p_deadline"]
assert a["p_deadline"] >= 0.95 and a["time_s"]["median"] < 2 * 3600, (a["p_deadline"], a["time_s"])
print("ok: policies: same P(2h) %.2f, autopilot P(2h) %.2f at $%.2f mean" % (s["p_deadline"], a["p_deadline"], a["cost_usd"]["mean"]))
PY
$PLAN --gpus k80 --sizes 1 --spot --policy autopilot --autopilot '{"deadline": "2h", "max_servers": 2}' >"$T/ap2" ||
	fail "--autopilot with a server limit"
grep -q "policy autopilot" "$T/ap2" || { cat "$T/ap2"; fail "the header does not name the policy"; }
grep -q "P(<2h00m)" "$T/ap2" || { cat "$T/ap2"; fail "the objective's deadline is not the table's"; }
ok "--policy autopilot: $(grep 'K80 spot' "$T/ap2" | tr -s ' ')"

# The sim market's knobs and a measured speed: a hazard 30 times the
# market's revokes more, boots scaled down shorten the run, and a speed
# factor of 2 halves the training time.
expect_error "bad hazard scale" "^spotdeck plan: --hazard-scale: '0': expected a positive number$" \
	$PLAN --hazard-scale 0
for k in "" "--hazard-scale 30" "--speed-factor 2" "--boot-scale 0.03"; do
	# shellcheck disable=SC2086 # the knob and its value are two words
	$PLAN --gpus k80 --sizes 4 --spot --runs 400 --replace same --json $k >"$T/knob${k:+-${k#--}}.json" ||
		fail "plan $k"
done
python3 - "$T" <<'PY' || fail "sim knobs"
import json, sys
d = sys.argv[1]
r = {k: json.load(open("%s/knob%s.json" % (d, k)))["configurations"][0]
     for k in ("", "-hazard-scale 30", "-speed-factor 2", "-boot-scale 0.03")}
base, hz, sp, bt = r[""], r["-hazard-scale 30"], r["-speed-factor 2"], r["-boot-scale 0.03"]
assert hz["revocations_mean"] > 3 * base["revocations_mean"], (hz["revocations_mean"], base["revocations_mean"])
t0, t2 = base["time_s"]["median"], sp["time_s"]["median"]
assert 0.45 < t2 / t0 < 0.6, (t0, t2)
assert bt["time_s"]["median"] < t0 - 30, (bt["time_s"]["median"], t0)
print("ok: revocations a run %.2f -> %.2f at hazard 30; median %.0f s -> %.0f s at speed 2, %.0f s with boots x0.03"
      % (base["revocations_mean"], hz["revocations_mean"], t0, t2, bt["time_s"]["median"]))
PY

# A job spotdeck would refuse before it starts is not planned either: the
# same one line, naming the job file.
printf '{"model": "cnn", "dataset": "tokens", "data_dir": "%s", "block_size": 16}\n' "$T" >"$T/lm.json"
expect_error "an image model with token data" \
	"^spotdeck plan: $T/lm.json: model: cnn is an image model; dataset tokens needs a language model" \
	$PLAN --job "$T/lm.json"
