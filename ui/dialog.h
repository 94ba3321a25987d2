/* ui/dialog.h - the one dialog that can be open over the panes: an offer
 * picker, a yes/no confirmation or the help overlay.  The screen owns it;
 * its keys come from the key table's SD_CTX_PICKER/CONFIRM/HELP rows. */
#ifndef SD_UI_DIALOG_H
#define SD_UI_DIALOG_H

#include "ui/pane.h"

enum sd_modal_kind { SD_MODAL_NONE, SD_MODAL_PICKER, SD_MODAL_CONFIRM, SD_MODAL_HELP, SD_MODAL_WHATIF };

struct sd_modal {
	enum sd_modal_kind kind;
	WINDOW *win;
	int h, w;
	int dirty;
	char title[128];
	char prefix[128];       /* picker: the command before the offer id ("add ", "swap s3 ") */
	char verb[16];          /* picker: what Enter does ("add", "swap") */
	struct sd_list list;    /* picker: the selected offer; what-if: the selected row */
	char question[512];     /* confirm */
	char command[1024];     /* confirm: the command lines y runs, one per line */
	char command_no[64];    /* confirm: the command n runs ("": n only closes it; when
	                         * set, Esc and q do not close it: it needs an answer) */
	char yes[24], no[24];   /* confirm: what y and n do, in the footer ("": yes, no) */
	unsigned long whatif_version;   /* what-if: the rows drawn */
};

/* (Re)creates the dialog's window centred in a LINES x COLS screen. */
void sd_modal_place(struct sd_modal *m, int lines, int cols, const struct sd_view *v, const struct sd_glyphs *g);

/* Draws the open dialog into its window (no refresh). */
void sd_modal_draw(struct sd_modal *m, const struct sd_view *v, const struct sd_draw *d);

/* Closes the dialog and deletes its window. */
void sd_modal_close(struct sd_modal *m);

/* The key-table context of the open dialog (SD_CTX_MAIN when none). */
unsigned sd_modal_ctx(const struct sd_modal *m);

/* The what-if dialog (ui/dialog-whatif.c): its size for view V, its
 * drawing, its rows and their ids (labels) for the selection. */
void sd_whatif_size(const struct sd_view *v, int *h, int *w);
void sd_whatif_draw(struct sd_modal *m, const struct sd_view *v, const struct sd_draw *d);
int sd_whatif_rows(const struct sd_view *v);
const char *sd_whatif_row_id(const struct sd_view *v, int i);

#endif
