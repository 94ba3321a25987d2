#!/bin/sh
# tests/app/test-subcommands.sh - `spotdeck SUBCOMMAND` goes through one table
# (src/app/subcommands.c): every subcommand --help lists runs, answers its
# own --help with its usage line, and is in spotdeck(1); a word that names
# no subcommand is the run's own argument (refused as one), and a name is
# matched whole ("lsx" is no "ls").
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
SPOTDECK="$top_builddir/spotdeck"
MAN="${top_srcdir:-$(dirname "$0")/../..}/man/spotdeck.1"

"$SPOTDECK" --help >"$T/help" || fail "spotdeck --help exited $?"
# The run's own lines start with an option or "[": the rest are subcommands.
names=$(sed -n 's/^       spotdeck \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' "$T/help")
n=$(echo $names | wc -w)
[ "$n" -ge 6 ] || fail "spotdeck --help lists $n subcommands ($names), expected attach, ls, kill, plan, doctor, export at least"
for s in $names; do
	timeout 10 "$SPOTDECK" "$s" --help >"$T/out" 2>&1 || fail "spotdeck $s --help exited $?: $(head -c 300 "$T/out")"
	grep -q "^usage: spotdeck $s\b" "$T/out" || fail "spotdeck $s --help does not start with its usage: $(head -1 "$T/out")"
	grep -q "spotdeck $s\b" "$MAN" || fail "man/spotdeck.1 does not name 'spotdeck $s'"
done
ok "--help lists $n subcommands ($(echo $names)); each answers its --help and is in spotdeck(1)"

EXPECT_RC=2 expect_error "a word that is no subcommand, one letter from one" \
	"spotdeck: 'lsx' is not a subcommand; did you mean 'spotdeck ls'\? \(subcommands: attach, ls, kill, plan, doctor, export\)" \
	"$SPOTDECK" lsx
EXPECT_RC=2 expect_error "a subcommand's name with more after it" "spotdeck: unexpected argument 'attachment' \(see --help\)" \
	"$SPOTDECK" attachment
