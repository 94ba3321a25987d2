#!/bin/bash
# tests/mutate.sh - the mutation suite (`make mutate`): puts each realistic
# one-line bug listed in tests/mutations/*.txt into a scratch copy of the
# source tree, rebuilds it and runs the tests the entry names, which must
# fail.  A mutation that every listed test passes is a bug `make check`
# would let through: the run names it and exits 1.  tests/mutations/README
# describes the list's format.
#
# The scratch copy holds the files of the working tree that git knows of:
# `git ls-files --cached --others --exclude-standard`, i.e. HEAD plus any
# uncommitted change and any new file that .gitignore does not exclude (so
# an entry you are writing is tried before you commit it).  It is configured
# with the flags of the tree `make mutate` runs in (config.status), or with
# --enable-werror when there is none, built once, and then rebuilt
# incrementally (make -j2) after each mutation and again after each revert.
# The source tree itself is never written to.
#
# Environment: MUTATIONS="id1 id2" runs only those entries; SD_TIMEOUT_SCALE
# (default 3, as for every test) multiplies the time limit put on each
# test (100 s x scale; a run of N tests gets N times that) and on each build
# (200 s x scale), and is passed on to the tests; MUTATE_KEEP=1 leaves the scratch tree in place (its path is
# printed) instead of removing it.
#
# Exit status: 0 when every mutation run was caught; 1 when one or more got
# through; 2 when the list is broken (a `from` pattern that does not occur
# exactly once in its file, an unknown id or test name, a missing field) or
# the scratch tree does not build or does not pass the listed tests before
# any mutation.
set -u
# The builds and test runs below are make's own, at -j2, whatever make
# started this script.
unset MAKEFLAGS MFLAGS MAKELEVEL

srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${top_builddir:-$srcdir}
srcdir=$(cd "$srcdir" && pwd)
builddir=$(cd "$builddir" && pwd)
scale=${SD_TIMEOUT_SCALE:-3}
case $scale in ''|*[!0-9]*|0) echo "mutate: SD_TIMEOUT_SCALE must be a positive integer, not '$scale'" >&2; exit 2;; esac
export SD_TIMEOUT_SCALE=$scale
test_limit=$((100 * scale))
build_limit=$((200 * scale))
PY=${PYTHON:-python3}
t_start=$(date +%s)

die() { echo "mutate: $*" >&2; exit 2; }

git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1 ||
	die "$srcdir is not a git checkout: the scratch copy is made from the files git knows of (run it from a clone)"

# The list, checked and flattened: one record per entry, fields separated by
# ASCII unit separators (the patterns may hold any printable character).
# The same helper applies a mutation (exactly one occurrence, or it refuses).
helper=$(mktemp "${TMPDIR:-/tmp}/spotdeck-mutate-helper.XXXXXX") || die "mktemp failed"
cat >"$helper" <<'PY'
import glob, os, sys

FIELDS = ("id", "file", "from", "to", "tests", "why", "slow")
REQUIRED = ("id", "file", "from", "to", "tests", "why")


def parse(list_dir):
    """Every entry of every tests/mutations/*.txt, in file order."""
    entries, errors = [], []
    for path in sorted(glob.glob(os.path.join(list_dir, "*.txt"))):
        name = os.path.relpath(path, os.path.dirname(os.path.dirname(list_dir)))
        cur, start = None, 0
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines + [""], 1):
            if line.startswith("#"):
                continue
            if not line.strip():
                if cur is not None:
                    cur["where"] = "%s:%d" % (name, start)
                    entries.append(cur)
                cur = None
                continue
            key, sep, value = line.partition(":")
            if not sep or key not in FIELDS:
                errors.append("%s:%d: expected 'FIELD: value' with FIELD one of %s"
                              % (name, n, ", ".join(FIELDS)))
                continue
            # One space after the colon separates; the rest is literal
            # (leading spaces of a pattern count, trailing ones do not).
            if value.startswith(" "):
                value = value[1:]
            value = value.rstrip()
            if cur is None:
                cur, start = {}, n
            if key in cur:
                errors.append("%s:%d: field '%s' given twice in one entry" % (name, n, key))
            cur[key] = value
    seen = {}
    for e in entries:
        for k in REQUIRED:
            if not e.get(k):
                errors.append("%s: entry %s has no '%s'" % (e["where"], e.get("id", "?"), k))
        if e.get("id") in seen:
            errors.append("%s: id %s already used at %s" % (e["where"], e["id"], seen[e["id"]]))
        seen.setdefault(e.get("id"), e["where"])
        if e.get("from") == e.get("to"):
            errors.append("%s: %s: 'to' is the same as 'from'" % (e["where"], e.get("id")))
    return entries, errors


