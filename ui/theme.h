/* ui/theme.h - colour themes: data files that map meanings to colours.
 *
 * A theme file is UTF-8 text of `key = value` lines; `#` starts a comment
 * (whole line or after the value).  Keys are meanings (the SD_STYLE_* names
 * below: "ok", "crit", "spot", "selection", ...), never colour numbers in
 * code.  A value is a list of words separated by blanks or commas:
 *
 *     [ATTR ...] [FG] [on BG] [ATTR ...]
 *
 *   colours    default, black, red, green, yellow, blue, magenta, cyan, white,
 *              bright-black (grey, gray), bright-red ... bright-white,
 *              0-255 or colorN (xterm 256-colour palette), #rrggbb (mapped to
 *              the nearest palette entry)
 *   attributes bold, dim, underline, reverse, standout, italic, normal
 *
 * e.g.  `selection = black on cyan, bold`   `crit = bold bright-red`
 *       `border = dim`  (attributes alone: the terminal's own colours)
 *
 * Keys a file leaves out keep the built-in default for that meaning.  This
 * module knows nothing of curses (so the parser can be fuzzed alone); the
 * screen turns styles into colour pairs and degrades colours the terminal
 * lacks.
 */
#ifndef SD_UI_THEME_H
#define SD_UI_THEME_H

#include <stddef.h>
#include <stdint.h>

/* Meanings, in the order of sd_style_names[]. */
enum sd_style {
	SD_STYLE_NORMAL,        /* pane text */
	SD_STYLE_BORDER,        /* pane frames */
	SD_STYLE_TITLE,         /* pane titles */
	SD_STYLE_FOCUS,         /* title and frame of the focused pane */
	SD_STYLE_HEADER,        /* the header lines */
	SD_STYLE_LABEL,         /* labels and column headings */
	SD_STYLE_DIM,           /* secondary text (released servers, units) */
	SD_STYLE_OK,            /* training, low risk */
	SD_STYLE_WARN,          /* booting, medium risk, suggestions */
	SD_STYLE_CRIT,          /* notice, revoked, failed, high risk, errors */
	SD_STYLE_SPOT,          /* transient (spot) servers and offers */
	SD_STYLE_ONDEMAND,      /* on-demand servers and offers */
	SD_STYLE_SELECTION,     /* the selected row in the focused pane */
	SD_STYLE_CHART,         /* throughput bars and sparklines */
	SD_STYLE_CHART_ALT,     /* loss and accuracy charts */
	SD_STYLE_MARKER,        /* revocation markers on charts */
	SD_STYLE_EMULATED,      /* emulated GPU speed figures ("~") */
	SD_STYLE_SIMULATED,     /* the "SIMULATED market" label */
	SD_STYLE_STATUS,        /* the status line */
	SD_STYLE_KEY,           /* key letters in hints and help */
	SD_STYLE_DIALOG,        /* pickers, confirmations, help */
	SD_STYLE_HIGHLIGHT,     /* a server row just revoked */
	SD_STYLE_COUNT
};

/* Attribute bits (the screen maps them to curses attributes). */
enum {
	SD_ATTR_BOLD = 1 << 0,
	SD_ATTR_DIM = 1 << 1,
	SD_ATTR_UNDERLINE = 1 << 2,
	SD_ATTR_REVERSE = 1 << 3,
	SD_ATTR_STANDOUT = 1 << 4,
	SD_ATTR_ITALIC = 1 << 5,
};

#define SD_COLOR_DEFAULT (-1)   /* the terminal's own foreground/background */

struct sd_theme_style {
	int16_t fg, bg;             /* SD_COLOR_DEFAULT or 0..255 (xterm palette) */
	uint16_t attrs;             /* SD_ATTR_* */
	uint16_t line;              /* line that set it, 0 = built-in default */
};

struct sd_theme {
	char name[64];              /* file name without ".theme", or "default" */
	char file[512];             /* where it was read, "" for built-ins */
	struct sd_theme_style st[SD_STYLE_COUNT];
};

#define SD_THEME_MAX_BYTES (64 * 1024)
#define SD_THEME_MAX_LINE 512

/* Key names, indexed by enum sd_style ("ondemand" is also accepted as
 * "on-demand"). */
extern const char *const sd_style_names[SD_STYLE_COUNT];

/* Fills *t with the built-in default theme (mono != 0: attributes only, the
 * NO_COLOR look). */
void sd_theme_builtin(struct sd_theme *t, int mono);

/* Parses LEN bytes of theme text over the built-in defaults.  FILE names the
 * source in messages.  Returns 0, or -1 with *why (caller frees) as one line
 * "FILE:LINE: key 'KEY': what is wrong" (or "FILE:LINE: what" when the line
 * has no key); *t is then unspecified. */
int sd_theme_parse(struct sd_theme *t, const char *text, size_t len, const char *file, char **why);

/* Finds and parses theme NAME: a path when it contains '/' or ends in
 * ".theme", else NAME.theme in each of the NDIRS directories in turn (NULL
 * entries skipped).  Returns 0, or -1 with *why (caller frees). */
int sd_theme_load(struct sd_theme *t, const char *name, const char *const *dirs, int ndirs, char **why);

/* Lists the theme names found in DIRS (*.theme, first directory wins,
 * sorted, "default" always present) into names[MAX][64]; returns the count. */
int sd_theme_list(const char *const *dirs, int ndirs, char (*names)[64], int max);

/* RGB of palette entry I (0..255) of the xterm 256-colour palette. */
void sd_theme_palette_rgb(int i, int *r, int *g, int *b);

/* The palette entry among 0..NCOLORS-1 nearest to palette entry I (for
 * terminals with fewer colours than the theme asks for). */
int sd_theme_nearest(int i, int ncolors);

#endif
