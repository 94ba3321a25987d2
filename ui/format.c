/* ui/format.c - number renderings for the panes. */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "ui/format.h"

static char *dash(char *buf, size_t n)
{
	snprintf(buf, n, "-");
	return buf;
}

char *sd_fmt_duration(char *buf, size_t n, double s)
{
	if (!isfinite(s) || s < 0 || s > 1e9)
		return dash(buf, n);
	long t = (long)(s + 0.5);
	if (t < 60)
		snprintf(buf, n, "%lds", t);
	else if (t < 3600)
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
	else
		snprintf(buf, n, "%ldd%02ldh", t / 86400, (t % 86400) / 3600);
	return buf;
}

char *sd_fmt_clock(char *buf, size_t n, double s)
{
	if (!isfinite(s) || s < 0 || s > 1e9)
		return dash(buf, n);
	long t = (long)s;
	if (t < 3600)
		snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t % 3600) / 60, t % 60);
	else
		snprintf(buf, n, "%ldd%02ld:%02ld", t / 86400, (t % 86400) / 3600, (t % 3600) / 60);
	return buf;
}

char *sd_fmt_rate(char *buf, size_t n, double v)
{
	if (!isfinite(v) || v < 0)
		return dash(buf, n);
	if (v < 10000)
		snprintf(buf, n, "%.0f", v);
	else if (v < 99950)
		snprintf(buf, n, "%.1fk", v / 1e3);
	else if (v < 999500)   /* "123k": at most 5 characters, as "12.3k" */
		snprintf(buf, n, "%.0fk", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, n, "%.2fM", v / 1e6);
	else
		snprintf(buf, n, ">1G");
	return buf;
}

char *sd_fmt_usd(char *buf, size_t n, double v)
{
	if (!isfinite(v) || v < 0)
		return dash(buf, n);
	if (v < 1000)
		snprintf(buf, n, "$%.2f", v);
	else if (v < 10000)
		snprintf(buf, n, "$%.0f", v);
	else if (v < 1e7)
		snprintf(buf, n, "$%.1fk", v / 1e3);
	else
		snprintf(buf, n, ">$10M");
	return buf;
}

char *sd_fmt_usd_part(char *buf, size_t n, double v, int estimated, int unknown)
{
	if (unknown && (!isfinite(v) || v <= 0)) {
		snprintf(buf, n, "?");
		return buf;
	}
	char tmp[32];
	sd_fmt_usd(tmp, sizeof tmp, v);
	snprintf(buf, n, "%s%s%s", tmp, estimated && tmp[0] != '-' ? "*" : "", unknown ? "+?" : "");
	return buf;
}

char *sd_fmt_num(char *buf, size_t n, double v, int digits)
{
	if (!isfinite(v) || fabs(v) >= 1e9)
		return dash(buf, n);
	snprintf(buf, n, "%.*f", digits, v);
	return buf;
}

char *sd_fmt_pct(char *buf, size_t n, double frac, int digits)
{
	if (!isfinite(frac) || frac < 0 || frac > 1.0001)
		return dash(buf, n);
	double p = frac * 100;
	if (p > 0 && p < 1)
		snprintf(buf, n, "%.1f%%", p);
	else if (p < 10)
		snprintf(buf, n, "%.0f%%", p);
	else
		snprintf(buf, n, "%.*f%%", digits, p);
	return buf;
}
