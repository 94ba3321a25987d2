/* ui/format.h - short, fixed-width renderings of the view's numbers.
 *
 * Each writes a NUL-terminated string into BUF (N bytes, at least 16) and
 * returns BUF.  Values that are negative where that means "unknown", NaN or
 * infinite render as "-": the view may carry any double and the screen must
 * never show "nan" or a 20-digit number. */
#ifndef SD_UI_FORMAT_H
#define SD_UI_FORMAT_H

#include <stddef.h>

/* Seconds as "42s", "12m05s", "3h02m", "2d03h". */
char *sd_fmt_duration(char *buf, size_t n, double s);

/* Seconds since the run started as a clock: "12:34", "1:02:03", "2d03:04". */
char *sd_fmt_clock(char *buf, size_t n, double s);

/* Images/s: "812", "9876", "12.3k", "1.23M". */
char *sd_fmt_rate(char *buf, size_t n, double v);

/* USD: "$0.74", "$12.30", "$1234", "$12.3k". */
char *sd_fmt_usd(char *buf, size_t n, double v);

/* A money total that may be incomplete: sd_fmt_usd's rendering, then '*'
 * when ESTIMATED (part of it at estimated prices) and "+?" when UNKNOWN (it
 * leaves out servers whose cost is unknown): "$0.74", "$0.74*", "$0.74+?",
 * "$0.74*+?"; just "?" when V is 0 and UNKNOWN (nothing known to add to). */
char *sd_fmt_usd_part(char *buf, size_t n, double v, int estimated, int unknown);

/* A plain number with DIGITS decimals, "-" when not finite. */
char *sd_fmt_num(char *buf, size_t n, double v, int digits);

/* A fraction 0..1 as a percentage: "12%", "0.5%", "85.2%" (DIGITS decimals
 * above 10 %). */
char *sd_fmt_pct(char *buf, size_t n, double frac, int digits);

#endif