def check(list_dir, root, wanted, known_tests):
    entries, errors = parse(list_dir)
    known = set(known_tests.split())
    ids = [e.get("id") for e in entries]
    if wanted.split():
        for w in wanted.split():
            if w not in ids:
                errors.append("MUTATIONS names %s, which no tests/mutations/*.txt entry has" % w)
        entries = [e for e in entries if e.get("id") in wanted.split()]
    for e in entries:
        if not all(e.get(k) for k in REQUIRED):
            continue
        path = os.path.join(root, e["file"])
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            errors.append("%s: %s: cannot read %s: %s" % (e["where"], e["id"], e["file"], err.strerror))
            continue
        n = text.count(e["from"])
        if n != 1:
            errors.append("%s: %s: stale pattern: 'from' occurs %d times in %s (must be exactly once): %s"
                          % (e["where"], e["id"], n, e["file"], e["from"]))
        for t in e["tests"].split():
            if t not in known:
                errors.append("%s: %s: test %s is not in the Makefile's TESTS" % (e["where"], e["id"], t))
    for err in errors:
        print("mutate: " + err, file=sys.stderr)
    if errors:
        sys.exit(2)
    for e in entries:
        print("\x1f".join([e["id"], e["file"], e["tests"], e.get("slow", ""), e["why"]]))


def apply(list_dir, root, ident):
    entries, _ = parse(list_dir)
    e = [x for x in entries if x.get("id") == ident][0]
    path = os.path.join(root, e["file"])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(e["from"]) != 1:
        sys.exit("mutate: %s: 'from' no longer occurs exactly once in %s" % (ident, e["file"]))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(e["from"], e["to"], 1))


if sys.argv[1] == "check":
    check(*sys.argv[2:6])
else:
    apply(*sys.argv[2:5])
PY

scratch=$(mktemp -d "${TMPDIR:-/tmp}/spotdeck-mutate.XXXXXX") || die "mktemp failed"
cleanup() {
	rm -f "$helper"
	if [ "${MUTATE_KEEP:-0}" = 1 ]; then
		echo "mutate: scratch tree kept in $scratch"
	else
		rm -rf "$scratch"
	fi
}
# limited SECONDS CMD...: CMD under a time limit, in the background so that
# an interrupt of this script can end it (timeout puts it in a process group
# of its own, which a ^C at the terminal does not reach).
cur=""
limited() {
	timeout "$@" &
	cur=$!
	wait "$cur"
	local rc=$?
	cur=""
	return $rc
}
interrupted() {
	[ -n "$cur" ] && kill -TERM "$cur" 2>/dev/null && wait "$cur"
	exit 130
}
trap cleanup EXIT
trap interrupted INT TERM

# The configure flags of the tree we were started from, if it is configured.
if [ -f "$builddir/config.status" ]; then
	conf_flags=$("$builddir/config.status" --config)
else
	conf_flags="'--enable-werror'"
fi

echo "mutate: copying the working tree's git files to $scratch"
(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | (cd "$scratch" && tar -xf -) || die "copying the source tree failed"

# The list as it was copied: editing tests/mutations/ during a run changes
# nothing in it.
list_dir="$scratch/tests/mutations"
[ -d "$list_dir" ] || die "no tests/mutations/ among the tree's git files"

echo "mutate: configuring ($conf_flags) and building once"
t0=$(date +%s)
{ (cd "$scratch" && ./autogen.sh && eval "./configure $conf_flags") &&
	limited "$build_limit" make -C "$scratch" -j2 && limited "$build_limit" make -C "$scratch" -j2 check TESTS=; } \
	>"$scratch/mutate-build.log" 2>&1 ||
	{ tail -30 "$scratch/mutate-build.log" >&2; die "the unmutated scratch tree does not build (log above)"; }
echo "mutate: built in $(($(date +%s) - t0)) s"

known_tests=$(cd "$scratch" && printf 'print-tests:\n\t@echo $(TESTS)\n' | make -s -f Makefile -f - print-tests) ||
	die "cannot read TESTS from the scratch tree's Makefile"
records=$("$PY" "$helper" check "$list_dir" "$scratch" "${MUTATIONS:-}" "$known_tests") || exit 2
[ -n "$records" ] || die "no mutations in $list_dir"
total=$(printf '%s\n' "$records" | wc -l)

# build_for TESTS...: the incremental build a mutation needs: the programs
# (make -j2), then the C test programs among TESTS, or every check program
# when a shell test is among them (those run helper programs of their own).
build_for() {
	local t progs="" all_checks=0
	for t in "$@"; do
		case $t in *.sh) all_checks=1;; *) progs="$progs $t";; esac
	done
	limited "$build_limit" make -C "$scratch" -j2 || return 1
	if [ $all_checks = 1 ]; then
		limited "$build_limit" make -C "$scratch" -j2 check TESTS=
	else
		limited "$build_limit" make -C "$scratch" -j2 $progs
	fi
}

