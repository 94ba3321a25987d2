/* src/controller/store.c - the rendezvous key-value store the workers'
 * collectives set up through (Gloo's store). */
#include "config.h"

#include "src/controller/internal.h"

struct kv *ctl_kv_find(struct sd_controller *c, const char *key)
{
	for (struct kv *e = c->kv; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

void ctl_kv_reply(struct conn *k, long long id, const char *key, const char *value)
{
	cJSON *m = sd_msg_new(SD_MSG_KV_VALUE);
	cJSON_AddNumberToObject(m, "id", (double)id);
	cJSON_AddStringToObject(m, "key", key);
	cJSON_AddStringToObject(m, "value", value);
	ctl_conn_send(k, m);
}

void ctl_kv_set(struct sd_controller *c, const char *key, const char *value)
{
	struct kv *e = ctl_kv_find(c, key);
	if (!e) {
		e = sd_calloc(1, sizeof *e);
		e->key = strdup(key);
		e->next = c->kv;
		c->kv = e;
	}
	free(e->value);
	e->value = strdup(value);
	if (!e->key || !e->value)
		sd_oom();
	struct pending_get **gp = &c->gets;
	while (*gp) {
		struct pending_get *g = *gp;
		if (!strcmp(g->key, key)) {
			ctl_kv_reply(g->conn, g->id, key, value);
			*gp = g->next;
			free(g->key);
			free(g);
		} else {
			gp = &g->next;
		}
	}
}

/* Drops the keys of generations older than keep, which nobody reads again. */
void ctl_kv_prune(struct sd_controller *c, long keep)
{
	struct kv **pp = &c->kv;
	while (*pp) {
		long g = -1;
		if (sscanf((*pp)->key, "gen/%ld/", &g) == 1 && g < keep) {
			struct kv *e = *pp;
			*pp = e->next;
			free(e->key);
			free(e->value);
			free(e);
		} else {
			pp = &(*pp)->next;
		}
	}
}
