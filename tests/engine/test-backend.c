/* tests/engine/test-backend.c - the backend choice and everything of the CUDA
 * backend that runs without a GPU (engine/backend.h, engine/backend-plugin.h).
 *
 *   choice     the reasons the CPU is chosen on this host (no driver here),
 *              SPOTDECK_BACKEND, a demanded CUDA that cannot be had;
 *   trainer    the trainer's device paths - state upload at creation, steps
 *              and SGD on the device, checksums, evaluation, the Gloo
 *              staging of gradients and state, the fall-back when the device
 *              model cannot be built - over "hostdev", a stand-in backend
 *              whose "device" blocks are a second host model run by the CPU
 *              layers: every result must equal the CPU trainer's bit for bit,
 *              so a missing upload or download shows as a difference;
 *   checkpoint a checkpoint written by a device trainer is byte-identical to
 *              the CPU trainer's at the same step (same format, same code
 *              path), resumes on the CPU and a CPU one resumes on the device,
 *              both continuing exactly as an uninterrupted run;
 *   comm       sd_comm_choose_backend: NCCL only when every rank has its own
 *              device;
 *   plugin     (in child processes: a process loads its plugin once) a
 *              missing plugin, a library that is not one, and - in builds
 *              with CUDA - the real spotdeck-cuda.so: it loads, its ABI
 *              matches, it names its library versions and reports the
 *              missing driver instead of crashing.
 */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/comm.h"
#include "engine/comm-backend.h"
#include "src/base/errors.h"
#include "engine/model-graph.h"
#include "engine/optim.h"
#include "engine/train.h"
#include "tests/check.h"
#include "tests/tmpdir.h"
#include "tests/gpu/fake/hostdev.h"

/* ---- hostdev: a backend whose device memory is host memory -------------- */

static int hd_fail_create;    /* make model_create fail (fall-back test) */
static int hd_allocs;         /* host_alloc minus host_free */
static int hd_steps;          /* train_batch calls: proves the device path ran */

static const char *hd_versions(void) { return "hostdev 1"; }

static int hd_count(int *count, char **why)
{
	*count = 1;
	return 0;
}

static int hd_open(int index, struct sd_backend_device *info, char **why)
{
	memset(info, 0, sizeof *info);
	info->index = index;
	snprintf(info->name, sizeof info->name, "hostdev");
	snprintf(info->uuid, sizeof info->uuid, "GPU-hostdev");
	info->cc_major = 9;
	info->multiprocessors = 1;
	return 0;
}

static int hd_tf32;   /* SPOTDECK_CUDA_TF32 was "1" at the last hd_create */

static int hd_create(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
                     char **why)
{
	if (hd_fail_create)
		return sd_why(why, "hostdev: out of pretend memory");
	/* What the CUDA plugin's cu_env_init reads at this point. */
	const char *tf32 = getenv("SPOTDECK_CUDA_TF32");
	hd_tf32 = tf32 && !strcmp(tf32, "1");
	return hostdev_create(out, m, max_batch, why);
}

static int hd_train(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                    float scale, double *loss_sum, int *correct, char **why)
{
	hd_steps++;
	return sd_model_train_batch(d->m, x, labels, n, scale, loss_sum, correct, why);
}

static int hd_train_indexed(struct sd_dev_model *d, const int32_t *idx, int n, float scale,
                            double *loss_sum, int *correct, char **why)
{
	return hostdev_train_indexed(d, idx, n, scale, loss_sum, correct, why, hd_train);
}

static const char *hd_describe(struct sd_dev_model *d)
{
	return hd_tf32 ? "hostdev executor, TF32 tensor-core" : "hostdev executor, strict fp32";
}

/* Never called: its presence says "this backend can do NCCL". */
static const struct sd_comm_backend_ops hd_nccl = { .name = "hostdev-nccl" };

static void *hd_host_alloc(size_t bytes)
{
	hd_allocs++;
	return malloc(bytes ? bytes : 1);
}

static void hd_host_free(void *p)
{
	if (p)
		hd_allocs--;
	free(p);
}

