#!/usr/bin/env python3
"""Build spotdeck's market catalogs from the shared measurement data.

Usage: tools/build-catalog.py [SHARED_DATA_DIR] [--out DIR] [--check]

SHARED_DATA_DIR defaults to ../shared/data relative to the repository root.
Writes DIR/gce-2019.json, DIR/gce-2019-02.json, DIR/market-2026.json and the licence files the data
they are derived from requires (DIR defaults to data/ in the repository).
--check writes nothing and exits 1 if a committed file differs from what this
script would write now.

The output is deterministic: same input, same bytes.  Only the Python 3
standard library is used.

The catalog format is documented in man/spotdeck-catalog.5.  Every number in
a catalog carries a source string that starts with one of
  measured:   computed by this script from a data file (named)
  quoted:     a number from the shared research notes whose own source file
              cannot be redistributed (no licence); the note is named
  documented: the provider's published rule (billing, notice)
  fitted:     fitted by this script so that the C model reproduces a
              measured quantity (named)
  estimated:  no measurement exists; the reasoning is in this file, next to
              the number, and summarised in the string
"""

import argparse
import csv
import datetime
import math
import os
import re
import statistics
import sys
from collections import Counter, defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def rd(x, nd=6):
    """Rounds for stable, readable JSON (and turns -0.0 into 0)."""
    v = round(float(x), nd)
    return 0.0 if v == 0 else v


def sig(x, n=4):
    """Rounds to n significant digits."""
    if x == 0:
        return 0.0
    return rd(x, n - 1 - int(math.floor(math.log10(abs(x)))))


def quantiles(values, n=11):
    """n quantiles at probabilities i/(n-1), linear between order statistics
    (Hyndman & Fan type 7, the default of R and numpy)."""
    v = sorted(values)
    out = []
    for i in range(n):
        h = (len(v) - 1) * i / (n - 1)
        lo = int(math.floor(h))
        hi = min(lo + 1, len(v) - 1)
        out.append(rd(v[lo] + (h - lo) * (v[hi] - v[lo]), 2))
    return out


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rel(shared, path):
    """Path of a shared data file as cited in source strings."""
    return os.path.relpath(path, shared)


# ---------------------------------------------------------------------------
# JSON writer: like json.dumps(indent=2) but short lists of scalars stay on
# one line, so a CDF or 24 hour weights read as one row each.
# ---------------------------------------------------------------------------


def jscalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return repr(v)
    if isinstance(v, str):
        out = ['"']
        for ch in v:
            if ch == '"':
                out.append('\\"')
            elif ch == "\\":
                out.append("\\\\")
            elif ord(ch) < 0x20:
                out.append("\\u%04x" % ord(ch))
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    raise TypeError(type(v))


