#!/bin/sh
# tests/test-include-layers.sh - no #include points up a layer:
# src/base/ includes nothing of ours, engine/ never includes src/ (but
# src/base/) or ui/, ui/ never includes engine/ or src/ (but src/base/),
# the protocol and market code include no other part of src/, src/run/ no
# controller or app, and so on, as tests/layers.txt writes the graph once.  Every C, C++ and CUDA file under
# engine/, ui/ and src/ must be in exactly one layer.  Before it reads the
# real tree, the check runs on a small made-up tree with one include that
# points up, one file in no layer and a base file that includes a layer
# (base includes none), and must report them, so this test cannot pass by
# checking nothing.  Each header's include guard is its path:
# SD_ then the path without src/, upper case, with '/', '.' and '-' as '_'
# (src/provider/fleet.h: SD_PROVIDER_FLEET_H), so two headers never share
# one; the made-up tree has a header with a wrong guard too.
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found" >&2; exit 77; }
exec python3 - "${top_srcdir:-$(dirname "$0")/..}" <<'PY'
import fnmatch, glob, os, re, sys, tempfile

top = sys.argv[1]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GUARD = re.compile(r'^#ifndef\s+(\w+)\s*\n#define\s+(\w+)', re.M)


def guard_problem(rel, text):
    """One line saying what is wrong with header rel's include guard, or None."""
    want = "SD_" + re.sub(r"[/.-]", "_", re.sub(r"^src/", "", rel)).upper()
    m = GUARD.search(text)
    if not m or m.group(1) != m.group(2):
        return "%s: no include guard (#ifndef %s, #define %s)" % (rel, want, want)
    if m.group(1) != want:
        return "%s: include guard %s; the path makes it %s" % (rel, m.group(1), want)
    return None
SOURCES = ("*.c", "*.cc", "*.h", "*.cu")


def read_layers(path):
    """[(layer, [globs], {allowed layers})] from a layers.txt; a bad line is fatal."""
    layers = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "->" not in line:
                sys.exit("FAIL: %s:%d: no '->' (want: LAYER GLOB... -> LAYER...)" % (path, n))
            left, right = line.split("->", 1)
            words = left.split()
            if len(words) < 2:
                sys.exit("FAIL: %s:%d: a layer needs a name and at least one glob" % (path, n))
            layers.append((words[0], words[1:], set(right.split())))
    names = [l[0] for l in layers]
    for name, _, allowed in layers:
        for a in allowed - set(names):
            sys.exit("FAIL: %s: layer %s may include %s, which is no layer" % (path, name, a))
    return layers


def layer_of(rel, layers):
    hits = [name for name, globs, _ in layers if any(fnmatch.fnmatchcase(rel, g) for g in globs)]
    return hits


def check(root, layers):
    """Returns the problems found under root, one line each."""
    problems = []
    files = []
    for d in ("engine", "ui", "src"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            for fn in filenames:
                if any(fnmatch.fnmatchcase(fn, p) for p in SOURCES):
                    files.append(os.path.relpath(os.path.join(dirpath, fn), root))
    allowed = {name: allowed | {name} for name, _, allowed in layers}
    for rel in sorted(files):
        mine = layer_of(rel, layers)
        if len(mine) != 1:
            problems.append("%s: in %s layers (%s); place it in exactly one in tests/layers.txt"
                            % (rel, len(mine), " ".join(mine) or "none"))
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            text = f.read()
        if rel.endswith(".h") and guard_problem(rel, text):
            problems.append(guard_problem(rel, text))
        with open(os.path.join(root, rel), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue   # "config.h", or a file next to it
                target = m.group(1)
                theirs = layer_of(target, layers)
                if not theirs:
                    if target.split("/")[0] in ("engine", "ui", "src"):
                        problems.append("%s:%d: includes %s, which is in no layer" % (rel, n, target))
                    continue
                if theirs[0] not in allowed[mine[0]]:
                    problems.append("%s:%d: %s layer includes %s (%s layer): it may include only %s"
                                    % (rel, n, mine[0], target, theirs[0], " ".join(sorted(allowed[mine[0]]))))
    return problems, len(files)


# 1. The check itself finds an include that points up, and a file in no layer.
with tempfile.TemporaryDirectory() as t:
    for rel, text in {"engine/a.h": "#ifndef SD_ENGINE_A_H\n#define SD_ENGINE_A_H\n#endif\n",
                      "engine/b.c": '#include "engine/a.h"\n#include "ui/v.h"\n',
                      "ui/v.h": '#ifndef SD_UI_V_H\n#define SD_UI_V_H\n#include "config.h"\n#endif\n',
                      "src/app/w.h": "#ifndef SD_W_H\n#define SD_W_H\n#endif\n",
                      "src/stray.c": "",
                      "src/base/e.c": '#include "src/base/e.h"\n#include "engine/a.h"\n',
                      "src/base/e.h": "#ifndef SD_BASE_E_H\n#define SD_BASE_E_H\n#endif\n"}.items():
        os.makedirs(os.path.dirname(os.path.join(t, rel)), exist_ok=True)
        with open(os.path.join(t, rel), "w") as f:
            f.write(text)
    lp = os.path.join(t, "layers.txt")
    with open(lp, "w") as f:
        f.write("base src/base/* ->\nengine engine/* -> base\nui ui/* -> base\napp src/app/* ->\n")
    got, _ = check(t, read_layers(lp))
    want = ["engine/b.c:2: engine layer includes ui/v.h", "src/stray.c: in 0 layers",
            "src/base/e.c:2: base layer includes engine/a.h",
            "src/app/w.h: include guard SD_W_H; the path makes it SD_APP_W_H"]
    for w in want:
        if not any(p.startswith(w) for p in got):
            sys.exit("FAIL: the check on a made-up tree missed '%s'; it reported: %s" % (w, got))
    if len(got) != len(want):
        sys.exit("FAIL: the check on a made-up tree reported more than it should: %s" % got)

# 2. The real tree.
layers = read_layers(os.path.join(top, "tests", "layers.txt"))
problems, n = check(top, layers)
for p in problems:
    print("FAIL: " + p)
if problems:
    sys.exit(1)
print("ok: %d files in %d layers (%s); no include points up a layer, every include guard is its path"
      % (n, len(layers), " ".join(l[0] for l in layers)))
PY