static const struct sd_backend_ops hostdev = {
	.abi = SD_BACKEND_ABI,
	.model_size = sizeof(struct sd_model),
	.node_size = sizeof(struct node),
	.name = "cuda",
	.versions = hd_versions,
	.device_count = hd_count,
	.device_open = hd_open,
	.model_create = hd_create,
	.model_destroy = hostdev_destroy,
	.model_upload = hostdev_upload,
	.model_download = hostdev_download,
	.model_block = hostdev_block,
	.train_batch = hd_train,
	.dataset_upload = hostdev_dataset_upload,
	.train_indexed = hd_train_indexed,
	.eval_batch = hostdev_eval,
	.sgd_step = hostdev_sgd,
	.adamw_step = hostdev_adamw,
	.grad_sumsq = hostdev_grad_sumsq,
	.grad_scale = hostdev_grad_scale,
	.model_describe = hd_describe,
	.host_alloc = hd_host_alloc,
	.host_free = hd_host_free,
	.nccl = &hd_nccl,
};

/* ---- helpers ------------------------------------------------------------ */

/* The optimizer the trainers below use: SGD, or AdamW with gradient
 * clipping (test_adamw). */
static int use_adamw;
#define ADAMW_CLIP 0.5f

static void config(struct sd_train_config *c, const char *model, const char *backend)
{
	sd_train_config_defaults(c);
	snprintf(c->model, sizeof c->model, "%s", model);
	snprintf(c->dataset, sizeof c->dataset, "synthetic");
	snprintf(c->backend, sizeof c->backend, "%s", backend);
	c->synthetic_samples = 256;
	c->synthetic_c = 3;
	c->synthetic_h = 8;
	c->synthetic_w = 8;
	c->global_batch = 16;
	c->eval_batch = 24;     /* > global batch: the device evaluates in chunks */
	c->warmup_steps = 2;
	c->lr = 0.1f;
	c->seed = 7;
	if (use_adamw) {
		snprintf(c->optimizer, sizeof c->optimizer, "adamw");
		c->lr = 0.003f;
		c->betas[1] = 0.95f;
		c->weight_decay = 0.1f;
		c->clip_grad_norm = ADAMW_CLIP;
	}
}

static struct sd_trainer *trainer(const char *model, const char *backend)
{
	struct sd_train_config c;
	config(&c, model, backend);
	struct sd_trainer *t = NULL;
	char *why = NULL;
	if (sd_trainer_create(&t, &c, &why) < 0) {
		fprintf(stderr, "trainer %s/%s: %s\n", model, backend, why);
		exit(1);
	}
	return t;
}

static double step(struct sd_trainer *t)
{
	double loss = -1, acc;
	char *why = NULL;
	CHECK(sd_trainer_step(t, &loss, &acc, &why) == 0, "%s", why ? why : "");
	free(why);
	return loss;
}

/* ---- choice ------------------------------------------------------------- */

