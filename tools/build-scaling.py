#!/usr/bin/env python3
"""Build data/scaling-2019.json, the cluster-size scaling the planner uses,
from the CM-DARE measurements in the shared data folder.

Usage: tools/build-scaling.py [SHARED_DATA_DIR] [--out DIR] [--check]

SHARED_DATA_DIR defaults to ../shared/data relative to the repository root.
--check writes nothing and exits 1 if data/scaling-2019.json differs from
what this script would write now.  Python 3 standard library only; the
output is deterministic.

What it reads: seeds/CM-DARE/data/processed_data/speed_and_cluster_size/
{k80,p100,p100ps2}/<model><gpu>worker<N>/run_.-tag-global_step_sec.csv, the
TensorBoard global_step/sec of asynchronous parameter-server training (TF
1.10, batch 128 per worker) with N = 1..8 workers and 1 PS (k80, p100) or
2 PS (p100ps2), measured in Sep 2019.  Each series point is the median of
the last 80 % of a run's samples (the first 20 % include the warm-up), as
reference/seeds.md section 2.7 reports them.  The format is described in
src/market/planner.h (sd_plan_scaling_load) and data/README.md.
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = "seeds/CM-DARE/data/processed_data/speed_and_cluster_size"

# Folder -> (GPU, parameter servers).
SETUPS = {"k80": ("K80", 1), "p100": ("P100", 1), "p100ps2": ("P100", 2)}
# Folder name prefix -> model name as the planner knows it.  "shakesbig" is
# how the p100ps2 folder spells Shake-Shake big.
MODELS = [("res15", "resnet15"), ("res32", "resnet32"), ("shakesmall", "shake-shake-small"),
          ("shakesbig", "shake-shake-big"), ("shakebig", "shake-shake-big")]


def series_point(path):
    with open(path, newline="") as f:
        v = [float(r["Value"]) for r in csv.DictReader(f) if r["Value"]]
    if len(v) < 5:
        raise SystemExit("build-scaling: %s: only %d samples" % (path, len(v)))
    return round(statistics.median(v[len(v) // 5:]), 3), len(v)


def build(shared):
    base = os.path.join(shared, BASE)
    found = {}
    for folder, (gpu, nps) in sorted(SETUPS.items()):
        for sub in sorted(os.listdir(os.path.join(base, folder))):
            m = re.match(r"(.*?)(?:k80|p100ps2|p100|80|100)?worker(\d+)$", sub)
            if not m:
                raise SystemExit("build-scaling: %s/%s: unexpected folder name" % (folder, sub))
            model = next((name for pre, name in MODELS if m.group(1).startswith(pre)), None)
            if model is None:
                raise SystemExit("build-scaling: %s/%s: unknown model" % (folder, sub))
            n = int(m.group(2))
            path = os.path.join(base, folder, sub, "run_.-tag-global_step_sec.csv")
            found.setdefault((model, gpu, nps), {})[n] = (series_point(path), "%s/%s" % (folder, sub))
    series = []
    for (model, gpu, nps), pts in sorted(found.items()):
        if sorted(pts) != list(range(1, 9)):
            raise SystemExit("build-scaling: %s %s %d PS: workers %s, expected 1..8" % (model, gpu, nps, sorted(pts)))
        folders = sorted({pts[n][1].rsplit("worker", 1)[0] for n in pts})
        series.append({
            "model": model,
            "gpu": gpu,
            "parameter_servers": nps,
            "batch_per_worker": 128,
            "steps_per_second": [pts[n][0][0] for n in range(1, 9)],
            "source": "measured: %s/%sworker{1..8}/run_.-tag-global_step_sec.csv, median of the last 80 %% of each run's "
                      "samples (%d-%d samples per run)"
                      % (BASE, folders[0], min(p[0][1] for p in pts.values()), max(p[0][1] for p in pts.values())),
        })
    return {
        "format": "spotdeck-scaling",
        "version": 1,
        "name": "cmdare-2019",
        "description": "Training throughput against cluster size (1-8 workers, 1 GPU each) for asynchronous "
                       "parameter-server training with TensorFlow 1.10 on GCE, as measured by CM-DARE (ICDCS'20) "
                       "in Sep 2019: K80 and P100 workers with 1 PS, P100 workers with 2 PS.",
        "unit": "global steps per second over the whole cluster; one step is one worker's batch of batch_per_worker "
                "images",
        "sources": [{"name": "cake-lab/CM-DARE @ 263b7f14951c0645cacdfeadbef8546d4a742632",
                     "licence": "LICENSE-Apache-2.0.txt"}],
        "series": series,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared", nargs="?", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--out", default=os.path.join(REPO, "data"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(build(os.path.normpath(args.shared)), indent=1) + "\n"
    path = os.path.join(args.out, "scaling-2019.json")
    if args.check:
        try:
            with open(path) as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            print("build-scaling: %s differs from what the shared data gives" % path, file=sys.stderr)
        sys.exit(0 if same else 1)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