# run_tests TESTS...: make check on just those; sets $failed to the ones that
# failed (FAIL, ERROR, or no result: the time limit killed the run) and
# $skipped to those that skipped, and returns 0 when none failed.  A skip is
# not a catch: the test did not look.  It sets variables rather than
# printing so that it runs in this shell, where an interrupt can end it.
run_tests() {
	local rc t res
	failed="" skipped=""
	# The harness names a test's results after it less its .sh extension
	# (TEST_EXTENSIONS), as make check does.
	for t in "$@"; do rm -f "$scratch/${t%.sh}.log" "$scratch/${t%.sh}.trs"; done
	# check-TESTS is make check's test run without its rebuild of every
	# check program: build_for built what these tests need.
	limited $((test_limit * $#)) make -C "$scratch" -j2 check-TESTS check_PROGRAMS= TESTS="$*" \
		>"$scratch/mutate-test.log" 2>&1
	rc=$?
	for t in "$@"; do
		res=$(sed -n 's/^:test-result: //p' "$scratch/${t%.sh}.trs" 2>/dev/null | head -1)
		case $res in
		PASS) ;;
		SKIP) skipped="$skipped $t";;
		'') failed="$failed $t(no result$([ $rc = 124 ] && echo ", killed after $((test_limit * $#)) s"))";;
		*) failed="$failed $t($res)";;
		esac
	done
	failed=${failed# } skipped=${skipped# }
	[ -z "$failed" ]
}

# Before any mutation, the listed tests must pass (and not skip): a test that
# fails or skips on this machine would make every mutation look caught or
# missed for the wrong reason.
all_tests=$(printf '%s\n' "$records" | cut -d$'\x1f' -f3 | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "mutate: baseline: the $(echo $all_tests | wc -w) listed tests on the unmutated tree"
t0=$(date +%s)
run_tests $all_tests && [ -z "$skipped" ] || {
	tail -40 "$scratch/mutate-test.log" >&2
	die "before any mutation these tests do not pass: ${failed}${skipped:+ skipped: $skipped}"
}
echo "mutate: baseline passed in $(($(date +%s) - t0)) s; $total mutations, a limit of ${test_limit} s per test (SD_TIMEOUT_SCALE=$scale)"

results=() missed=() missed_why=() caught=0 hung=0 i=0
while IFS=$'\x1f' read -r -u 3 id file tests slow why; do
	i=$((i + 1))
	t0=$(date +%s)
	cp -p "$scratch/$file" "$scratch/mutate-orig" || die "cannot save $file"
	"$PY" "$helper" apply "$list_dir" "$scratch" "$id" || exit 2
	if ! build_for $tests >"$scratch/mutate-build.log" 2>&1; then
		verdict="caught (build)"
		caught=$((caught + 1))
	elif run_tests $tests; then
		verdict="MISSED (passed: $tests${skipped:+; skipped: $skipped})"
		missed+=("$id")
		missed_why+=("  $id ($file): $why")
	else
		verdict="caught by $failed"
		caught=$((caught + 1))
		# A run the time limit killed is a catch (make check would never
		# end), but a weaker one than an assertion: counted apart below.
		case $failed in *"no result"*) hung=$((hung + 1));; esac
	fi
	# Restore with a fresh time stamp so that make rebuilds what the
	# mutation touched before the next one.
	cp "$scratch/mutate-orig" "$scratch/$file" && touch "$scratch/$file" || die "cannot restore $file"
	line=$(printf '%-28s %-38s %4ds  %s' "$id" "$file" $(($(date +%s) - t0)) "$verdict")
	[ -n "$slow" ] && line="$line  [slow: $slow]"
	echo "[$i/$total] $line"
	results+=("$line")
done 3<<<"$records"

# Leave the tree as it was: rebuild once more so a kept scratch tree is the
# unmutated product.
limited "$build_limit" make -C "$scratch" -j2 >"$scratch/mutate-build.log" 2>&1 ||
	echo "mutate: warning: the restored scratch tree did not rebuild" >&2

echo
echo "mutation results:"
printf '  %s\n' "${results[@]}"
if [ ${#missed[@]} -gt 0 ]; then
	echo "missed (bugs that the listed tests let through):"
	printf '%s\n' "${missed_why[@]}"
fi
hung_note=""
[ $hung -gt 0 ] && hung_note=" ($hung of them only by a test that hung or gave no result)"
echo "${caught} caught${hung_note}, ${#missed[@]} missed${missed:+: ${missed[*]}}"
echo "total time $(($(date +%s) - t_start)) s"
[ ${#missed[@]} -eq 0 ]