static void test_choice(void)
{
	struct sd_backend_choice ch;
	char *why = NULL;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	unsetenv("SPOTDECK_BACKEND");
	unsetenv("SPOTDECK_CUDA_DEVICE");

	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), 0);
	if (!drv) {
		/* This host (CI, Debian without NVIDIA's driver): the CPU, and why. */
		CHECK(ch.kind == SD_BACKEND_CPU && !ch.ops);
		CHECK_STR(ch.name, "cpu");
		CHECK(strstr(ch.reason, "no NVIDIA driver") && strstr(ch.reason, "libcuda.so.1"),
		      "reason '%s'", ch.reason);
		CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_WANT_CUDA, -1, &why), -1);
		CHECK(why && strstr(why, "CUDA backend asked for") && strstr(why, "no NVIDIA driver"),
		      "why '%s'", why ? why : "(null)");
		setenv("SPOTDECK_BACKEND", "cuda", 1);
		CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), -1);
		CHECK(why && strstr(why, "SPOTDECK_BACKEND=cuda"), "why '%s'", why ? why : "(null)");
		struct sd_backend_device dev[4];
		CHECK_INT(sd_backend_list_devices(dev, 4, &why), -1);
		CHECK(why && strstr(why, "no NVIDIA driver"));
	} else {
		printf("  (this host has an NVIDIA driver: the no-driver reasons are not checked)\n");
		dlclose(drv);
	}
	setenv("SPOTDECK_BACKEND", "cpu", 1);
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), 0);
	CHECK(ch.kind == SD_BACKEND_CPU && strstr(ch.reason, "SPOTDECK_BACKEND=cpu"),
	      "reason '%s'", ch.reason);
	/* An explicit request wins over the environment. */
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_WANT_CPU, -1, &why), 0);
	CHECK(strstr(ch.reason, "backend setting"), "reason '%s'", ch.reason);
	setenv("SPOTDECK_BACKEND", "gpu", 1);
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), -1);
	CHECK(why && strstr(why, "SPOTDECK_BACKEND") && strstr(why, "'gpu'"));
	unsetenv("SPOTDECK_BACKEND");

	enum sd_backend_request r;
	CHECK_INT(sd_backend_request_parse("cuda", &r), 0);
	CHECK(r == SD_BACKEND_WANT_CUDA);
	CHECK_INT(sd_backend_request_parse("CUDA", &r), -1);

	/* With a (stand-in) device: CUDA, and the device in the reason. */
	sd_backend_set_test_ops(&hostdev);
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), 0);
	CHECK(ch.kind == SD_BACKEND_CUDA && ch.ops == &hostdev);
	CHECK_STR(ch.device.name, "hostdev");
	CHECK(strstr(ch.reason, "CUDA device 0 of 1: hostdev") && strstr(ch.reason, "hostdev 1"),
	      "reason '%s'", ch.reason);
	setenv("SPOTDECK_CUDA_DEVICE", "3", 1);
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), 0);
	CHECK(ch.kind == SD_BACKEND_CPU && strstr(ch.reason, "device 3 asked for, 1 visible"),
	      "reason '%s'", ch.reason);
	setenv("SPOTDECK_CUDA_DEVICE", "x", 1);
	CHECK_INT(sd_backend_choose(&ch, SD_BACKEND_AUTO, -1, &why), -1);
	CHECK(why && strstr(why, "SPOTDECK_CUDA_DEVICE"));
	unsetenv("SPOTDECK_CUDA_DEVICE");
	sd_backend_set_test_ops(NULL);
	free(why);
	check_report(1, "choice: reasons for the CPU, SPOTDECK_BACKEND, demanded CUDA");
}

/* ---- trainer ------------------------------------------------------------ */

