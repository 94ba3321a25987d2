/* ui/pane.h - a pane: one rectangle of the cockpit drawn from the view.
 *
 * Each pane is an object whose behaviour is a const ops table defined at the
 * end of its ui/pane-*.c (as htop's Panel classes).  Panes never refresh the
 * terminal and never change the view: the screen (ui/screen.c) asks each
 * for a signature of what it would show, draws the panes whose signature
 * moved or that it marked dirty, then does one doupdate(). */
#ifndef SD_UI_PANE_H
#define SD_UI_PANE_H

#include <stdint.h>

#include "ui/theme.h"
#include "ui/tui.h"
#include "ui/view.h"

/* What key handlers return (bit flags, as htop's HandlerResult). */
enum {
	SD_KEY_HANDLED = 1 << 0,    /* the key meant something here */
	SD_KEY_REDRAW = 1 << 1,     /* something was marked dirty: render soon */
	SD_KEY_LAYOUT = 1 << 2,     /* the layout or theme changed: redraw all */
};

/* Moves within a list. */
enum sd_nav { SD_NAV_UP, SD_NAV_DOWN, SD_NAV_PGUP, SD_NAV_PGDN, SD_NAV_HOME, SD_NAV_END };

/* Everything a draw needs besides the view. */
struct sd_draw {
	attr_t a[SD_STYLE_COUNT];   /* curses attributes per meaning */
	const struct sd_glyphs *g;
	int focused;                /* this pane has the focus */
	const char *highlight;      /* server id just revoked, "" none */
	const char *note;           /* status line text of the UI's own, "" none */
	enum sd_style note_style;
	const char *theme;          /* theme name */
};

/* A selection that follows its row by id while the view's rows come and
 * go, plus the first visible row. */
struct sd_list {
	char sel_id[64];
	int sel;
	int top;
};

/* Row id I of a list in view V. */
typedef const char *(*sd_row_id_fn)(const struct sd_view *v, int i);

struct sd_pane;

struct sd_pane_ops {
	const char *name;           /* "cluster": titles, logs, tests */
	int focusable;              /* Tab stops here */
	/* Draws the whole pane into p->win (sized p->h x p->w, already erased). */
	void (*draw)(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d);
	/* Hash of the part of V the pane shows: a change redraws the pane. */
	uint64_t (*signature)(const struct sd_pane *p, const struct sd_view *v);
	/* Moves the selection; returns SD_KEY_* flags.  NULL: no rows. */
	int (*nav)(struct sd_pane *p, enum sd_nav how, const struct sd_view *v);
};

struct sd_pane {
	const struct sd_pane_ops *ops;
	WINDOW *win;
	int y, x, h, w;
	int dirty;
	uint64_t sig;
	struct sd_list list;
};

extern const struct sd_pane_ops sd_pane_header_ops;
extern const struct sd_pane_ops sd_pane_market_ops;
extern const struct sd_pane_ops sd_pane_cluster_ops;
extern const struct sd_pane_ops sd_pane_revocations_ops;
extern const struct sd_pane_ops sd_pane_charts_ops;
extern const struct sd_pane_ops sd_pane_status_ops;

/* Rows the header needs at WIDTH for view V (ui/pane-header.c). */
int sd_pane_header_rows(const struct sd_view *v, int width, const struct sd_glyphs *g);

/* ---- helpers shared by the panes (ui/pane.c) ---- */

/* Frame with TITLE at the top left and LEGEND (may be NULL) at the bottom
 * right, in the focus style when focused. */
void sd_pane_frame(struct sd_pane *p, const struct sd_draw *d, const char *title, const char *legend);

/* Index of the selected row among N (following sel_id), -1 when N is 0;
 * keeps top so that the selection is visible in ROWS rows. */
int sd_list_resolve(struct sd_list *l, const struct sd_view *v, int n, sd_row_id_fn id, int rows);

/* Applies HOW to the list (PAGE rows per page); returns SD_KEY_* flags. */
int sd_list_nav(struct sd_list *l, enum sd_nav how, const struct sd_view *v, int n, sd_row_id_fn id, int page);

/* Row ids of the view's lists. */
const char *sd_offer_id(const struct sd_view *v, int i);
const char *sd_server_id(const struct sd_view *v, int i);
const char *sd_revocation_id(const struct sd_view *v, int i);

/* Style of a server state ("training" ok, "notice" crit, ...). */
enum sd_style sd_state_style(const char *state);

/* Whether a server in STATE still costs money (not revoked/released/failed). */
int sd_state_live(const char *state);

/* The offer table (market pane and pickers): rows of V's offers from row Y
 * in the H x W area at X of WIN, column titles first, the list's selection
 * shown (in the selection style when SHOW_SEL).  Returns SD_OFFERS_ESTIMATED
 * when any price is an estimate ('*'), with SD_OFFERS_MODELLED when any
 * P(revoked) is the calibrated market's estimate for a real cloud ('~'),
 * with SD_OFFERS_SPEED_ESTIMATED when the speeds are the catalog's scaled
 * to the job's model ('~' before img/s). */
#define SD_OFFERS_ESTIMATED 1
#define SD_OFFERS_MODELLED 2
#define SD_OFFERS_SPEED_ESTIMATED 4
int sd_offer_table(WINDOW *win, int y, int x, int h, int w, const struct sd_view *v,
                   struct sd_list *l, const struct sd_draw *d, int show_sel);

/* The value at sample I (0 = oldest) of a series. */
static inline float sd_series_at(const struct sd_view_series *s, int i)
{
	return s->v[(s->head + i) % SD_VIEW_HIST];
}
static inline double sd_series_t(const struct sd_view_series *s, int i)
{
	return s->t[(s->head + i) % SD_VIEW_HIST];
}

/* Length of a series clamped to what the ring can hold (the view is
 * written by others; a bad len must not read outside the ring). */
static inline int sd_series_len(const struct sd_view_series *s)
{
	if (s->len <= 0 || s->head < 0)
		return 0;
	return s->len > SD_VIEW_HIST ? SD_VIEW_HIST : s->len;
}

#endif
