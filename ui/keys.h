/* ui/keys.h - the key table: one array of entries (as tmux's cmd_entry)
 * that drives key dispatch, the help overlay and the status-line hints. */
#ifndef SD_UI_KEYS_H
#define SD_UI_KEYS_H

struct sd_screen;
struct sd_view;

/* Where an entry applies: the main screen or one of the dialogs. */
enum sd_key_ctx {
	SD_CTX_MAIN = 1 << 0,
	SD_CTX_PICKER = 1 << 1,
	SD_CTX_CONFIRM = 1 << 2,
	SD_CTX_HELP = 1 << 3,
};

#define SD_KEY_ANY (-1)         /* any key without an entry of its own */

struct sd_key {
	int key;                /* curses key code (a character, KEY_UP, ...) or SD_KEY_ANY */
	unsigned ctx;           /* SD_CTX_* where it applies */
	const char *label;      /* as the help shows it ("j Down"); NULL: alias of the entry above */
	const char *help;       /* what it does, for the help overlay */
	const char *hint;       /* status-line word ("add"), NULL none */
	const char *hint_paused;/* the word while the run is paused, NULL same */
	int hint_prio;          /* the status line drops larger numbers first */
	/* Runs the key; returns SD_KEY_* flags (ui/pane.h). */
	int (*run)(struct sd_screen *s, int key);
};

extern const struct sd_key sd_keys[];
extern const int sd_nkeys;

/* The entry for KEY in context CTX (its own, else the context's
 * SD_KEY_ANY entry), or NULL. */
const struct sd_key *sd_key_find(unsigned ctx, int key);

/* Whether the key does anything with this view: the what-if dialog (w)
 * replays the simulated market, so it is not offered for real machines
 * (a market of offers that is not simulated: ssh hosts). */
int sd_key_offered(const struct sd_key *k, const struct sd_view *v);
int sd_whatif_offered(const struct sd_view *v);

/* The status-line label of a key ("a", "?", "Tab"). */
const char *sd_key_hint_label(const struct sd_key *k);

#endif