static void test_trainer(const char *model, int device_data)
{
	sd_backend_set_test_ops(&hostdev);
	int before = check_failures;
	hd_steps = 0;
	if (!device_data)
		setenv("SPOTDECK_CUDA_DEVICE_DATA", "0", 1);
	struct sd_trainer *dev = trainer(model, "auto");
	unsetenv("SPOTDECK_CUDA_DEVICE_DATA");
	CHECK_INT(dev->dev_data, device_data);
	CHECK(strstr(dev->backend.reason, device_data ? "training set on the device"
	                                              : "batches gathered on the host") || !device_data,
	      "reason '%s'", dev->backend.reason);
	sd_backend_set_test_ops(NULL);
	struct sd_trainer *cpu = trainer(model, "cpu");
	CHECK(dev->dev != NULL && dev->backend.kind == SD_BACKEND_CUDA);
	CHECK(strstr(dev->backend.reason, "hostdev executor"), "reason '%s'", dev->backend.reason);
	CHECK(cpu->dev == NULL && cpu->backend.kind == SD_BACKEND_CPU);
	CHECK_INT(dev->pinned, 1);
	/* The initial state went up at creation: same checksum read back. */
	CHECK_INT(sd_trainer_param_checksum(dev), sd_trainer_param_checksum(cpu));
	int clipped = 0;
	for (int s = 0; s < 6; s++) {
		double a = step(dev), b = step(cpu);
		CHECK(a == b, "%s step %d: loss %.17g on the device, %.17g on the CPU", model, s, a, b);
		/* The device's norm (its own reduction) is the CPU's, bit for bit. */
		CHECK(dev->last_grad_norm == cpu->last_grad_norm,
		      "%s step %d: gradient norm %.17g on the device, %.17g on the CPU", model, s,
		      dev->last_grad_norm, cpu->last_grad_norm);
		clipped += cpu->last_grad_norm > ADAMW_CLIP;
	}
	CHECK_INT(hd_steps, 6);
	/* With AdamW + clipping the clip must act, or the test shows nothing. */
	CHECK(!use_adamw || clipped > 0, "%s: the clip at %g never acted", model, ADAMW_CLIP);
	CHECK_INT(sd_trainer_param_checksum(dev), sd_trainer_param_checksum(cpu));
	/* The host mirror of the BN buffers is refreshed by sync_host only. */
	char *why = NULL;
	CHECK_INT(sd_trainer_sync_host(dev, &why), 0);
	size_t nb = sd_model_buffer_count(dev->model), np = sd_model_param_count(dev->model);
	CHECK(!memcmp(sd_model_buffers(dev->model), sd_model_buffers(cpu->model), nb * sizeof(float)),
	      "%s: batch-norm buffers differ", model);
	CHECK(!memcmp(dev->velocity, cpu->velocity, np * sizeof(float)), "%s: momentum differs", model);
	CHECK(!use_adamw || (dev->second && cpu->second &&
	                     !memcmp(dev->second, cpu->second, np * sizeof(float))),
	      "%s: AdamW's second moment differs", model);
	double l1, a1, l2, a2;
	CHECK_INT(sd_trainer_evaluate(dev, &l1, &a1, &why), 0);
	CHECK_INT(sd_trainer_evaluate(cpu, &l2, &a2, &why), 0);
	/* The device evaluates in chunks of the training batch, the CPU in
	 * eval_batch chunks: OpenBLAS blocks a product by its size, so rows
	 * come out a few ulps apart. */
	CHECK(fabs(l1 - l2) <= 1e-6 * fabs(l2) && a1 == a2, "%s eval: %.17g/%g vs %.17g/%g", model,
	      l1, a1, l2, a2);

	/* A step as an elastic worker does it on Gloo: gradients staged through
	 * the host, "all-reduced" (doubled, as two equal ranks would), applied. */
	struct sd_state_view v;
	double loss;
	int correct;
	for (struct sd_trainer *t = dev;; t = cpu) {
		CHECK_INT(sd_trainer_local_grad(t, t->step, 0, t->cfg.global_batch, &loss, &correct,
		                                &why), 0);
		CHECK_INT(sd_trainer_comm_begin(t, SD_STATE_GRADS, 0, &v, &why), 0);
		CHECK(v.grads == sd_model_grads(t->model) && v.param_count == np);
		for (size_t i = 0; i < v.param_count; i++)
			v.grads[i] *= 2;
		CHECK_INT(sd_trainer_comm_end(t, SD_STATE_GRADS, 0, &why), 0);
		sd_trainer_apply(t);
		if (t == cpu)
			break;
	}
	CHECK_INT(sd_trainer_param_checksum(dev), sd_trainer_param_checksum(cpu));
	/* NCCL would use the device blocks themselves. */
	CHECK_INT(sd_trainer_comm_begin(dev, SD_STATE_MODEL, 1, &v, &why), 0);
	CHECK(v.params == dev->dev->m->params && v.velocity == dev->dev->velocity &&
	      v.buffers == dev->dev->m->buffers);
	CHECK(use_adamw ? v.second == dev->dev->second : v.second == NULL);
	CHECK_STR(sd_trainer_nccl_device(dev), "GPU-hostdev");
	CHECK(sd_trainer_nccl_device(cpu) == NULL);
	CHECK_INT(sd_trainer_comm_begin(cpu, SD_STATE_GRADS, 1, &v, &why), -1);
	CHECK(why && strstr(why, "runs on the CPU"));
	/* State received on the host (a Gloo broadcast from another rank):
	 * after comm_end the device computes with it. */
	CHECK_INT(sd_trainer_comm_begin(dev, SD_STATE_MODEL, 0, &v, &why), 0);
	memcpy(v.params, sd_model_params(cpu->model), np * sizeof(float));
	for (size_t i = 0; i < np; i++)
		v.params[i] += 0.001f;
	CHECK_INT(sd_trainer_comm_end(dev, SD_STATE_MODEL, 0, &why), 0);
	CHECK(dev->dev->m->params[0] == sd_model_params(cpu->model)[0] + 0.001f,
	      "state written on the host did not reach the device");
	free(why);
	sd_trainer_destroy(dev);
	sd_trainer_destroy(cpu);
	CHECK_INT(hd_allocs, 0);
	check_report(check_failures == before,
	             "trainer %s (batches %s): device steps, %s, eval, checksums, Gloo staging = CPU bits",
	             model, device_data ? "gathered on the device" : "from the host",
	             use_adamw ? "AdamW + clip_grad_norm" : "SGD");
}

