#!/bin/sh
# tests/test-function-length.sh - no function in src/, ui/ or engine/ is
# longer than 120 lines from its "{" to its "}" (tests/function-length.awk
# finds them in our style: STYLE.md), except those
# tests/function-length-allow.txt lists with their length and reason; a
# listed one that grew, or that is no longer long, fails too, so the list
# only shrinks.  The awk script is first run on two made-up functions of
# 120 and 121 lines and must report the second alone, so this test cannot
# pass by finding nothing.
top=${top_srcdir:-$(dirname "$0")/..}
max=120
awk_script=$top/tests/function-length.awk
allow=$top/tests/function-length-allow.txt
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The check itself: a body of 118 lines between "{" and "}" is 120 lines.
{
	printf 'static int fits(int a,\n               int b)\n{\n'
	i=0; while [ $i -lt 118 ]; do printf '\ta += b;\n'; i=$((i + 1)); done
	printf '}\n\nint too_long(void)\n{\n'
	i=0; while [ $i -lt 119 ]; do printf '\tx++;\n'; i=$((i + 1)); done
	printf '}\n'
} > "$tmp/made-up.c"
got=$(awk -v max=$max -f "$awk_script" "$tmp/made-up.c")
if [ "$got" != "$tmp/made-up.c:too_long 121" ]; then
	echo "FAIL: on the made-up file the check reported '$got', expected only too_long at 121 lines" >&2
	exit 1
fi

cd "$top" || exit 1
files=$(find src ui engine \( -name '*.c' -o -name '*.cc' -o -name '*.cu' -o -name '*.h' \) -type f | sort)
awk -v max=$max -f "$awk_script" $files | sort > "$tmp/long"
grep -v '^#' "$allow" | awk 'NF >= 2 { print $1, $2 }' | sort > "$tmp/allowed"
rc=0
while read -r fn n; do
	listed=$(awk -v f="$fn" '$1 == f { print $2 }' "$tmp/allowed")
	if [ -z "$listed" ]; then
		echo "FAIL: $fn is $n lines long (the limit is $max): split it" >&2
		rc=1
	elif [ "$n" -gt "$listed" ]; then
		echo "FAIL: $fn grew to $n lines (tests/function-length-allow.txt says $listed): split it" >&2
		rc=1
	fi
done < "$tmp/long"
while read -r fn n; do
	if ! awk -v f="$fn" '$1 == f { found = 1 } END { exit !found }' "$tmp/long"; then
		echo "FAIL: $fn is no longer over $max lines: drop it from tests/function-length-allow.txt" >&2
		rc=1
	fi
done < "$tmp/allowed"
[ $rc -eq 0 ] && echo "ok: $(echo $files | wc -w) files, $(wc -l < "$tmp/long") functions over $max lines, all listed"
exit $rc