def jdump(v, ind=0):
    pad = "  " * ind
    if isinstance(v, dict):
        if not v:
            return "{}"
        items = ['%s  %s: %s' % (pad, jscalar(k), jdump(x, ind + 1)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list):
        flat = all(not isinstance(x, (dict, list)) for x in v)
        pairs = all(isinstance(x, list) and all(not isinstance(y, (dict, list)) for y in x) for x in v)
        if flat:
            one = "[" + ", ".join(jscalar(x) for x in v) + "]"
            if len(one) + len(pad) < 110:
                return one
        if pairs or flat:
            rows = [jdump(x, ind + 1) for x in v]
            line, lines = "", []
            for r in rows:
                if line and len(pad) + 2 + len(line) + len(r) + 2 > 110:
                    lines.append(line)
                    line = ""
                line = (line + ", " + r) if line else r
            lines.append(line)
            return "[\n" + ",\n".join(pad + "  " + x for x in lines) + "\n" + pad + "]"
        return "[\n" + ",\n".join(pad + "  " + jdump(x, ind + 1) for x in v) + "\n" + pad + "]"
    return jscalar(v)


# ---------------------------------------------------------------------------
# The time-of-day model.  This mirrors src/market/market-model.c exactly in
# formulation (not bit for bit): see the comment there for the derivation.
# Launch time within the day is split in SUB sub-bins per hour; lifetime in
# 1-hour bins up to the cap.  The row-stochastic matrix
#     M[i][k] = b_k p_k ((1-a_i) w[(l_i+k)%24] + a_i w[(l_i+k+1)%24]) / r_i
# is scaled (Sinkhorn) so that, for launches uniform over the day, lifetime
# bin k has probability exactly p_k: the measured CDF is kept at every whole
# hour.  The weights w only move revocations towards busy clock hours.
# ---------------------------------------------------------------------------

SUB = 12          # launch-time sub-bins per hour; must equal SD_TOD_SUB in C


def tod_fit(p, w, sub=SUB, tol=1e-10, max_iter=20000):
    """p: nbins+1 probabilities (last = survives to the cap); w: 24 weights.
    Returns (b, rows) where rows[i] is the probability vector for sub-bin i."""
    nb = len(p) - 1
    nrow = 24 * sub
    ker = []
    for i in range(nrow):
        l, a = i // sub, ((i % sub) + 0.5) / sub
        ker.append([p[k] * ((1 - a) * w[(l + k) % 24] + a * w[(l + k + 1) % 24]) for k in range(nb)] + [p[nb]])
    b = [1.0] * (nb + 1)
    for _ in range(max_iter):
        col = [0.0] * (nb + 1)
        for row in ker:
            r = sum(bk * kk for bk, kk in zip(b, row))
            for k in range(nb + 1):
                col[k] += b[k] * row[k] / r
        col = [c / nrow for c in col]
        err = max(abs(c - q) for c, q in zip(col, p))
        if err < tol:
            break
        for k in range(nb + 1):
            if p[k] > 0:
                b[k] *= p[k] / col[k]
    else:
        raise RuntimeError("time-of-day fit did not converge")
    rows = []
    for row in ker:
        r = sum(bk * kk for bk, kk in zip(b, row))
        rows.append([b[k] * row[k] / r for k in range(nb + 1)])
    return b, rows


def tod_clock_histogram(p, w, sub=4):
    """Expected share of revocations per clock hour for launches uniform over
    the day, under the model above (each revocation falls in clock hour l+k
    or l+k+1, split by the weighted piece lengths)."""
    nb = len(p) - 1
    _, rows = tod_fit(p, w, sub, 1e-9)
    clock = [0.0] * 24
    for i, row in enumerate(rows):
        l, a = i // sub, ((i % sub) + 0.5) / sub
        for k in range(nb):
            w1, w2 = (1 - a) * w[(l + k) % 24], a * w[(l + k + 1) % 24]
            if w1 + w2 <= 0:
                continue
            m = row[k] / len(rows)
            clock[(l + k) % 24] += m * w1 / (w1 + w2)
            clock[(l + k + 1) % 24] += m * w2 / (w1 + w2)
    return clock


def pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def fit_hour_weights(counts, groups):
    """Hazard weights per clock hour such that the model, with launches
    uniform over the day, reproduces the measured revocation-hour histogram
    `counts` summed over `groups` [(p, n_vms), ...] (the regions of one GPU).

    Start from the counts plus half a revocation per hour (a zero count out of
    about 70 events does not mean the hazard is zero at that hour, and zeros
    can make the CDF impossible to keep), then refine multiplicatively where
    the simulated histogram falls short of the measured one."""
    total = sum(counts)
    target = [c / total for c in counts]
    w = [c + 0.5 for c in counts]
    m = sum(w) / 24
    w = [x / m for x in w]
    for _ in range(8):
        agg = [0.0] * 24
        for p, n in groups:
            h = tod_clock_histogram(p, w)
            for c in range(24):
                agg[c] += n * h[c]
        s = sum(agg)
        agg = [x / s for x in agg]
        # Damped update; the floor keeps every hour possible.
        w = [max(0.02, w[c] * ((target[c] + 1e-4) / (agg[c] + 1e-4)) ** 0.8) for c in range(24)]
        m = sum(w) / 24
        w = [x / m for x in w]
    return [rd(x, 4) for x in w], pearson(agg, target)


# ---------------------------------------------------------------------------
# Seeds (GCE 2019): CM-DARE / ICAC measurements
# ---------------------------------------------------------------------------

# Region -> zone for the per-region CDFs.  The ICDCS notebook gives regions
# only; these are the zones the ICAC lifetime study and training runs used in
# each region (transient-deep-learning/data/lifetime/lifetime.csv, training DBs).
GCE_ZONES = {
    ("K80", "us-central1"): "us-central1-c",
    ("K80", "us-west1"): "us-west1-b",
    ("K80", "europe-west1"): "europe-west1-b",
    ("K80", "us-east1"): "us-east1-c",
    ("P100", "us-east1"): "us-east1-c",
    ("P100", "europe-west1"): "europe-west1-b",
    ("P100", "us-central1"): "us-central1-c",
    ("P100", "us-west1"): "us-west1-b",
    ("V100", "europe-west4"): "europe-west4-a",
    ("V100", "asia-east1"): "asia-east1-c",
    ("V100", "us-central1"): "us-central1-a",
    ("V100", "us-west1"): "us-west1-b",
}


def read_lifetime_trace(shared):
    """The Feb-2019 part of lifetime.csv: (gpu, zone, start, end, hours)."""
    path = os.path.join(shared, "seeds/transient-deep-learning/data/lifetime/lifetime.csv")
    recs, gpu = [], None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if not r or not r[0]:
                continue
            if r[0] == "Previous experiments":
                break   # the 2018 block has corrupted dates; not a trace
            if r[0] in ("K80", "P100", "V100"):
                gpu = r[0]
                continue
            if r[0] == "VM name":
                continue
            m = re.match(r"a-(?:[kpv]\d+-)?([a-z]+-[a-z]+\d-[a-z])-\d+(?:less)?$", r[0])
            if not m:
                raise SystemExit("%s: unexpected VM name %r" % (path, r[0]))
            fmt = "%m/%d/%y %H:%M"
            s = datetime.datetime.strptime(r[1], fmt)
            e = datetime.datetime.strptime(r[2], fmt)
            recs.append((gpu, m.group(1), s, e, (e - s).total_seconds() / 3600))
    return path, recs


def batch_from_lifetime_trace(recs):
    """Revocations (lifetime < 24 h) grouped by zone and minute of termination.
    Feb 2019: 33 revocations in 24 groups: 19 single, 2 pairs, 2 of 3, 1 of 4."""
    groups = Counter((g, z, e) for g, z, s, e, h in recs if h < 24)
    sizes = Counter(groups.values())
    nev = sum(sizes.values())
    multi = {k: v for k, v in sizes.items() if k >= 2}
    return nev, sum(multi.values()), sorted(multi.items())


def max_concurrent(recs, gpu):
    best = 0
    for zone in sorted({z for g, z, *_ in recs if g == gpu}):
        ev = []
        for g, z, s, e, h in recs:
            if g == gpu and z == zone:
                ev += [(s, 1), (e, -1)]
        live = 0
        for _, d in sorted(ev, key=lambda x: (x[0], x[1])):
            live += d
            best = max(best, live)
    return best


def build_gce_2019(shared):
    d = os.path.join(shared, "seeds")
    cdf_path = os.path.join(d, "derived/cmdare_lifetime_cdf_by_region.csv")
    hod_path = os.path.join(d, "derived/cmdare_revocations_by_hour_of_day.csv")
    price_path = os.path.join(d, "derived/icac_unit_prices_implied.csv")

    cdf, nvms = defaultdict(dict), {}
    for r in read_csv(cdf_path):
        h = int(r["lifetime_upper_bound_hours"])
        if h <= 24:     # the h=25 row is "all VMs", i.e. survivors stopped at the cap
            key = (r["gpu"], r["region"])
            cdf[key][h] = float(r["cdf_fraction_terminated"])
            nvms[key] = int(r["n_vms"])
    for key, pts in cdf.items():
        if sorted(pts) != list(range(1, 25)):
            raise SystemExit("%s: %s lacks whole-hour points 1..24" % (cdf_path, key))

    hod = defaultdict(lambda: [0] * 24)
    for r in read_csv(hod_path):
        # The notebook's bins run 0..24; bin 24 (always 0 here) is the same
        # clock hour as bin 0, so it is folded into it.
        hod[r["gpu"]][int(r["hour_of_day"]) % 24] += int(r["revocations"])

    prices = {}
    for r in read_csv(price_path):
        prices[r["resource"]] = float(r["usd_per_hour"])
    price_src = "measured: %s (from the ICAC cost files and data_processor.py); one price for every zone" % rel(shared, price_path)
    k80_od = prices["K80 worker VM, on-demand"]
    k80_pre = prices["K80 worker VM, preemptible"]
    spot_price = {"K80": k80_pre, "P100": prices["P100 worker VM, preemptible"],
                  "V100": prices["V100 worker VM, preemptible"]}
    # ESTIMATED: the seeds measured no on-demand P100 or V100 price.  The only
    # measured on-demand/preemptible pair in the same data set is the K80
    # (0.723 / 0.2556 = 2.83x); apply that ratio.  GCE's 2019 list prices had
    # a GPU-only ratio near 3.3x, so these are probably a little low.
    od_ratio = k80_od / k80_pre

    # Throughput: single worker, 1 PS, ResNet-32 on CIFAR-10, batch 128.
    speed = {}
    for gpu in ("K80", "P100", "V100"):
        p = os.path.join(d, "CM-DARE/data/processed_data/speed_data_base/res32%s/data.csv" % gpu.lower())
        v = [float(r["Value"]) for r in read_csv(p) if r["Value"] and float(r["Value"]) > 0]
        speed[gpu] = (rd(statistics.median(v) * 128, 1),
                      "measured: %s, median global_step/sec %.3f x 128 images per step (ResNet-32, CIFAR-10, 1 worker, 1 PS)"
                      % (rel(shared, p), statistics.median(v)))

    # Boot: provisioning + staging + booting, per request.
    boot_dir = os.path.join(d, "CM-DARE/data/processed_data/startup_time")
    boot = {}
    for kind, sub in (("pre", "pre"), ("od", "on_demand")):
        for side in ("east", "west"):
            for gpu in ("k80", "p100"):
                folder = os.path.join(boot_dir, "%s_%s" % (sub, side))
                for fn in sorted(os.listdir(folder)):
                    if gpu in fn:
                        rows = read_csv(os.path.join(folder, fn))
                        boot[(kind, side, gpu.upper())] = (
                            [float(r["Provisioning"]) + float(r["Staging"]) + float(r["Booting"]) for r in rows],
                            rel(shared, os.path.join(folder, fn)))

    def boot_for(gpu, transient, region):
        kind = "pre" if transient else "od"
        sides = ["east"] if region == "us-east1" else ["west"] if region == "us-west1" else ["east", "west"]
        gpus = [gpu] if gpu in ("K80", "P100") else ["K80", "P100"]
        vals, files = [], []
        for s in sides:
            for g in gpus:
                vals += boot[(kind, s, g)][0]
                files.append(boot[(kind, s, g)][1])
        src = "measured: %s; total of provisioning + staging + booting, %d VMs" % (", ".join(files), len(vals))
        if gpu == "V100":
            # ESTIMATED: no V100 start-up was measured; K80 and P100 differ by
            # under 10 s, so the pooled K80+P100 sample stands in for it.
            src = "estimated: no V100 start-up measured; pooled K80+P100 from " + ", ".join(files)
        elif len(sides) == 2:
            src += " (no measurement in this region: us-east1 and us-west1 pooled)"
        return {"quantiles_seconds": quantiles(vals), "source": src}

    trace_path, trace = read_lifetime_trace(shared)
    nev, nmulti, multi = batch_from_lifetime_trace(trace)
    batch = {
        "probability": rd(nmulti / nev, 4),
        "sizes": [[k, v] for k, v in multi],
        # ESTIMATED: in the trace, servers revoked together had been launched
        # together, so their own lifetimes coincided.  The model keeps each
        # server's lifetime distribution by only pulling forward revocations
        # that were due anyway within this window (see spotdeck-catalog(5)).
        "window_hours": 1.0,
        "spread_seconds": 60,
        "scope": "zone",
        "source": "measured: %s, Feb-2019 part: %d revocation events (same zone, same minute) of which %d took "
                  "other VMs along; window_hours estimated" % (rel(shared, trace_path), nev, nmulti),
    }

    # Hour-of-day hazard weights, fitted per GPU over its regions.
    hour_weights, hour_fit = {}, {}
    for gpu in ("K80", "P100", "V100"):
        groups = []
        for (g, region), pts in sorted(cdf.items()):
            if g != gpu:
                continue
            F = [0.0] + [pts[h] for h in range(1, 25)]
            p = [F[k + 1] - F[k] for k in range(24)] + [1 - F[24]]
            groups.append((p, nvms[(g, region)]))
        hour_weights[gpu], hour_fit[gpu] = fit_hour_weights(hod[gpu], groups)

    offers = []
    order = [("K80", r) for r in ("us-central1", "us-west1", "europe-west1", "us-east1")] + \
            [("P100", r) for r in ("us-east1", "europe-west1", "us-central1", "us-west1")] + \
            [("V100", r) for r in ("europe-west4", "asia-east1", "us-central1", "us-west1")]
    for gpu, region in order:
        zone = GCE_ZONES[(gpu, region)]
        # ESTIMATED capacity: the seeds never ran out of GPUs; twice the most
        # VMs of this GPU they held at once in one zone.
        cap_n = 2 * max_concurrent(trace, gpu)
        capacity = {"servers": cap_n,
                    "source": "estimated: twice the most %s VMs the seeds held at once in one zone (%s)"
                              % (gpu, rel(shared, trace_path))}
        for transient in (True, False):
            if transient:
                price, psrc = spot_price[gpu], price_src
            elif gpu == "K80":
                price, psrc = k80_od, price_src
            else:
                price = rd(spot_price[gpu] * od_ratio, 4)
                psrc = ("estimated: no on-demand %s price in the seeds; preemptible %.4f x %.3f, the K80 "
                        "on-demand/preemptible ratio measured in %s" % (gpu, spot_price[gpu], od_ratio, rel(shared, price_path)))
            o = {
                "id": "gce/%s/%s/%s" % (zone, gpu.lower(), "spot" if transient else "on-demand"),
                "provider": "gce",
                "region": region,
                "zone": zone,
                "machine_type": "custom-4-53248" if gpu == "K80" else "custom-8-62464",
                "gpu": gpu,
                "gpu_count": 1,
                "transient": transient,
                "usd_per_hour": price,
                "price_source": psrc,
                "images_per_sec": speed[gpu][0],
                "speed_source": speed[gpu][1],
                "capacity": capacity,
                "notice_seconds": 30,
                "notice_source": "documented: GCE preemptible VMs get a 30 s ACPI shutdown notice",
                "billing": {"unit": "per_second", "minimum_seconds": 60,
                            "source": "documented: GCE per-second billing with a 1-minute minimum"},
                "boot": boot_for(gpu, transient, region),
            }
            if transient:
                pts = cdf[(gpu, region)]
                o["revocation"] = {
                    "model": "empirical",
                    "max_lifetime_hours": 24,
                    "lifetime_cdf": [[h, rd(pts[h])] for h in range(1, 25)],
                    "cdf_servers": nvms[(gpu, region)],
                    "cdf_source": "measured: %s (%s, %s, %d VMs; the 1 h point is the hour-0 early-revocation mass; "
                                  "survivors are stopped at GCE's 24 h preemptible limit)"
                                  % (rel(shared, cdf_path), gpu, region, nvms[(gpu, region)]),
                    "hour_of_day_revocations": hod[gpu],
                    "hour_of_day_weights": hour_weights[gpu],
                    "hour_of_day_source": "fitted: weights for which launches spread evenly over the day reproduce "
                                          "hour_of_day_revocations (%s, %s, all regions; Pearson %.3f in the fit; "
                                          "clock not stated in the source)" % (rel(shared, hod_path), gpu, hour_fit[gpu]),
                    "batch": batch,
                }
            offers.append(o)

    return {
        "format": "spotdeck-catalog",
        "version": 1,
        "name": "gce-2019",
        "description": "Google Compute Engine preemptible K80/P100/V100 servers as measured by the ICAC'19 and "
                       "ICDCS'20 (CM-DARE) studies, 2019: per-region lifetime CDFs with the hour-0 mass and the 24 h "
                       "cap, time-of-day profile, same-zone batch revocations, boot times, 2019 prices.",
        "time_base": {
            "period": "2019-02 to 2019-10",
            "hour_of_day_clock": "not stated by the source notebook; used as the market's local clock",
            "lifetime_origin": "VM creation (instances.insert accepted)",
        },
        "sources": [
            {"name": "cake-lab/transient-deep-learning @ 87c6717e4026801623cf0327e78ad57f51cb1461",
             "licence": "LICENSE-Apache-2.0.txt"},
            {"name": "cake-lab/CM-DARE @ 263b7f14951c0645cacdfeadbef8546d4a742632",
             "licence": "LICENSE-Apache-2.0.txt"},
        ],
        "offers": offers,
    }



def build_gce_2019_02(shared):
    """GCE in February 2019, the weeks of the ICAC training runs (Feb 12-17).

    Same offers, prices, speeds, boot times and batch revocations as
    gce-2019, but each transient offer's lifetime CDF is the Feb-2019 part of
    the ICAC lifetime trace (Feb 18-20, the same four K80 zones as the
    training runs), pooled over the zones of its GPU.  Why pooled: 16 VMs per
    zone say little about a zone (us-east1-c and us-west1-b lost no K80 in
    the trace but did in the training runs the week before), while the 64 K80
    of the four zones together give the GPU's early-revocation mass (5 of 64
    in the first hour) from the same weeks.  The ICDCS per-region CDFs of
    gce-2019 were measured May-Oct 2019 and put 4-47 % of K80s in hour 0:
    planning the Feb-2019 training runs on them would be planning on another
    market.  The hour-of-day weights are refitted (as in gce-2019) so that
    this CDF reproduces the ICDCS revocations per clock hour, the only
    time-of-day measurement there is (20 K80 revocations are too few to fit
    24 weights from the trace itself)."""
    cat = build_gce_2019(shared)
    hod_path = os.path.join(shared, "seeds/derived/cmdare_revocations_by_hour_of_day.csv")
    trace_path, trace = read_lifetime_trace(shared)
    tpath = rel(shared, trace_path)
    cdfs = {}
    for gpu in ("K80", "P100", "V100"):
        life = [h for g, z, s, e, h in trace if g == gpu]
        zones = sorted({z for g, z, *_ in trace if g == gpu})
        n = len(life)
        # A VM counts as revoked in hour bin k if its lifetime is under k h
        # (survivors show 24.07-24.72 h: the cap, recorded late).
        F = [sum(1 for x in life if x < 24 and x < k) / n for k in range(1, 24)]
        F.append(sum(1 for x in life if x < 24) / n)
        cdfs[gpu] = (F, n, zones)
    weights = {}
    for o in cat["offers"]:
        if not o["transient"]:
            continue
        gpu = o["gpu"]
        F, n, zones = cdfs[gpu]
        r = o["revocation"]
        if gpu not in weights:
            p = [F[0]] + [F[k] - F[k - 1] for k in range(1, 24)] + [1 - F[23]]
            weights[gpu] = fit_hour_weights(r["hour_of_day_revocations"], [(p, n)])
        w, fit = weights[gpu]
        r["lifetime_cdf"] = [[h, rd(F[h - 1])] for h in range(1, 25)]
        r["cdf_servers"] = n
        r["cdf_source"] = ("measured: %s, Feb-2019 part, %s, %d VMs in %s pooled (the 1 h point is the hour-0 "
                           "early-revocation mass; survivors are stopped at GCE's 24 h preemptible limit)"
                           % (tpath, gpu, n, ", ".join(zones)))
        r["hour_of_day_weights"] = w
        r["hour_of_day_source"] = ("fitted: weights for which launches spread evenly over the day, with this "
                                   "CDF, reproduce hour_of_day_revocations (%s, %s, all regions; Pearson %.3f in "
                                   "the fit; clock not stated in the source)" % (rel(shared, hod_path), gpu, fit))
    cat["name"] = "gce-2019-02"
    cat["description"] = ("Google Compute Engine preemptible K80/P100/V100 servers in February 2019, the weeks of "
                          "the ICAC'19 training runs: lifetime CDFs of the ICAC Feb-2019 trace pooled per GPU, with "
                          "the hour-0 mass and the 24 h cap; time-of-day profile, batch revocations, boot times and "
                          "prices as gce-2019.")
    cat["time_base"]["period"] = "2019-02"
    return cat

# ---------------------------------------------------------------------------
# Today's market (2026): AWS / GCP / Azure
# ---------------------------------------------------------------------------

# reference/market-data.md section 7: an AWS Advisor bucket is read as the
# share of instances reclaimed per trailing month, midpoint (>20% as 25%),
# lambda = -ln(1-p)/730 h.  These are the calm-market rates.
BUCKET_P = {0: 0.025, 1: 0.075, 2: 0.125, 3: 0.175, 4: 0.25}
BUCKET_LABEL = {0: "<5%", 1: "5-10%", 2: "10-15%", 3: "15-20%", 4: ">20%"}

# ESTIMATED: share of time a pool spends in a storm (requests fail, revocation
# rate from the measured traces), per Advisor bucket.  Anchor: for p3.2xlarge
# (every zone `>20%`) the Can't Be Late traces (quoted in market-data.md
# section 5) give 17-91 % availability per AZ, median about 68 %, so 0.30 for
# `>20%`; lower buckets scale down to 0.05.  Storms last 2 h on average
# (section 7: "storm about 1-3 h").
STORM_SHARE = {0: 0.05, 1: 0.10, 2: 0.15, 3: 0.20, 4: 0.30}
STORM_HOURS = 2.0
# ESTIMATED: storm revocation rate where no trace exists for the GPU
# (section 7: "in storm, lambda is about 0.3 /h").
STORM_DEFAULT = 0.3

# ESTIMATED per-GPU ResNet-32 throughput relative to the measured V100.  The
# seeds show this small model is far from compute-bound (V100 is only 1.28x
# P100 for 1.7x the FP32 peak), so newer GPUs gain much less than their peak
# FLOPs: T4 (8 TFLOPS FP32, 320 GB/s) about half a V100; L4 (30 TFLOPS, 300
# GB/s) about 0.9x; A100 1.3x and H100 1.6x (faster memory and clocks, same
# per-step overheads).
SPEED_VS_V100 = {"T4": 0.5, "L4": 0.9, "V100": 1.0, "A100": 1.3, "H100": 1.6}

# ESTIMATED calm bucket for GCP and Azure, which publish none: the bucket the
# same instance family most often has in AWS's three big US regions (from the
# Advisor file), on the reading that demand for a GPU generation is similar
# across clouds.
CALM_BUCKET_BY_GPU = {"T4": 3, "L4": 4, "V100": 4, "A100": 2, "H100": 1}


def lam(p):
    return -math.log(1 - p) / 730.0


def read_bamboo_gcp(path, skip):
    """GCP group trace: 'date, time, live'.  Drops are counted in file order;
    instance-hours integrate the time-sorted count.  `skip` leading lines are
    the ramp-up, where several loggers interleave and time goes backwards."""
    pts = []
    with open(path) as f:
        for line in f:
            dt, tm, c = [x.strip() for x in line.split(",")]
            pts.append((datetime.datetime.strptime(dt + " " + tm, "%Y-%m-%d %H:%M:%S"), int(c)))
    pts = pts[skip:]
    drops = [a[1] - b[1] for a, b in zip(pts, pts[1:]) if b[1] < a[1]]
    s = sorted(pts, key=lambda p: p[0])
    ih = sum(a[1] * (b[0] - a[0]).total_seconds() / 3600 for a, b in zip(s, s[1:]))
    return sum(drops) / ih, Counter(drops), max(c for _, c in pts)


def read_bamboo_aws(path):
    """AWS cluster trace: 'ms,add|remove,node'.  A batch is removals at the
    same millisecond."""
    live, last, nh, removes = set(), 0, 0.0, []
    with open(path, newline="") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            ms, op, node = line.split(",")
            ms = int(ms)
            nh += len(live) * (ms - last) / 3.6e6
            last = ms
            if op == "add":
                live.add(node)
            else:
                live.discard(node)
                removes.append(ms)
    return len(removes) / nh, Counter(Counter(removes).values())


def batch_from_sizes(sizes, src, scope, window):
    nev = sum(sizes.values())
    multi = sorted((k, v) for k, v in sizes.items() if k >= 2)
    return {
        "probability": rd(sum(v for _, v in multi) / nev, 4),
        "sizes": [[k, v] for k, v in multi],
        "window_hours": window,
        "spread_seconds": 60,
        "scope": scope,
        "source": src,
    }


def build_market_2026(shared):
    m = os.path.join(shared, "market")
    adv_path = os.path.join(m, "aws-spot-advisor/spot-advisor-data-gpu-subset.csv")
    gcp_path = os.path.join(m, "gcp-cyclenerd/pricing-gpu-subset.csv")
    adv = {(r["region"], r["instance_type"]): r for r in read_csv(adv_path)}
    gcp = {(r["machine_type"], r["region"]): r for r in read_csv(gcp_path)}

    a100_path = os.path.join(m, "bamboo-traces/a100x1-east1b.txt")
    v100_path = os.path.join(m, "bamboo-traces/v100x1-east1c.txt")
    p3_path = os.path.join(m, "bamboo-traces/p3-trace.csv")
    g4_path = os.path.join(m, "bamboo-traces/g4dn-trace.csv")
    a100_rate, a100_sizes, a100_n = read_bamboo_gcp(a100_path, 0)
    v100_rate, v100_sizes, v100_n = read_bamboo_gcp(v100_path, 10)
    p3_rate, p3_sizes = read_bamboo_aws(p3_path)
    g4_rate, g4_sizes = read_bamboo_aws(g4_path)

    # The sims's batch model pulls forward revocations due within this window
    # (ESTIMATED, as for gce-2019).
    win = 1.0
    aws_batch_all = batch_from_sizes(p3_sizes + g4_sizes,
                                     "measured: %s and %s, removals in the same millisecond (AWS p3 and g4dn "
                                     "clusters pooled; no trace for this GPU); window_hours estimated"
                                     % (rel(shared, p3_path), rel(shared, g4_path)), "offer", win)
    gcp_batch_all = batch_from_sizes(a100_sizes + v100_sizes,
                                     "measured: %s and %s, drops per logging interval (1-2 min; GCP A100 and V100 "
                                     "pooled; no trace for this GPU); window_hours estimated"
                                     % (rel(shared, a100_path), rel(shared, v100_path)), "offer", win)
    batches = {
        ("aws", "V100"): batch_from_sizes(p3_sizes, "measured: %s, removals in the same millisecond; window_hours "
                                          "estimated" % rel(shared, p3_path), "offer", win),
        ("aws", "T4"): batch_from_sizes(g4_sizes, "measured: %s, removals in the same millisecond; window_hours "
                                        "estimated" % rel(shared, g4_path), "offer", win),
        ("gce", "A100"): batch_from_sizes(a100_sizes, "measured: %s, drops per logging interval (1-2 min); "
                                          "window_hours estimated" % rel(shared, a100_path), "offer", win),
        ("gce", "V100"): batch_from_sizes(v100_sizes, "measured: %s, drops per logging interval (1-2 min) after "
                                          "the ramp-up; window_hours estimated" % rel(shared, v100_path), "offer", win),
    }
    storm_rates = {
        ("aws", "V100"): (sig(p3_rate), "measured: %s, removals per node-hour (p3, 2021-12)" % rel(shared, p3_path)),
        ("aws", "T4"): (sig(g4_rate), "measured: %s, removals per node-hour (g4dn, 2021-12)" % rel(shared, g4_path)),
        ("gce", "A100"): (sig(a100_rate), "measured: %s, preemptions per instance-hour (us-east1-b, 2021-12)"
                          % rel(shared, a100_path)),
        ("gce", "V100"): (sig(v100_rate), "measured: %s, preemptions per instance-hour after the ramp-up "
                          "(us-east1-c, 2021-12)" % rel(shared, v100_path)),
    }

    # Boot times: nothing measured for 2026.  ESTIMATED: reuse the seeds'
    # GCE 2019 preemptible start-up (K80 + P100, east + west pooled); big
    # 8-GPU machines are likely slower, but no number exists.
    bdir = os.path.join(shared, "seeds/CM-DARE/data/processed_data/startup_time")
    bvals, bfiles = [], []
    for side in ("pre_east", "pre_west"):
        for fn in sorted(os.listdir(os.path.join(bdir, side))):
            rows = read_csv(os.path.join(bdir, side, fn))
            bvals += [float(r["Provisioning"]) + float(r["Staging"]) + float(r["Booting"]) for r in rows]
            bfiles.append(rel(shared, os.path.join(bdir, side, fn)))
    boot = {"quantiles_seconds": quantiles(bvals),
            "source": "estimated: no 2026 start-up measurement; GCE 2019 preemptible start-up reused (%s)"
                      % ", ".join(bfiles)}

    v100_ips = None
    p = os.path.join(shared, "seeds/CM-DARE/data/processed_data/speed_data_base/res32v100/data.csv")
    v = [float(r["Value"]) for r in read_csv(p) if r["Value"] and float(r["Value"]) > 0]
    v100_ips = statistics.median(v) * 128

    def speed(gpu):
        if gpu == "V100":
            return rd(v100_ips, 1), "measured: %s, median x 128 images per step" % rel(shared, p)
        return (rd(v100_ips * SPEED_VS_V100[gpu], 1),
                "estimated: %.2f x the measured V100 (%s); no %s measurement of this workload"
                % (SPEED_VS_V100[gpu], rel(shared, p), gpu))

    md = "reference/market-data.md"
    # Offer table.  Each row: provider, region, zone, machine, gpu, count,
    # on-demand price + source, spot price + source (None: no spot offer),
    # calm Advisor bucket + source, capacity + source.
    rows = []

    # --- AWS.  Prices are not in any shared data file (the SkyPilot catalog
    # has no licence); market-data.md section 6 quotes its 2026 medians over
    # AZs.  Where section 6 has no spot price, spot = on-demand x (1 - the
    # Advisor's 30-day savings).  The Advisor is per region, so the zone
    # letter is only a label.
    def aws(region, itype, gpu, n, od, od_src, spot, spot_src, cap, cap_src):
        a = adv[(region, itype)]
        if spot is None:
            spot = rd(od * (1 - int(a["savings_pct"]) / 100.0), 4)
            spot_src = ("estimated: on-demand x (1 - %s%% Advisor savings, %s)"
                        % (a["savings_pct"], rel(shared, adv_path)))
        b = int(a["interruption_bucket"])
        rows.append(dict(provider="aws", region=region, zone=region + "a", machine=itype, gpu=gpu, n=n,
                         od=od, od_src=od_src, spot=spot, spot_src=spot_src, bucket=b,
                         bucket_src="measured: %s, %s %s bucket %s" % (rel(shared, adv_path), region, itype,
                                                                        BUCKET_LABEL[b]),
                         cap=cap, cap_src=cap_src, notes="AWS Advisor data are per region; the zone letter is a label"))

    q6 = "quoted: %s section 6 (SkyPilot catalog v8, 2026, median over AZs; no licence, number only)" % md
    cap1 = "estimated: a modest per-account pool for a 1-GPU type"
    cap8 = "estimated: 8-GPU machines are scarce; a few per zone"
    aws("us-east-1", "g4dn.xlarge", "T4", 1, 0.526, q6, 0.204, q6, 24,
        "measured: %s reached 24 g4dn nodes" % rel(shared, g4_path))
    aws("us-east-2", "g4dn.xlarge", "T4", 1, 0.526, "estimated: same as us-east-1 (AWS prices both regions alike)",
        None, None, 24, "estimated: as us-east-1")
    aws("us-east-1", "g6.2xlarge", "L4", 1, 0.978, q6, 0.476, q6, 16, cap1)
    aws("us-east-2", "g6.2xlarge", "L4", 1, 0.978, "estimated: same as us-east-1 (AWS prices both regions alike)",
        None, None, 16, cap1)
    # p3.2xlarge: market-data.md quotes p3.8xlarge (4 x V100) at 12.24 $/h;
    # AWS sizes p3 linearly, so one V100 is a quarter of it (ESTIMATED).
    aws("us-east-1", "p3.2xlarge", "V100", 1, 3.06,
        "estimated: a quarter of p3.8xlarge's 12.24 $/h quoted in %s section 6 (p3 sizes scale linearly)" % md,
        None, None, 32, "measured: %s reached 32 p3 nodes" % rel(shared, p3_path))
    aws("us-west-2", "p3.2xlarge", "V100", 1, 3.06, "estimated: as us-east-1 (quarter of p3.8xlarge)",
        None, None, 32, "estimated: as us-east-1")
    aws("us-east-1", "p4d.24xlarge", "A100", 8, 21.958, q6, 8.00, q6, 4, cap8)
    aws("us-east-2", "p4d.24xlarge", "A100", 8, 21.958, q6, 6.10, q6, 4, cap8)
    aws("us-east-1", "p5.48xlarge", "H100", 8, 55.04, q6, 20.2, q6 + "; 2 of 6 AZs at on-demand price", 2, cap8)
    aws("us-east-2", "p5.48xlarge", "H100", 8, 55.04, q6, 11.56, q6, 4, cap8)
    aws("us-west-2", "p5.48xlarge", "H100", 8, 55.04, q6, 12.98, q6, 4, cap8)

    # --- GCP.  Prices measured (Cyclenerd, 2026-07-30, whole VM).  GCP
    # publishes no interruption bucket: CALM_BUCKET_BY_GPU (estimated).
    def gce(region, zone, mtype, gpu, n, cap, cap_src, od=None, spot=None, psrc=None):
        if od is None:
            r = gcp[(mtype, region)]
            od, spot = rd(float(r["hour"]), 4), rd(float(r["hour_spot"]), 4)
            psrc = "measured: %s, %s %s (2026-07-30)" % (rel(shared, gcp_path), mtype, region)
            osrc = ssrc = psrc
        else:
            osrc = ssrc = psrc
        b = CALM_BUCKET_BY_GPU[gpu]
        rows.append(dict(provider="gce", region=region, zone=zone, machine=mtype, gpu=gpu, n=n,
                         od=od, od_src=osrc, spot=spot, spot_src=ssrc, bucket=b,
                         bucket_src="estimated: GCP publishes no interruption rate; AWS bucket %s typical of %s"
                                    % (BUCKET_LABEL[b], gpu),
                         cap=cap, cap_src=cap_src, notes=None))

    gce("us-central1", "us-central1-a", "a2-highgpu-1g", "A100", 1, 16, cap1)
    gce("us-east1", "us-east1-b", "a2-highgpu-1g", "A100", 1, 64,
        "measured: %s held a group of %d (target 64)" % (rel(shared, a100_path), a100_n))
    gce("europe-west4", "europe-west4-a", "a2-highgpu-1g", "A100", 1, 16, cap1)
    gce("us-central1", "us-central1-a", "a3-highgpu-1g", "H100", 1, 8, cap1)
    gce("us-east4", "us-east4-a", "a3-highgpu-1g", "H100", 1, 8, cap1)
    gce("us-east4", "us-east4-a", "a3-highgpu-8g", "H100", 8, 2, cap8)
    gce("us-central1", "us-central1-a", "g2-standard-4", "L4", 1, 32, cap1)
    gce("us-east4", "us-east4-a", "g2-standard-4", "L4", 1, 32, cap1)
    # T4 and V100 attach to n1 VMs and are not in the Cyclenerd extract.
    # ESTIMATED from GCE's public price list as remembered by the author (not
    # checked against a data file): n1-standard-8 with 1 x V100 about 2.86 $/h
    # on-demand (2.48 GPU + 0.38 VM) and about 1.0 $/h Spot; n1-standard-4
    # with 1 x T4 about 0.54 $/h on-demand (0.35 + 0.19) and about 0.18 $/h
    # Spot.  Treat them as rough.
    gce("us-east1", "us-east1-c", "n1-standard-8+v100", "V100", 1, 80,
        "measured: %s held a group of %d (target 80)" % (rel(shared, v100_path), v100_n),
        od=2.86, spot=1.0, psrc="estimated: GCE list price as remembered (V100 2.48 + n1-standard-8 0.38 $/h; "
        "Spot about 1.0 $/h); no shared data file has n1 GPU prices")
    gce("us-central1", "us-central1-b", "n1-standard-4+t4", "T4", 1, 32, cap1,
        od=0.54, spot=0.18, psrc="estimated: GCE list price as remembered (T4 0.35 + n1-standard-4 0.19 $/h; "
        "Spot about 0.18 $/h); no shared data file has n1 GPU prices")

    # --- Azure.  No data file at all: prices quoted from market-data.md
    # section 6 (SkyPilot catalog v6, undated, >= 2024); no interruption data
    # (CALM_BUCKET_BY_GPU, estimated).  Azure has no L4 size; the H100 NVL
    # size has no spot price in that catalog, so it is on-demand only.
    q6az = "quoted: %s section 6 (SkyPilot catalog v6, undated, >= 2024; no licence, number only)" % md

    def az(mtype, gpu, n, od, spot, cap):
        b = CALM_BUCKET_BY_GPU[gpu]
        rows.append(dict(provider="azure", region="eastus", zone="eastus-1", machine=mtype, gpu=gpu, n=n,
                         od=od, od_src=q6az, spot=spot, spot_src=q6az, bucket=b,
                         bucket_src="estimated: Azure publishes eviction rates only in its portal; AWS bucket %s "
                                    "typical of %s" % (BUCKET_LABEL[b], gpu),
                         cap=cap, cap_src=cap1 if n == 1 else cap8,
                         notes="zone is a label: the catalog prices the region"))

    az("Standard_NC4as_T4_v3", "T4", 1, 0.526, 0.063, 32)
    az("Standard_NC6s_v3", "V100", 1, 3.06, 0.398, 16)
    az("Standard_NC24ads_A100_v4", "A100", 1, 3.673, 0.444, 16)
    az("Standard_NC40ads_H100_v5", "H100", 1, 6.98, None, 8)

    notice = {"aws": (120, "documented: EC2 Spot two-minute interruption notice"),
              "gce": (30, "documented: GCE Spot/preemptible 30 s ACPI shutdown notice"),
              "azure": (30, "documented: Azure Scheduled Events give at least 30 s before eviction")}
    billing = {
        "aws": {"unit": "per_second", "minimum_seconds": 60,
                "source": "documented: EC2 Linux per-second billing with a 60 s minimum"},
        "gce": {"unit": "per_second", "minimum_seconds": 60,
                "source": "documented: GCE per-second billing with a 1-minute minimum"},
        # ESTIMATED: Azure's price pages quote per-hour rates and bill by the
        # minute in practice; a 60 s minimum is assumed.
        "azure": {"unit": "per_minute", "minimum_seconds": 60,
                  "source": "estimated: Azure billed per started minute"},
    }

    offers = []
    for r in rows:
        pv, g, n = r["provider"], r["gpu"], r["n"]
        gname = g.lower() + ("x%d" % n if n > 1 else "")
        ips, ips_src = speed(g)
        for transient in (True, False):
            if transient and r["spot"] is None:
                continue
            o = {
                "id": "%s/%s/%s/%s" % (pv, r["zone"], gname, "spot" if transient else "on-demand"),
                "provider": pv,
                "region": r["region"],
                "zone": r["zone"],
                "machine_type": r["machine"],
                "gpu": g,
                "gpu_count": n,
                "transient": transient,
                "usd_per_hour": r["spot"] if transient else r["od"],
                "price_source": r["spot_src"] if transient else r["od_src"],
                "images_per_sec": ips,
                "speed_source": ips_src,
                "capacity": {"servers": r["cap"], "source": r["cap_src"]},
                "notice_seconds": notice[pv][0],
                "notice_source": notice[pv][1],
                "billing": billing[pv],
                "boot": boot,
            }
            if r["notes"]:
                o["notes"] = r["notes"]
            if transient:
                b = r["bucket"]
                srate, ssrc = storm_rates.get((pv, g), (STORM_DEFAULT, "estimated: no trace for %s on %s; "
                                                        "market-data.md section 7 default" % (g, pv)))
                share = STORM_SHARE[b]
                o["revocation"] = {
                    "model": "markov",
                    "calm": {"per_hour": sig(lam(BUCKET_P[b])),
                             "mean_hours": rd(STORM_HOURS * (1 - share) / share, 3),
                             "source": r["bucket_src"] + "; rate -ln(1-p)/730 h with p = %.3f (market-data.md "
                                       "section 7); dwell estimated from a %.0f %% storm share" % (BUCKET_P[b], share * 100)},
                    "storm": {"per_hour": srate, "mean_hours": STORM_HOURS,
                              "source": ssrc + "; dwell estimated (section 7: storms last about 1-3 h)"},
                    "batch": batches.get((pv, g), aws_batch_all if pv == "aws" else gcp_batch_all),
                }
            offers.append(o)

    return {
        "format": "spotdeck-catalog",
        "version": 1,
        "name": "market-2026",
        "description": "Today's GPU spot market: A100, H100, L4, T4 and V100 on AWS, GCP and Azure. Prices from "
                       "2025-2026 snapshots; revocations as a calm/storm process per pool (AWS Advisor buckets as "
                       "calm rates, measured 2021 preemption traces as storm rates). A scenario, not a forecast: "
                       "read each source string.",
        "time_base": {
            "period": "prices 2025-06 to 2026-07; revocation traces 2021-12",
            "hour_of_day_clock": "no time-of-day data; revocation hazard does not vary with the clock",
            "lifetime_origin": "request granted",
        },
        "sources": [
            {"name": "alexei-led/spotinfo @ 05e933139449b888c78795b28af8e9370429a031 (AWS Spot Advisor feed)",
             "licence": "LICENSE-Apache-2.0.txt"},
            {"name": "Cyclenerd/google-cloud-pricing-cost-calculator @ fd66b26ff84fee5cdd94f341ea89206e76c06b99",
             "licence": "LICENSE-Apache-2.0.txt"},
            {"name": "uclasystem/bamboo @ 80809293289419d40a870b4a9ccb8df0082ce3fb (traces)",
             "licence": "LICENSE-MIT-bamboo.txt"},
            {"name": "cake-lab/CM-DARE @ 263b7f14951c0645cacdfeadbef8546d4a742632 (V100 speed, start-up times)",
             "licence": "LICENSE-Apache-2.0.txt"},
            {"name": "shared/reference/market-data.md (numbers quoted from unlicensed SkyPilot catalogs)",
             "licence": "none: facts only"},
        ],
        "offers": offers,
    }


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared", nargs="?", default=os.path.join(REPO, "..", "shared", "data"),
                    help="the shared data folder (default: ../shared/data from the repository root)")
    ap.add_argument("--out", default=os.path.join(REPO, "data"), help="output folder (default: data/)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    args = ap.parse_args()
    shared = os.path.normpath(args.shared)
    if not os.path.isdir(os.path.join(shared, "seeds")) or not os.path.isdir(os.path.join(shared, "market")):
        sys.exit("build-catalog: %s: not the shared data folder (needs seeds/ and market/)" % shared)

    files = {
        "gce-2019.json": jdump(build_gce_2019(shared)) + "\n",
        "gce-2019-02.json": jdump(build_gce_2019_02(shared)) + "\n",
        "market-2026.json": jdump(build_market_2026(shared)) + "\n",
    }
    with open(os.path.join(shared, "seeds/LICENSE-Apache-2.0.txt")) as f:
        files["LICENSE-Apache-2.0.txt"] = f.read()
    with open(os.path.join(shared, "market/bamboo-traces/LICENSE")) as f:
        files["LICENSE-MIT-bamboo.txt"] = f.read()

    bad = 0
    for name, text in files.items():
        path = os.path.join(args.out, name)
        if args.check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print("build-catalog: %s differs from what the shared data gives" % path, file=sys.stderr)
                bad = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    sys.exit(bad)


if __name__ == "__main__":
    main()