static void test_fallback(void)
{
	int before = check_failures;
	sd_backend_set_test_ops(&hostdev);
	hd_fail_create = 1;
	struct sd_trainer *t = trainer("mlp", "auto");
	CHECK(t->dev == NULL && t->backend.kind == SD_BACKEND_CPU);
	CHECK(strstr(t->backend.reason, "CUDA device model failed: hostdev: out of pretend memory"),
	      "reason '%s'", t->backend.reason);
	CHECK_INT(t->pinned, 0);
	double l = step(t);
	CHECK(l > 0);
	sd_trainer_destroy(t);
	struct sd_train_config c;
	config(&c, "mlp", "cuda");
	char *why = NULL;
	CHECK_INT(sd_trainer_create(&t, &c, &why), -1);
	CHECK(why && strstr(why, "cannot run there") && strstr(why, "out of pretend memory"),
	      "why '%s'", why ? why : "(null)");
	free(why);
	hd_fail_create = 0;
	sd_backend_set_test_ops(NULL);
	check_report(check_failures == before, "fallback: a device model that fails gives the CPU");
}

/* ---- checkpoint --------------------------------------------------------- */

static void save(struct sd_trainer *t, const char *path)
{
	char *why = NULL;
	CHECK(sd_trainer_save(t, path, &why) == 0, "%s", why ? why : "");
	free(why);
}

static void load(struct sd_trainer *t, const char *path)
{
	char *why = NULL;
	CHECK(sd_trainer_load(t, path, &why) == 0, "%s", why ? why : "");
	free(why);
}

static void test_checkpoint(const char *model)
{
	int before = check_failures;
	char dir[256];
	make_tmpdir(dir, sizeof dir, "spotdeck-backend.XXXXXX");
	char *p_dev = path_join(dir, "dev.sdckpt"), *p_cpu = path_join(dir, "cpu.sdckpt");

	/* The reference: 8 uninterrupted CPU steps. */
	struct sd_trainer *ref = trainer(model, "cpu");
	double ref_loss[8];
	for (int s = 0; s < 8; s++)
		ref_loss[s] = step(ref);

	/* 4 steps on the device, saved; 4 on the CPU, saved: same bytes. */
	sd_backend_set_test_ops(&hostdev);
	struct sd_trainer *dev = trainer(model, "auto");
	sd_backend_set_test_ops(NULL);
	struct sd_trainer *cpu = trainer(model, "cpu");
	for (int s = 0; s < 4; s++) {
		step(dev);
		step(cpu);
	}
	save(dev, p_dev);
	save(cpu, p_cpu);
	size_t n1, n2;
	unsigned char *b1 = read_raw(p_dev, &n1), *b2 = read_raw(p_cpu, &n2);
	CHECK(n1 == n2 && !memcmp(b1, b2, n1), "%s: checkpoints differ (%zu vs %zu bytes)", model,
	      n1, n2);
	free(b1);
	free(b2);
	sd_trainer_destroy(dev);
	sd_trainer_destroy(cpu);

	/* GPU-written -> CPU, and CPU-written -> GPU: both go on as if never
	 * interrupted. */
	struct sd_trainer *on_cpu = trainer(model, "cpu");
	load(on_cpu, p_dev);
	sd_backend_set_test_ops(&hostdev);
	struct sd_trainer *on_dev = trainer(model, "auto");
	sd_backend_set_test_ops(NULL);
	load(on_dev, p_cpu);
	CHECK_INT(on_cpu->step, 4);
	CHECK_INT(on_dev->step, 4);
	for (int s = 4; s < 8; s++) {
		double a = step(on_cpu), b = step(on_dev);
		CHECK(a == ref_loss[s] && b == ref_loss[s],
		      "%s step %d after resume: CPU %.17g, device %.17g, uninterrupted %.17g", model, s,
		      a, b, ref_loss[s]);
	}
	CHECK_INT(sd_trainer_param_checksum(on_cpu), sd_trainer_param_checksum(ref));
	CHECK_INT(sd_trainer_param_checksum(on_dev), sd_trainer_param_checksum(ref));
	sd_trainer_destroy(on_cpu);
	sd_trainer_destroy(on_dev);
	sd_trainer_destroy(ref);
	free(p_dev);
	free(p_cpu);
	rm_tree(dir);
	check_report(check_failures == before,
	             "checkpoint %s: device and CPU files identical, resumes either way", model);
}

