/* ui/keys.c - the key table.  Adding a key is adding a row here: dispatch,
 * the help overlay and the status-line hints all read this array. */
#include "config.h"

#include <stddef.h>

#include "ui/keys.h"
#include "ui/screen.h"
#include "ui/tui.h"

#define CTRL(c) ((c) & 0x1f)
#define ESC 27

const struct sd_key sd_keys[] = {
	/* The main screen: commands first (the status line's order). */
	{ 'a', SD_CTX_MAIN, "a", "add a server (offer picker)", "add", NULL, 1, sd_act_add },
	{ 's', SD_CTX_MAIN, "s", "swap the selected server", "swap", NULL, 4, sd_act_swap },
	{ 'd', SD_CTX_MAIN, "d", "drop the selected server", "drop", NULL, 5, sd_act_drop },
	{ 'c', SD_CTX_MAIN, "c", "checkpoint now", "ckpt", NULL, 7, sd_act_checkpoint },
	{ 'p', SD_CTX_MAIN, "p", "pause or resume training", "pause", "resume", 6, sd_act_pause },
	{ 'r', SD_CTX_MAIN, "r", "accept the suggested replacement", NULL, NULL, 0, sd_act_accept },
	{ 'A', SD_CTX_MAIN, "A", "autopilot: hold its announced action, else switch it on or off", NULL, NULL, 0,
	  sd_act_autopilot },
	{ 't', SD_CTX_MAIN, "t", "next colour theme", "theme", NULL, 8, sd_act_theme },
	{ 'w', SD_CTX_MAIN, "w", "what if: plan the rest on another cluster", "what-if", NULL, 9, sd_act_whatif },
	{ '?', SD_CTX_MAIN, "?", "this help", "help", NULL, 2, sd_act_help },
	{ KEY_F(1), SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_help },
	{ 'q', SD_CTX_MAIN, "q", "quit: end the run (asks while servers run)", "quit", NULL, 3, sd_act_quit },
	{ 'x', SD_CTX_MAIN, "x", "detach: leave the run going (spotdeck attach)", "detach", NULL, 10, sd_act_detach },
	/* Moving around. */
	{ '\t', SD_CTX_MAIN, "Tab", "focus the next pane", NULL, NULL, 0, sd_act_focus_next },
	{ KEY_RIGHT, SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_focus_next },
	{ 'l', SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_focus_next },
	{ KEY_BTAB, SD_CTX_MAIN, "S-Tab", "focus the previous pane", NULL, NULL, 0, sd_act_focus_prev },
	{ KEY_LEFT, SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_focus_prev },
	{ 'h', SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_focus_prev },
	{ 'k', SD_CTX_MAIN | SD_CTX_PICKER, "k Up", "previous row", NULL, NULL, 0, sd_act_nav },
	{ KEY_UP, SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ 'j', SD_CTX_MAIN | SD_CTX_PICKER, "j Down", "next row", NULL, NULL, 0, sd_act_nav },
	{ KEY_DOWN, SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ KEY_PPAGE, SD_CTX_MAIN | SD_CTX_PICKER, "PgUp PgDn", "a page up or down", NULL, NULL, 0, sd_act_nav },
	{ KEY_NPAGE, SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ KEY_HOME, SD_CTX_MAIN | SD_CTX_PICKER, "g G", "first or last row", NULL, NULL, 0, sd_act_nav },
	{ 'g', SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ KEY_END, SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ 'G', SD_CTX_MAIN | SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_nav },
	{ '\n', SD_CTX_MAIN, "Enter", "picker for the selected row", NULL, NULL, 0, sd_act_enter },
	{ '\r', SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_enter },
	{ KEY_ENTER, SD_CTX_MAIN, NULL, NULL, NULL, NULL, 0, sd_act_enter },
	{ ESC, SD_CTX_MAIN, "Esc", "clear the note and the highlight", NULL, NULL, 0, sd_act_escape },
	{ CTRL('l'), SD_CTX_MAIN | SD_CTX_PICKER | SD_CTX_CONFIRM | SD_CTX_HELP, "^L", "redraw the terminal", NULL, NULL, 0, sd_act_redraw },
	/* Pickers. */
	{ '\n', SD_CTX_PICKER, "Enter", "picker: take it", NULL, NULL, 0, sd_act_pick },
	{ '\r', SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_pick },
	{ KEY_ENTER, SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_pick },
	{ ESC, SD_CTX_PICKER, "Esc", "picker: cancel", NULL, NULL, 0, sd_act_cancel },
	{ 'q', SD_CTX_PICKER, NULL, NULL, NULL, NULL, 0, sd_act_cancel },
	/* Confirmations. */
	{ 'y', SD_CTX_CONFIRM, "y Enter", "dialog: yes", NULL, NULL, 0, sd_act_confirm },
	{ 'Y', SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_confirm },
	{ '\n', SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_confirm },
	{ '\r', SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_confirm },
	{ KEY_ENTER, SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_confirm },
	{ 'n', SD_CTX_CONFIRM, "n Esc", "dialog: no", NULL, NULL, 0, sd_act_cancel },
	{ 'N', SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_cancel },
	{ ESC, SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_cancel },
	{ 'q', SD_CTX_CONFIRM, NULL, NULL, NULL, NULL, 0, sd_act_cancel },
	/* Help: any key closes it. */
	{ SD_KEY_ANY, SD_CTX_HELP, "any key", "help: close", NULL, NULL, 0, sd_act_cancel },
};

const int sd_nkeys = (int)(sizeof sd_keys / sizeof sd_keys[0]);

const struct sd_key *sd_key_find(unsigned ctx, int key)
{
	const struct sd_key *any = NULL;
	for (int i = 0; i < sd_nkeys; i++) {
		if (!(sd_keys[i].ctx & ctx))
			continue;
		if (sd_keys[i].key == key)
			return &sd_keys[i];
		if (sd_keys[i].key == SD_KEY_ANY && !any)
			any = &sd_keys[i];
	}
	return any;
}

int sd_whatif_offered(const struct sd_view *v)
{
	return v->simulated || v->noffers == 0;
}

int sd_key_offered(const struct sd_key *k, const struct sd_view *v)
{
	return k->run != sd_act_whatif || sd_whatif_offered(v);
}

const char *sd_key_hint_label(const struct sd_key *k)
{
	return k->label ? k->label : "";
}
