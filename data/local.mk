# data/: market catalogs for the simulated market, built from ../shared/data
# by tools/build-catalog.py and committed, so the build never needs the
# shared folder.  The licence files travel (and install) with the catalogs,
# because the catalogs are derived from Apache-2.0 and MIT data.
dist_pkgdata_DATA += data/gce-2019.json data/gce-2019-02.json data/market-2026.json data/scaling-2019.json
dist_pkgdata_DATA += data/LICENSE-Apache-2.0.txt data/LICENSE-MIT-bamboo.txt
EXTRA_DIST += data/README.md tools/build-catalog.py tools/build-scaling.py
# The seeds' measurements the calibration test compares the catalogs with
# (tests/market/test-market-calibration.c): copies of ../shared/data/seeds/derived/,
# Apache-2.0 like the rest (data/LICENSE-Apache-2.0.txt).  Shipped, not
# installed.
EXTRA_DIST += data/cmdare_lifetime_cdf_by_region.csv data/cmdare_revocations_by_hour_of_day.csv