/* ---- comm: which backend a generation uses ------------------------------ */

struct rank_arg {
	struct sd_dir_store *store;
	int rank, world;
	long gen;
	const char *device;
	enum sd_comm_backend got;
	int rc;
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	char *why = NULL;
	a->rc = sd_comm_choose_backend(&a->got, a->rank, a->world, a->gen, a->device,
	                               &sd_dir_store_ops, a->store, 5000, &why);
	if (a->rc < 0)
		fprintf(stderr, "rank %d: %s\n", a->rank, why);
	free(why);
	return NULL;
}

static int choose(struct sd_dir_store *s, long gen, int world, const char *const *devices)
{
	pthread_t th[4];
	struct rank_arg a[4];
	for (int r = 0; r < world; r++) {
		a[r] = (struct rank_arg){ s, r, world, gen, devices[r], SD_COMM_NCCL, -9 };
		pthread_create(&th[r], NULL, rank_main, &a[r]);
	}
	int answer = -1;
	for (int r = 0; r < world; r++) {
		pthread_join(th[r], NULL);
		CHECK_INT(a[r].rc, 0);
		if (r == 0)
			answer = (int)a[r].got;
		CHECK_INT(a[r].got, answer);   /* every rank agrees */
	}
	return answer;
}

static void test_comm_choice(void)
{
	int before = check_failures;
	char dir[256];
	make_tmpdir(dir, sizeof dir, "spotdeck-choose.XXXXXX");
	struct sd_dir_store s;
	char *why = NULL;
	CHECK_INT(sd_dir_store_init(&s, dir, &why), 0);
	const char *two_gpus[] = { "GPU-a", "GPU-b" }, *one_gpu[] = { "GPU-a", "GPU-a" };
	const char *mixed[] = { "GPU-a", NULL, "GPU-c" }, *three[] = { "GPU-a", "GPU-b", "GPU-c" };
	CHECK_INT(choose(&s, 1, 2, two_gpus), SD_COMM_NCCL);
	/* The ranks (this test's threads) share one host: shared memory when
	 * NCCL cannot be had, unless SPOTDECK_COMM=gloo. */
	CHECK_INT(choose(&s, 2, 2, one_gpu), SD_COMM_SHM);
	CHECK_INT(choose(&s, 3, 3, mixed), SD_COMM_SHM);
	CHECK_INT(choose(&s, 4, 3, three), SD_COMM_NCCL);
	setenv("SPOTDECK_COMM", "gloo", 1);
	CHECK_INT(choose(&s, 7, 2, one_gpu), SD_COMM_GLOO);
	unsetenv("SPOTDECK_COMM");
	/* A peer's offer written by hand: on this host (the identity forced
	 * by SPOTDECK_COMM_HOST_ID; the last figure is /dev/shm's free MiB), on
	 * another host, on this host with too little room for the segment,
	 * with shared memory off, and from an older worker (no host part). */
	static const struct { long gen; const char *peer; enum sd_comm_backend want; } peers[] = {
		{ 8, "host|test-host|1000", SD_COMM_SHM },
		{ 9, "host|another-host|1000", SD_COMM_GLOO },
		{ 10, "host|test-host|8", SD_COMM_GLOO },
		{ 11, "host||0", SD_COMM_GLOO },
		{ 12, "host", SD_COMM_GLOO },
		{ 13, "host|test-host-2|1000", SD_COMM_GLOO },
	};
	setenv("SPOTDECK_COMM_HOST_ID", "test-host", 1);
	for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
		char key[64];
		snprintf(key, sizeof key, "gen/%ld/device/1", peers[i].gen);
		CHECK_INT(sd_dir_store_ops.set(&s, key, peers[i].peer, strlen(peers[i].peer), &why), 0);
		enum sd_comm_backend got = SD_COMM_NCCL;
		CHECK_INT(sd_comm_choose_backend(&got, 0, 2, peers[i].gen, NULL, &sd_dir_store_ops, &s,
		                                 1000, &why), 0);
		CHECK_INT(got, peers[i].want);
	}
	unsetenv("SPOTDECK_COMM_HOST_ID");
	enum sd_comm_backend b = SD_COMM_NCCL;
	CHECK_INT(sd_comm_choose_backend(&b, 0, 1, 5, "GPU-a", NULL, NULL, 100, &why), 0);
	CHECK_INT(b, SD_COMM_GLOO);
	/* A rank that never comes: the store's timeout, not a hang. */
	CHECK_INT(sd_comm_choose_backend(&b, 0, 2, 6, "GPU-a", &sd_dir_store_ops, &s, 100, &why),
	          SD_COMM_ETIMEDOUT);
	free(why);
	sd_dir_store_fini(&s);
	rm_tree(dir);
	check_report(check_failures == before,
	             "comm: NCCL only when every rank has a device of its own; all ranks agree");
}

