/* ui/tui.h - curses for ui/: the wide-character API, glyph sets (UTF-8 or
 * ASCII), text output that can never break the layout, table columns.
 *
 * Everything here draws into a WINDOW and never refreshes: the screen
 * (ui/screen.c) alone calls wnoutrefresh/doupdate. */
#ifndef SD_UI_TUI_H
#define SD_UI_TUI_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>
#include <stddef.h>
#include <stdint.h>

/* Glyphs that differ between UTF-8 and ASCII terminals. */
enum sd_glyph {
	SD_G_BAR1, SD_G_BAR2, SD_G_BAR3, SD_G_BAR4,   /* ▁▂▃▄  1/8 .. 4/8 of a cell */
	SD_G_BAR5, SD_G_BAR6, SD_G_BAR7, SD_G_BAR8,   /* ▅▆▇█  5/8 .. full */
	SD_G_MARK,              /* ▲ revocation marker */
	SD_G_DOT,               /* · separator */
	SD_G_ELLIPSIS,          /* … truncated text */
	SD_G_SELECT,            /* ▶ selected row in an unfocused list */
	SD_G_COUNT
};

struct sd_glyphs {
	int utf8;
	cchar_t cc[SD_G_COUNT];     /* UTF-8: the glyph, no attributes of its own */
	char ascii[SD_G_COUNT];     /* ASCII fallback */
	const char *str[SD_G_COUNT];/* as a string in the active encoding */
	cchar_t box[8];             /* UTF-8 frame: ls rs ts bs tl tr bl br */
};

/* Fills *g for a UTF-8 (utf8 != 0) or ASCII terminal. */
void sd_glyphs_init(struct sd_glyphs *g, int utf8);

/* Draws glyph ID at the cursor with the window's current attributes. */
void sd_glyph_put(WINDOW *w, const struct sd_glyphs *g, enum sd_glyph id);

/* Draws a frame around W with the window's current attributes. */
void sd_frame(WINDOW *w, const struct sd_glyphs *g);

/* Writes S at (Y, X) in at most MAXW columns with the window's current
 * attributes and returns the columns used.  Control characters and, on an
 * ASCII terminal, non-ASCII bytes become '?'; invalid UTF-8 too; text that
 * does not fit ends in an ellipsis.  Never writes past MAXW, so a pane's
 * strings cannot spill into its neighbour. */
int sd_put(WINDOW *w, const struct sd_glyphs *g, int y, int x, const char *s, int maxw);

/* As sd_put, right-aligned in a field of W columns starting at X. */
int sd_put_right(WINDOW *win, const struct sd_glyphs *g, int y, int x, const char *s, int w);

/* Display width of S as sd_put would draw it (without truncation). */
int sd_width(const struct sd_glyphs *g, const char *s);

/* N blanks at (Y, X). */
void sd_blank(WINDOW *w, int y, int x, int n);

/* A table column: title, width, drop priority (larger drops first when
 * the table is too wide; 0 never drops), flex (takes a share of any spare
 * width), right-aligned, want (a flex column's comfortable width: columns
 * that yield are dropped to get it), yields. */
struct sd_col {
	const char *title;
	short width;
	short prio;
	short flex;
	short right;
	short want;
	short yields;
};

/* Lays N columns into WIDTH cells with one blank between them: ws[i] is a
 * column's width (0 = dropped), xs[i] its offset.  Columns drop by
 * priority until the rest fits; then yielding columns drop (by priority)
 * while a flex column is short of its want.  Returns the width used. */
int sd_cols_fit(const struct sd_col *c, int n, int width, int *xs, int *ws);

/* Draws the column titles at row Y from offset X. */
void sd_cols_title(WINDOW *w, const struct sd_glyphs *g, int y, int x,
                   const struct sd_col *c, int n, const int *xs, const int *ws);

/* Draws S in column I of row Y (aligned as the column says). */
void sd_cols_cell(WINDOW *w, const struct sd_glyphs *g, int y, int x,
                  const struct sd_col *c, int i, const int *xs, const int *ws, const char *s);

/* 64-bit hash of N bytes continuing from H (start with SD_HASH_INIT):
 * signatures of what a pane shows, so it redraws only when they move. */
#define SD_HASH_INIT 0xcbf29ce484222325ull
uint64_t sd_hash(uint64_t h, const void *p, size_t n);

#endif
