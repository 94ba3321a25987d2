#!/bin/sh
# tests/test-packages.sh - packages/debian.txt holds everything the README's
# two commands need: every program that the tests, the
# build scripts and tools/install-deps.sh run is in a Debian package that
# the list names, that one of them depends on, or that a bare Debian 12
# (debootstrap minbase: the "required" packages and apt) has already.
# Before procps was listed, a fresh debian:12 failed two tests on pgrep and
# ps.  The programs are found by reading the scripts: the first word of
# each command (after |, ;, &&, ||, $(, `, if, then, do, !, and through
# env, exec, timeout N, command -v), shell builtins and heredoc bodies left
# out, kept when it names a program in /usr/bin, /bin, /usr/sbin or /sbin;
# in Python (a .py file or a #! line naming python), the literal first
# element of a subprocess argument list.  The
# full check (the README's commands in a pristine chroot) is
# ../shared/tools/fresh-debian.sh; this one runs in seconds on any Debian.
for t in dpkg-query apt-cache python3; do
	command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not found (not a Debian system)" >&2; exit 77; }
done
exec python3 - "${top_srcdir:-$(dirname "$0")/..}" <<'PY'
import glob, os, re, subprocess, sys

top = sys.argv[1]
BIN_DIRS = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
BUILTINS = set(""". : [ [[ alias bg break cd command continue echo eval exec exit export false fc fg
    getopts hash jobs kill local printf pwd read readonly return set shift test times trap true type
    ulimit umask unalias unset wait then do done else elif fi if while until for in case esac function
    time""".split())
SEPARATORS = re.compile(r"\|\||&&|[|;&`]|\$\(|\(|\)|\{|\}")


def is_script(path):
    if path.endswith((".sh", ".py")):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def shell_commands(text):
    """First words of the commands in a shell script (heuristic, see top)."""
    out = set()
    heredoc = None
    for line in text.splitlines():
        if heredoc:
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            heredoc = m.group(1)
            line = line[:m.start()]
        line = re.sub(r"(^|\s)#.*", "", line)            # comments
        line = re.sub(r"'[^']*'|\"[^\"]*\"", lambda q: " " + q.group(0).replace("|", " ").replace(";", " ") + " ", line)
        for seg in SEPARATORS.split(line):
            words = seg.split()
            while words:
                w = words[0]
                if w in ("env", "sudo", "nice", "nohup", "setsid", "timeout"):
                    out.add(w)           # a program too, that runs the next one
                if re.match(r"^\w+=", w) or w in ("!", "if", "then", "do", "else", "elif", "while", "until",
                                                  "exec", "env", "sudo", "nice", "nohup", "setsid"):
                    words = words[1:]
                elif w == "timeout":
                    words = [x for x in words[1:] if not x.startswith("-")][1:]
                elif w == "command" and len(words) > 1 and words[1] == "-v":
                    words = words[2:]
                else:
                    break
            if not words:
                continue
            w = words[0].strip("\"'")
            if re.match(r"^[A-Za-z][\w.+-]*$", w) and w not in BUILTINS:
                out.add(w)
    return out


def python_commands(text):
    return set(re.findall(r"subprocess\.\w+\(\s*\[\s*[\"']([\w.+-]+)[\"']", text))


def where(cmd):
    for d in BIN_DIRS:
        p = os.path.join(d, cmd)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def owners(cmds):
    """Package of each program, by one dpkg-query over every place it may
    be: /bin is /usr/bin on a merged-/usr system and dpkg knows one of
    them, and a program may be a link (alternatives: awk -> mawk)."""
    cands = {}
    for c in cmds:
        real = os.path.realpath(where(c))
        names = [c, os.path.basename(real)]
        cands[c] = [os.path.join(d, n) for n in names for d in BIN_DIRS]
    r = subprocess.run(["dpkg-query", "-S"] + sorted({p for v in cands.values() for p in v}),
                       capture_output=True, text=True)
    by_path = {}
    for l in r.stdout.splitlines():
        if l.startswith("diversion ") or ": " not in l:
            continue
        pkgs, path = l.split(": ", 1)
        by_path.setdefault(path.strip(), pkgs.split(",")[0].split(":")[0].strip())
    got = {}
    for c, paths in cands.items():
        for p in paths:
            if p in by_path:
                got[c] = by_path[p]
                break
    return got


def listed(path):
    with open(path) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def closure(pkgs):
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + pkgs,
                       capture_output=True, text=True)
    got = set(pkgs)
    for l in r.stdout.splitlines():
        l = l.strip()
        m = re.match(r"^(?:\|?(?:Pre)?Depends:\s*)?<?([a-z0-9][a-z0-9.+-]*)(?::\w+)?>?$", l)
        if m:
            got.add(m.group(1))
    return got


def minbase(pkgs):
    """The packages of a bare Debian 12 (debootstrap minbase): priority
    required or essential, and apt."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Priority} ${Essential}\\n"] + sorted(pkgs),
                       capture_output=True, text=True)
    base = {"apt"}
    for l in r.stdout.splitlines():
        f = l.split()
        if len(f) >= 2 and (f[1] == "required" or f[-1] == "yes"):
            base.add(f[0])
    return base


files = [p for p in glob.glob(os.path.join(top, "tests", "**", "*"), recursive=True)
         if os.path.isfile(p) and is_script(p) and not p.endswith((".c", ".h", ".o"))]
files += [os.path.join(top, "autogen.sh"), os.path.join(top, "tools", "install-deps.sh")]
need = {}
for p in files:
    try:
        text = open(p, encoding="utf-8", errors="replace").read()
    except OSError:
        continue
    # A Python script by name or by its #! line (tests/bench/ddp-vs-torch):
    # its words are not shell commands.
    is_python = p.endswith(".py") or re.match(r"#![^\n]*python", text) is not None
    cmds = python_commands(text) if is_python or "exec python3 -" in text else set()
    if not is_python:
        cmds |= shell_commands(text)
    for c in cmds:
        if where(c):
            need.setdefault(c, set()).add(os.path.relpath(p, top))

pkgs = listed(os.path.join(top, "packages", "debian.txt"))
have = closure(pkgs)
# The benchmarks (tests/bench/, `make bench`) may also use the peers of
# packages/debian-bench.txt (PyTorch's torchrun), which .ci/run installs too.
bench_pkgs = listed(os.path.join(top, "packages", "debian-bench.txt"))
bench_have = closure(pkgs + bench_pkgs)
own = owners(sorted(need))
base = minbase(set(own.values()))
bad, seen = [], []
for c in sorted(need):
    pkg = own.get(c)
    if pkg is None:
        continue                 # not from a package (a local build): nothing to list
    how = "listed" if pkg in pkgs else "dependency" if pkg in have else "minbase" if pkg in base else None
    if how is None and all(u.startswith("tests/bench/") for u in need[c]) and pkg in bench_have:
        how = "bench, debian-bench.txt"
    seen.append("%s (%s, %s)" % (c, pkg, how or "MISSING"))
    if how is None:
        bad.append("%s: in package %s, which packages/debian.txt neither lists nor pulls in, and a bare "
                   "Debian 12 lacks; used by %s" % (c, pkg, ", ".join(sorted(need[c]))))
print("programs the tests and build scripts run: " + ", ".join(seen))
if bad:
    for b in bad:
        print("FAIL: " + b)
    sys.exit(1)
print("ok: all %d come with packages/debian.txt or Debian 12 minbase" % len(seen))
PY