/* ---- plugin loading, one child process per case ------------------------- */

static int child(void (*fn)(void))
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		fflush(stdout);
		_exit(check_failures ? 1 : 0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st)) {
		fprintf(stderr, "child died with signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
		return 1;
	}
	return WEXITSTATUS(st);
}

static void plugin_missing(void)
{
	setenv("SPOTDECK_CUDA_PLUGIN", "/nonexistent/spotdeck-cuda.so", 1);
	char *why = NULL;
	CHECK(sd_backend_plugin(&why) == NULL);
	CHECK(why && strstr(why, "/nonexistent/spotdeck-cuda.so") &&
	      strstr(why, "No such file"), "why '%s'", why ? why : "(null)");
	/* Loaded once: the same error again, without a second attempt. */
	setenv("SPOTDECK_CUDA_PLUGIN", "libz.so.1", 1);
	CHECK(sd_backend_plugin(&why) == NULL);
	CHECK(why && strstr(why, "/nonexistent/"), "why '%s'", why ? why : "(null)");
	free(why);
}

static void plugin_not_ours(void)
{
	/* A real shared object without our entry point. */
	setenv("SPOTDECK_CUDA_PLUGIN", "libz.so.1", 1);
	char *why = NULL;
	CHECK(sd_backend_plugin(&why) == NULL);
	CHECK(why && strstr(why, "no sd_backend_plugin_entry symbol"), "why '%s'",
	      why ? why : "(null)");
	/* NCCL comes from the plugin: without one, a clear error. */
	struct sd_comm *c = NULL;
	char dir[256];
	make_tmpdir(dir, sizeof dir, "spotdeck-nccl.XXXXXX");
	struct sd_dir_store s;
	sd_dir_store_init(&s, dir, &why);
	CHECK_INT(sd_comm_create(&c, SD_COMM_NCCL, 0, 2, 1, &sd_dir_store_ops, &s, 200, &why),
	          SD_COMM_ENOTBUILT);
	CHECK(why && strstr(why, "NCCL needs the CUDA backend"), "why '%s'", why ? why : "(null)");
	sd_dir_store_fini(&s);
	rm_tree(dir);
	free(why);
}

