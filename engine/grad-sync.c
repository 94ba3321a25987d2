/* engine/grad-sync.c - bucketed gradient all-reduce on a thread of its own,
 * overlapped with backward.  See grad-sync.h. */
#include "engine/grad-sync.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

struct sd_grad_sync {
	struct sd_model *m;
	float *grads;
	size_t *begin, *end;    /* bucket k: grads[begin[k], end[k]) */
	int nbuckets;
	float *stage;           /* the last bucket and the extras */
	pthread_t thread;
	/* Under mu: */
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* launched grew, done grew, or stop */
	struct sd_comm *comm;
	int launched, done;     /* buckets of this step handed over, finished */
	int nextra;             /* extras staged with the last bucket */
	int rc;                 /* the step's first failed collective */
	char *why;
	int stop;
};

/* Thread: all-reduces buckets in order as they are handed over. */
static void *comm_thread(void *arg)
{
	struct sd_grad_sync *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->stop && s->done == s->launched)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop)
			break;
		int k = s->done;
		struct sd_comm *c = s->comm;
		size_t n = s->end[k] - s->begin[k];
		float *buf = s->grads + s->begin[k];
		if (k == s->nbuckets - 1 && s->nextra > 0) {
			buf = s->stage;
			n += (size_t)s->nextra;
		}
		pthread_mutex_unlock(&s->mu);
		char *why = NULL;
		/* After a failure the communicator is aborted: the later
		 * buckets fail at once, so every bucket is still "done". */
		int rc = sd_comm_allreduce_sum(c, buf, n, &why);
		pthread_mutex_lock(&s->mu);
		if (rc < 0 && s->rc == 0) {
			s->rc = rc;
			s->why = why;
		} else {
			free(why);
		}
		s->done++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Cuts the buffer at the ready points, from its end (grad-sync.h). */
static void plan_buckets(struct sd_grad_sync *s, size_t cap)
{
	int np;
	const size_t *pt = sd_model_grad_ready_points(s->m, &np);
	size_t total = sd_model_param_count(s->m);
	s->begin = sd_malloc(((size_t)np + 1) * sizeof *s->begin);
	s->end = sd_malloc(((size_t)np + 1) * sizeof *s->end);
	size_t end = total;
	for (int i = 0; i < np && cap > 0; i++) {
		if (end - pt[i] >= cap) {
			s->begin[s->nbuckets] = pt[i];
			s->end[s->nbuckets++] = end;
			end = pt[i];
		}
	}
	if (end > 0 || s->nbuckets == 0) {
		s->begin[s->nbuckets] = 0;
		s->end[s->nbuckets++] = end;
	}
}

int sd_grad_sync_create(struct sd_grad_sync **out, struct sd_model *m, size_t bucket_floats,
                        char **why)
{
	*out = NULL;
	struct sd_grad_sync *s = sd_calloc(1, sizeof *s);
	s->m = m;
	s->grads = sd_model_grads(m);
	plan_buckets(s, bucket_floats);
	size_t last = s->end[s->nbuckets - 1] - s->begin[s->nbuckets - 1];
	s->stage = sd_malloc((last + SD_GRAD_SYNC_EXTRA_MAX) * sizeof(float));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	int err = pthread_create(&s->thread, NULL, comm_thread, s);
	if (err != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s->begin);
		free(s->end);
		free(s->stage);
		free(s);
		return sd_why(why, "gradient all-reduce: cannot start its thread: %s", strerror(err));
	}
	*out = s;
	return 0;
}

void sd_grad_sync_destroy(struct sd_grad_sync *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	sd_model_on_grad_ready(s->m, NULL, NULL);
	free(s->why);
	free(s->begin);
	free(s->end);
	free(s->stage);
	free(s);
}

int sd_grad_sync_buckets(const struct sd_grad_sync *s)
{
	return s->nbuckets;
}

void sd_grad_sync_bucket(const struct sd_grad_sync *s, int k, size_t *begin, size_t *end)
{
	*begin = s->begin[k];
	*end = s->end[k];
}

/* Hands buckets up to (not including) `upto` to the thread. */
static void launch(struct sd_grad_sync *s, int upto)
{
	pthread_mutex_lock(&s->mu);
	if (upto > s->launched) {
		s->launched = upto;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
}

/* The model's grad-ready hook, on the training thread.  The last bucket
 * waits for finish, which stages the extras with it.  Only this thread
 * writes launched, so reading it here needs no lock. */
static void on_ready(void *ctx, size_t ready_from)
{
	struct sd_grad_sync *s = ctx;
	int k = s->launched;
	int upto = k;
	while (upto < s->nbuckets - 1 && s->begin[upto] >= ready_from)
		upto++;
	if (upto > k)
		launch(s, upto);
}

void sd_grad_sync_begin(struct sd_grad_sync *s, struct sd_comm *c)
{
	pthread_mutex_lock(&s->mu);
	s->comm = c;
	s->launched = s->done = 0;
	s->nextra = 0;
	s->rc = 0;
	free(s->why);
	s->why = NULL;
	pthread_mutex_unlock(&s->mu);
	sd_model_on_grad_ready(s->m, on_ready, s);
}

/* Waits for the buckets handed over; the step is over after it. */
static void wait_done(struct sd_grad_sync *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->done < s->launched)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	sd_model_on_grad_ready(s->m, NULL, NULL);
}

int sd_grad_sync_finish(struct sd_grad_sync *s, float *extra, int nextra, char **why)
{
	if (nextra < 0 || nextra > SD_GRAD_SYNC_EXTRA_MAX) {
		sd_grad_sync_abandon(s);
		return sd_why(why, "gradient all-reduce: %d extra floats, at most %d", nextra,
		              SD_GRAD_SYNC_EXTRA_MAX);
	}
	int last = s->nbuckets - 1;
	size_t n = s->end[last] - s->begin[last];
	if (nextra > 0) {
		memcpy(s->stage, s->grads + s->begin[last], n * sizeof(float));
		memcpy(s->stage + n, extra, (size_t)nextra * sizeof(float));
	}
	pthread_mutex_lock(&s->mu);
	s->nextra = nextra;
	pthread_mutex_unlock(&s->mu);
	launch(s, s->nbuckets);
	wait_done(s);
	if (s->rc < 0) {
		if (why) {
			*why = s->why;
			s->why = NULL;
		}
		return s->rc;
	}
	if (nextra > 0) {
		memcpy(s->grads + s->begin[last], s->stage, n * sizeof(float));
		memcpy(extra, s->stage + n, (size_t)nextra * sizeof(float));
	}
	return 0;
}

void sd_grad_sync_abandon(struct sd_grad_sync *s)
{
	wait_done(s);
}