#ifdef SD_TEST_HAVE_PLUGIN
static void plugin_real(void)
{
	unsetenv("SPOTDECK_CUDA_PLUGIN");
	char *why = NULL;
	const struct sd_backend_ops *o = sd_backend_plugin(&why);
	CHECK(o != NULL, "the built plugin does not load: %s", why ? why : "");
	if (!o)
		return;
	printf("  plugin %s: %s\n", sd_backend_plugin_path(), o->versions());
	CHECK_INT(o->abi, SD_BACKEND_ABI);
	CHECK_STR(o->name, "cuda");
	CHECK(strstr(o->versions(), "cuDNN 9.") && strstr(o->versions(), "cuBLAS"),
	      "versions '%s'", o->versions());
	CHECK(o->layers && o->layers->conv2d_forward && o->layers->sgd_step);
	CHECK(o->host_alloc && o->model_create && o->train_batch);
	int count = -1;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!drv) {
		/* No driver: the runtime says so; nothing crashes. */
		CHECK_INT(o->device_count(&count, &why), -1);
		CHECK(why && strstr(why, "cudaGetDeviceCount"), "why '%s'", why ? why : "(null)");
		printf("  without a driver: %s\n", why ? why : "");
		struct sd_backend_device info;
		CHECK_INT(o->device_open(0, &info, &why), -1);
		/* NCCL is found in the plugin and fails cleanly without a GPU. */
		if (o->nccl) {
			char dir[256];
			make_tmpdir(dir, sizeof dir, "spotdeck-nccl.XXXXXX");
			struct sd_dir_store s;
			sd_dir_store_init(&s, dir, &why);
			struct sd_comm *c = NULL;
			int rc = sd_comm_create(&c, SD_COMM_NCCL, 0, 2, 1, &sd_dir_store_ops, &s, 200, &why);
			CHECK(rc < 0 && c == NULL && why, "NCCL without a GPU: rc %d", rc);
			printf("  NCCL without a GPU: %s\n", why ? why : "");
			sd_dir_store_fini(&s);
			rm_tree(dir);
		}
	} else {
		dlclose(drv);
	}
	free(why);
}
#endif

static void test_plugin(void)
{
	int bad = 0;
	bad |= child(plugin_missing);
	bad |= child(plugin_not_ours);
#ifdef SD_TEST_HAVE_PLUGIN
	/* Also in the ASan build: loading cuDNN, cuBLAS and NCCL into an
	 * instrumented process must not crash or leak either. */
	bad |= child(plugin_real);
#else
	printf("  (built without CUDA: no real plugin to load)\n");
#endif
	if (bad)
		check_failures++;
	check_report(!bad, "plugin: missing, foreign and real plugins load or fail with a reason");
}

/* ---- tf32 --------------------------------------------------------------- */

static struct sd_trainer *trainer_tf32(int tf32)
{
	struct sd_train_config c;
	config(&c, "cnn", "auto");
	c.tf32 = tf32;
	struct sd_trainer *t = NULL;
	char *why = NULL;
	if (sd_trainer_create(&t, &c, &why) < 0) {
		fprintf(stderr, "trainer tf32 %d: %s\n", tf32, why);
		exit(1);
	}
	return t;
}

/* The job's "tf32" reaches the plugin as SPOTDECK_CUDA_TF32 while it builds
 * the device model, only then, and the environment's own setting wins. */
static void test_tf32(void)
{
	int before = check_failures;
	sd_backend_set_test_ops(&hostdev);
	unsetenv("SPOTDECK_CUDA_TF32");
	for (int want = 0; want <= 1; want++) {
		struct sd_trainer *t = trainer_tf32(want);
		CHECK_INT(hd_tf32, want);
		CHECK(strstr(t->backend.reason, want ? "TF32 tensor-core" : "strict fp32"),
		      "tf32 %d: reason '%s'", want, t->backend.reason);
		CHECK(getenv("SPOTDECK_CUDA_TF32") == NULL, "tf32 %d left SPOTDECK_CUDA_TF32 set",
		      want);
		sd_trainer_destroy(t);
	}
	setenv("SPOTDECK_CUDA_TF32", "0", 1);
	struct sd_trainer *t = trainer_tf32(1);
	CHECK_INT(hd_tf32, 0);
	CHECK(!strcmp(getenv("SPOTDECK_CUDA_TF32"), "0"), "the environment's 0 was changed");
	sd_trainer_destroy(t);
	unsetenv("SPOTDECK_CUDA_TF32");
	sd_backend_set_test_ops(NULL);
	check_report(check_failures == before, "tf32: the job's switch reaches the device model, the environment overrides");
}

int main(void)
{
	/* Children first: they must not inherit OpenBLAS' threads. */
	test_plugin();
	test_choice();
	test_trainer("cnn", 1);
	test_trainer("cnn", 0);
	test_trainer("resnet20", 1);
	test_fallback();
	test_checkpoint("cnn");
	test_checkpoint("resnet20");
	/* AdamW and clipping through the device ops: the same bits as the
	 * CPU, in steps and in checkpoints. */
	use_adamw = 1;
	test_trainer("cnn", 1);
	test_checkpoint("cnn");
	use_adamw = 0;
	test_comm_choice();
	test_tf32();
	return check_exit("test-backend");
}
