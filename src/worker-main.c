/* src/worker-main.c - spotdeck-worker: the training process on each server.
 *
 * --standalone trains in this process alone and prints JSON lines on stdout:
 *   {"type":"backend", "backend", "device", "reason"}   first: where it computes
 *   {"type":"step", ...}   every --log-every steps (0 = never)
 *   {"type":"epoch", "epoch", "train_loss", "test_loss", "test_accuracy",
 *    "images_per_sec", "seconds", "step"}
 *   {"type":"checkpoint", "path", "step"}
 *   {"type":"done", "test_accuracy", "test_loss", "images_per_sec", "steps",
 *    "seconds", "param_checksum", "backend", "device"}
 * --list-devices prints {"type":"devices", "count", "devices": [{"index",
 * "name"}], "reason"} (the CUDA devices this process sees) and exits 0.
 * Errors go to stderr as one line "spotdeck-worker: ..." and exit 1 (2 for
 * usage errors).
 */
#include "config.h"

#include <cJSON.h>
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/onnx.h"
#include "src/proto/protocol.h"
#include "src/worker/notice-watch.h"
#include "src/worker/worker-agent.h"

/* OpenBLAS' own thread-count setter; declared by its cblas.h in newer
 * versions, declared here for the ones that do not. */
void openblas_set_num_threads(int num_threads);

struct opts {
	struct sd_train_config cfg;
	int standalone;
	int threads;
	int log_every;
	long max_steps;          /* stop after this many steps in total (0 = run all) */
	long checkpoint_every;   /* steps between checkpoints (0 = only at the end) */
	char checkpoint_dir[SD_PATH_MAX];
	char resume[SD_PATH_MAX];
	/* agent mode */
	char connect[256];
	char token_file[SD_PATH_MAX];
	char server_id[64];
	float pace;
	char notice[8];          /* --notice, "" = the job's */
	int cpu_slot;            /* --cpu-slot, -1 = none */
	int list_devices;
	int onnx_ops;            /* --onnx-ops */
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: spotdeck-worker --standalone [options]\n"
"       spotdeck-worker --connect HOST:PORT|unix:PATH --token-file FILE [--server-id ID] [--threads N]\n"
"Train a model in this process and print JSON lines, or join a spotdeck\n"
"controller's elastic training run (see spotdeck-worker(1)).\n"
"  --connect HOST:PORT   controller to join (agent mode); unix:PATH: through a\n"
"                        Unix socket (the ssh provider's forward to it)\n"
"  --token-file FILE     the run's token (or set SPOTDECK_TOKEN)\n"
"  --server-id ID        this server's id (default: the host name)\n"
"  --notice CLOUD        watch the cloud's metadata service for a preemption\n"
"                        notice and leave at the next step boundary: auto, gce,\n"
"                        aws, azure or none (default: the job's \"notice\", none)\n"
"  --pace X              run at fraction X (0..1] of full speed, to emulate a\n"
"                        slower GPU (set by the sim provider)\n"
"  --cpu-slot K          keep to the K-th group of this machine's CPUs, as many\n"
"                        as the threads, when the job's pin_workers allows and\n"
"                        they exist (set by the controller for its local workers)\n"
"  --model NAME          mlp, cnn, resnet20, resnet32 (default cnn), or the path\n"
"                        of an ONNX file (NAME ending in .onnx)\n"
"  --dataset NAME        fashion-mnist, mnist, cifar10, synthetic, npy (default\n"
"                        fashion-mnist)\n"
"  --data-dir DIR        dataset files (default /usr/share/datasets/fashion-mnist);\n"
"                        for npy: train_x.npy, train_y.npy, test_x.npy, test_y.npy\n"
"  --layout NCHW|NHWC    npy: the axis order of x (default NCHW)\n"
"  --normalize M,../S,.. npy: per-channel mean and std, x = (pixel/255 - M) / S\n"
"                        for uint8 images, (value - M) / S for float ones\n"
"  --classes N           npy: number of classes (default: largest label + 1)\n"
"  --augment NAME        none or crop4+flip (pad 4, random crop, mirror; default none)\n"
"  --epochs N            passes over the training set (default 3)\n"
"  --batch N             global batch, samples per step (default 64)\n"
"  --lr X                peak learning rate (default 0.05)\n"
"  --momentum X          SGD momentum (default 0.9)\n"
"  --weight-decay X      L2 weight decay (default 5e-4)\n"
"  --schedule NAME       constant, step or cosine (default cosine)\n"
"  --warmup N            warm-up steps (default 100)\n"
"  --threads N           compute threads (default: all cores)\n"
"  --backend NAME        auto, cpu or cuda (default auto: CUDA when a device is\n"
"                        usable, else the CPU; or $SPOTDECK_BACKEND)\n"
"  --device N            CUDA device index (default $SPOTDECK_CUDA_DEVICE or 0)\n"
"  --list-devices        print the CUDA devices this process sees and exit\n"
"  --onnx-ops            print the ONNX ops a --model PATH.onnx may use and exit\n"
"  --seed N              random seed (default 1)\n"
"  --checkpoint-dir DIR  write checkpoints there (ckpt-STEP.sdckpt, latest.sdckpt)\n"
"  --checkpoint-every N  checkpoint every N steps (default: at the end only)\n"
"  --resume PATH         continue from a checkpoint file or checkpoint directory\n"
"  --max-steps N         stop after step N (for tests and benchmarks)\n"
"  --log-every N         print a step line every N steps (default 0: never)\n"
"  --help, --version\n");
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void emit(cJSON *obj)
{
	char *s = cJSON_PrintUnformatted(obj);
	if (!s)
		sd_oom();
	puts(s);
	fflush(stdout);
	free(s);
	cJSON_Delete(obj);
}

static int die(const char *msg)
{
	fprintf(stderr, "spotdeck-worker: %s\n", msg);
	return 1;
}

/* Parses a whole decimal integer in [lo, hi]; the option name goes into the error. */
static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "spotdeck-worker: --%s: expected an integer in [%ld, %ld], got '%s'\n",
		        opt, lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_float(const char *opt, const char *s, double lo, double hi, float *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi)) {
		fprintf(stderr, "spotdeck-worker: --%s: expected a number in [%g, %g], got '%s'\n",
		        opt, lo, hi, s);
		return -1;
	}
	*out = (float)v;
	return 0;
}

static int copy_path(const char *opt, const char *s, char *dst)
{
	if (strlen(s) >= SD_PATH_MAX) {
		fprintf(stderr, "spotdeck-worker: --%s: path longer than %d bytes\n", opt, SD_PATH_MAX - 1);
		return -1;
	}
	strcpy(dst, s);
	return 0;
}

enum { O_MODEL = 256, O_DATASET, O_DATADIR, O_EPOCHS, O_BATCH, O_LR, O_MOMENTUM, O_WD,
       O_SCHEDULE, O_WARMUP, O_THREADS, O_SEED, O_CKDIR, O_CKEVERY, O_RESUME, O_MAXSTEPS,
       O_LOGEVERY, O_STANDALONE, O_HELP, O_VERSION, O_CONNECT, O_TOKENFILE, O_SERVERID, O_PACE,
       O_BACKEND, O_DEVICE, O_LISTDEV, O_NOTICE, O_CPUSLOT, O_LAYOUT, O_NORMALIZE, O_CLASSES,
       O_AUGMENT, O_ONNXOPS };

/* --normalize MEAN[,MEAN...]/STD[,STD...]: one mean and one std per channel,
 * as the job file's "normalize" (spotdeck-job(5)). */
static int parse_normalize(const char *arg, struct sd_train_config *cfg)
{
	float vals[2][SD_DATA_MAX_CHANNELS];
	int n[2] = { 0, 0 }, part = 0;
	const char *p = arg;
	for (;;) {
		char *end;
		errno = 0;
		double v = strtod(p, &end);
		if (errno || end == p || !isfinite(v) || (part == 1 && !(v > 0)) ||
		    n[part] == SD_DATA_MAX_CHANNELS)
			goto bad;
		vals[part][n[part]++] = (float)v;
		p = end;
		if (*p == ',') {
			p++;
		} else if (*p == '/' && part == 0) {
			part = 1;
			p++;
		} else if (*p == '\0' && part == 1) {
			break;
		} else {
			goto bad;
		}
	}
	if (n[0] != n[1])
		goto bad;
	cfg->norm_channels = n[0];
	memcpy(cfg->norm_mean, vals[0], (size_t)n[0] * sizeof(float));
	memcpy(cfg->norm_std, vals[1], (size_t)n[0] * sizeof(float));
	return 0;
bad:
	fprintf(stderr, "spotdeck-worker: --normalize: expected MEAN[,MEAN...]/STD[,STD...] with as "
	        "many positive stds as means (at most %d), got '%s'\n", SD_DATA_MAX_CHANNELS, arg);
	return -1;
}

/* The options that go into the training configuration (the engine's
 * struct sd_train_config): model, data, optimizer, backend.  Returns 0,
 * -1 after printing what is wrong with the value, or 1 when c is none of
 * them. */
static int parse_training_option(int c, const char *arg, struct sd_train_config *cfg)
{
	long v;
	switch (c) {
	case O_MODEL:
	case O_DATASET: {
		char *dst = c == O_MODEL ? cfg->model : cfg->dataset;
		size_t cap = c == O_MODEL ? sizeof cfg->model : sizeof cfg->dataset;
		if (strlen(arg) >= cap) {
			fprintf(stderr, "spotdeck-worker: --%s: name too long: '%s'\n",
			        c == O_MODEL ? "model" : "dataset", arg);
			return -1;
		}
		strcpy(dst, arg);
		break;
	}
	case O_DATADIR:
		return copy_path("data-dir", arg, cfg->data_dir);
	case O_EPOCHS:
		if (parse_long("epochs", arg, 1, 100000, &v) < 0)
			return -1;
		cfg->epochs = (int)v;
		break;
	case O_BATCH:
		if (parse_long("batch", arg, 1, 1 << 20, &v) < 0)
			return -1;
		cfg->global_batch = (int)v;
		break;
	case O_LR:
		return parse_float("lr", arg, 1e-9, 100, &cfg->lr);
	case O_MOMENTUM:
		return parse_float("momentum", arg, 0, 0.9999, &cfg->momentum);
	case O_WD:
		return parse_float("weight-decay", arg, 0, 1, &cfg->weight_decay);
	case O_SCHEDULE:
		if (sd_lr_kind_parse(arg, &cfg->schedule) < 0) {
			fprintf(stderr, "spotdeck-worker: --schedule: expected constant, step or cosine, got '%s'\n", arg);
			return -1;
		}
		break;
	case O_WARMUP:
		if (parse_long("warmup", arg, 0, LONG_MAX, &v) < 0)
			return -1;
		cfg->warmup_steps = v;
		break;
	case O_SEED:
		if (parse_long("seed", arg, 0, LONG_MAX, &v) < 0)
			return -1;
		cfg->seed = (uint64_t)v;
		break;
	case O_BACKEND: {
		enum sd_backend_request req;
		if (sd_backend_request_parse(arg, &req) < 0) {
			fprintf(stderr, "spotdeck-worker: --backend: expected auto, cpu or cuda, got '%s'\n", arg);
			return -1;
		}
		snprintf(cfg->backend, sizeof cfg->backend, "%s", arg);
		break;
	}
	case O_DEVICE:
		if (parse_long("device", arg, 0, 1023, &v) < 0)
			return -1;
		cfg->device = (int)v;
		break;
	case O_LAYOUT: {
		enum sd_layout l;
		if (sd_layout_parse(arg, &l) < 0) {
			fprintf(stderr, "spotdeck-worker: --layout: expected NCHW or NHWC, got '%s'\n", arg);
			return -1;
		}
		snprintf(cfg->layout, sizeof cfg->layout, "%s", arg);
		break;
	}
	case O_AUGMENT: {
		enum sd_augment a;
		if (sd_augment_parse(arg, &a) < 0) {
			fprintf(stderr, "spotdeck-worker: --augment: expected none or crop4+flip, got '%s'\n",
			        arg);
			return -1;
		}
		snprintf(cfg->augment, sizeof cfg->augment, "%s", arg);
		break;
	}
	case O_NORMALIZE:
		return parse_normalize(arg, cfg);
	case O_CLASSES:
		if (parse_long("classes", arg, 0, SD_DATA_MAX_CLASSES, &v) < 0)
			return -1;
		cfg->classes = (int)v;
		break;
	default:
		return 1;
	}
	return 0;
}

/* The options of this process: what it does (--standalone, --connect,
 * --list-devices), its threads, pace and checkpoints.  Returns 0, -1 after
 * printing what is wrong with the value, or 1 when c is none of them. */
static int parse_worker_option(int c, const char *arg, struct opts *o)
{
	long v;
	switch (c) {
	case O_THREADS:
		if (parse_long("threads", arg, 1, 1024, &v) < 0)
			return -1;
		o->threads = (int)v;
		break;
	case O_CKDIR:
		return copy_path("checkpoint-dir", arg, o->checkpoint_dir);
	case O_CKEVERY:
		if (parse_long("checkpoint-every", arg, 1, LONG_MAX, &v) < 0)
			return -1;
		o->checkpoint_every = v;
		break;
	case O_RESUME:
		return copy_path("resume", arg, o->resume);
	case O_MAXSTEPS:
		if (parse_long("max-steps", arg, 1, LONG_MAX, &v) < 0)
			return -1;
		o->max_steps = v;
		break;
	case O_LOGEVERY:
		if (parse_long("log-every", arg, 0, LONG_MAX, &v) < 0)
			return -1;
		o->log_every = v;
		break;
	case O_STANDALONE:
		o->standalone = 1;
		break;
	case O_CONNECT:
		if (!strncmp(arg, "unix:", 5)) {
			/* sun_path holds 107 bytes and a NUL. */
			if (arg[5] != '/' || strlen(arg + 5) > 107) {
				fprintf(stderr, "spotdeck-worker: --connect: unix:PATH needs an absolute path of at most "
				        "107 bytes, got '%s'\n", arg);
				return -1;
			}
		} else if (strlen(arg) >= sizeof o->connect || !strrchr(arg, ':')) {
			fprintf(stderr, "spotdeck-worker: --connect: expected HOST:PORT or unix:PATH, got '%s'\n", arg);
			return -1;
		}
		strcpy(o->connect, arg);
		break;
	case O_TOKENFILE:
		return copy_path("token-file", arg, o->token_file);
	case O_PACE:
		return parse_float("pace", arg, 1e-4, 1, &o->pace);
	case O_CPUSLOT: {
		long slot;
		if (parse_long("cpu-slot", arg, 0, 4095, &slot) < 0)
			return -1;
		o->cpu_slot = (int)slot;
		break;
	}
	case O_LISTDEV:
		o->list_devices = 1;
		break;
	case O_ONNXOPS:
		o->onnx_ops = 1;
		break;
	case O_NOTICE: {
		enum sd_notice_cloud cloud;
		if (sd_notice_cloud_parse(arg, &cloud) < 0) {
			fprintf(stderr, "spotdeck-worker: --notice: expected auto, gce, aws, azure or none, got '%s'\n", arg);
			return -1;
		}
		strcpy(o->notice, sd_notice_cloud_name(cloud));
		break;
	}
	case O_SERVERID:
		if (strlen(arg) >= sizeof o->server_id || !arg[0]) {
			fprintf(stderr, "spotdeck-worker: --server-id: expected 1 to %zu characters\n",
			        sizeof o->server_id - 1);
			return -1;
		}
		strcpy(o->server_id, arg);
		break;
	default:
		return 1;
	}
	return 0;
}

/* Reads the command line into o; --help and --version print and exit 0.
 * Returns 0, or -1 after printing a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "model", required_argument, 0, O_MODEL },
		{ "dataset", required_argument, 0, O_DATASET },
		{ "data-dir", required_argument, 0, O_DATADIR },
		{ "layout", required_argument, 0, O_LAYOUT },
		{ "normalize", required_argument, 0, O_NORMALIZE },
		{ "classes", required_argument, 0, O_CLASSES },
		{ "augment", required_argument, 0, O_AUGMENT },
		{ "epochs", required_argument, 0, O_EPOCHS },
		{ "batch", required_argument, 0, O_BATCH },
		{ "lr", required_argument, 0, O_LR },
		{ "momentum", required_argument, 0, O_MOMENTUM },
		{ "weight-decay", required_argument, 0, O_WD },
		{ "schedule", required_argument, 0, O_SCHEDULE },
		{ "warmup", required_argument, 0, O_WARMUP },
		{ "threads", required_argument, 0, O_THREADS },
		{ "seed", required_argument, 0, O_SEED },
		{ "checkpoint-dir", required_argument, 0, O_CKDIR },
		{ "checkpoint-every", required_argument, 0, O_CKEVERY },
		{ "resume", required_argument, 0, O_RESUME },
		{ "max-steps", required_argument, 0, O_MAXSTEPS },
		{ "log-every", required_argument, 0, O_LOGEVERY },
		{ "standalone", no_argument, 0, O_STANDALONE },
		{ "connect", required_argument, 0, O_CONNECT },
		{ "token-file", required_argument, 0, O_TOKENFILE },
		{ "server-id", required_argument, 0, O_SERVERID },
		{ "pace", required_argument, 0, O_PACE },
		{ "cpu-slot", required_argument, 0, O_CPUSLOT },
		{ "backend", required_argument, 0, O_BACKEND },
		{ "device", required_argument, 0, O_DEVICE },
		{ "list-devices", no_argument, 0, O_LISTDEV },
		{ "onnx-ops", no_argument, 0, O_ONNXOPS },
		{ "notice", required_argument, 0, O_NOTICE },
		{ "help", no_argument, 0, O_HELP },
		{ "version", no_argument, 0, O_VERSION },
		{ 0, 0, 0, 0 },
	};
	memset(o, 0, sizeof *o);
	o->cpu_slot = -1;
	sd_train_config_defaults(&o->cfg);
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == O_HELP) {
			usage(stdout);
			exit(0);
		}
		if (c == O_VERSION) {
			printf("spotdeck-worker %s\n", PACKAGE_VERSION);
			exit(0);
		}
		int rc = parse_training_option(c, optarg, &o->cfg);
		if (rc > 0)
			rc = parse_worker_option(c, optarg, o);
		if (rc > 0) {
			if (optopt)
				fprintf(stderr, "spotdeck-worker: option needs a value or is unknown: %s\n",
				        argv[optind - 1]);
			else
				fprintf(stderr, "spotdeck-worker: unknown option '%s' (see --help)\n",
				        argv[optind - 1]);
			return -1;
		}
		if (rc < 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "spotdeck-worker: unexpected argument '%s' (see --help)\n", argv[optind]);
		return -1;
	}
	if (o->checkpoint_every && !o->checkpoint_dir[0]) {
		fprintf(stderr, "spotdeck-worker: --checkpoint-every needs --checkpoint-dir\n");
		return -1;
	}
	return 0;
}

static int save_checkpoint(const struct opts *o, struct sd_trainer *t, char **why)
{
	char path[SD_PATH_MAX + 64], latest[SD_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/ckpt-%ld.sdckpt", o->checkpoint_dir, t->step);
	snprintf(latest, sizeof latest, "%s/latest.sdckpt", o->checkpoint_dir);
	if (sd_trainer_save(t, path, why) < 0)
		return -1;
	/* latest.sdckpt is a second atomic copy, so --resume DIR never sees a
	 * half-written file even if this process dies here. */
	if (sd_trainer_save(t, latest, why) < 0)
		return -1;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "checkpoint");
	cJSON_AddStringToObject(ev, "path", path);
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	emit(ev);
	return 0;
}

/* Prints the CUDA devices the driver shows (engine/backend.h), for
 * providers that offer one server per GPU. */
static int list_devices(void)
{
	struct sd_backend_device dev[64];
	char *why = NULL;
	int n = sd_backend_list_devices(dev, 64, &why);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "devices");
	cJSON_AddNumberToObject(ev, "count", n > 0 ? n : 0);
	cJSON *arr = cJSON_AddArrayToObject(ev, "devices");
	for (int i = 0; i < n && i < 64; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "index", dev[i].index);
		cJSON_AddStringToObject(d, "name", dev[i].name);
		cJSON_AddItemToArray(arr, d);
	}
	if (why)
		cJSON_AddStringToObject(ev, "reason", why);
	emit(ev);
	free(why);
	return 0;
}

/* Figures of a standalone run: the whole run's, and the current epoch's
 * since its last line. */
struct run_totals {
	double t0;               /* when training started (now_seconds) */
	double compute_s;        /* time spent in sd_trainer_step */
	long total_images;
	double epoch_t0;
	long epoch_images;
	double epoch_loss;       /* sum of the epoch's step losses */
	long epoch_steps;
};

/* The first line: where this process computes and why. */
static void emit_backend(const struct sd_trainer *t)
{
	cJSON *be = cJSON_CreateObject();
	cJSON_AddStringToObject(be, "type", "backend");
	cJSON_AddStringToObject(be, "backend", t->backend.name);
	cJSON_AddStringToObject(be, "device", t->backend.device.name);
	cJSON_AddStringToObject(be, "reason", t->backend.reason);
	emit(be);
}

/* Loads --resume (a checkpoint file, or a directory's latest.sdckpt) and
 * makes --checkpoint-dir.  Returns 0, or the exit status after printing
 * why not. */
static int prepare_state(const struct opts *o, struct sd_trainer *t)
{
	char *why = NULL;
	if (o->resume[0]) {
		char path[SD_PATH_MAX + 32];
		struct stat st;
		if (stat(o->resume, &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(path, sizeof path, "%s/latest.sdckpt", o->resume);
		else
			snprintf(path, sizeof path, "%s", o->resume);
		if (sd_trainer_load(t, path, &why) < 0) {
			int rc = die(why);
			free(why);
			return rc;
		}
	}
	if (o->checkpoint_dir[0] && mkdir(o->checkpoint_dir, 0777) < 0 && errno != EEXIST) {
		fprintf(stderr, "spotdeck-worker: %s: cannot create checkpoint directory: %s\n",
		        o->checkpoint_dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* The step line of the step just taken (--log-every). */
static void emit_step(const struct sd_trainer *t, double loss, double acc)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "step");
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	cJSON_AddNumberToObject(ev, "epoch", sd_trainer_epoch_of(t, t->step - 1));
	cJSON_AddNumberToObject(ev, "loss", loss);
	cJSON_AddNumberToObject(ev, "train_accuracy", acc);
	cJSON_AddNumberToObject(ev, "lr", sd_lr_at(&t->lr, t->step - 1));
	emit(ev);
}

/* At an epoch's end (or the run's): evaluates on the test set, prints the
 * epoch line and starts the next epoch's figures. */
static int end_epoch(struct sd_trainer *t, struct run_totals *rt, char **why)
{
	double now = now_seconds(), test_loss, test_acc;
	double train_s = now - rt->epoch_t0;
	if (sd_trainer_evaluate(t, &test_loss, &test_acc, why) < 0)
		return -1;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "epoch");
	cJSON_AddNumberToObject(ev, "epoch", sd_trainer_epoch_of(t, t->step - 1));
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	cJSON_AddNumberToObject(ev, "train_loss", rt->epoch_loss / rt->epoch_steps);
	cJSON_AddNumberToObject(ev, "test_loss", test_loss);
	cJSON_AddNumberToObject(ev, "test_accuracy", test_acc);
	cJSON_AddNumberToObject(ev, "images_per_sec", rt->epoch_images / train_s);
	cJSON_AddNumberToObject(ev, "seconds", train_s);
	emit(ev);
	rt->epoch_t0 = now_seconds();
	rt->epoch_images = 0;
	rt->epoch_loss = 0;
	rt->epoch_steps = 0;
	return 0;
}

/* Trains up to step end (--max-steps or the job's last), with the step,
 * checkpoint and epoch lines on the way. */
static int train_to(const struct opts *o, struct sd_trainer *t, long end, struct run_totals *rt, char **why)
{
	while (t->step < end) {
		double loss, acc, s0 = now_seconds();
		if (sd_trainer_step(t, &loss, &acc, why) < 0)
			return -1;
		rt->compute_s += now_seconds() - s0;
		rt->epoch_images += o->cfg.global_batch;
		rt->total_images += o->cfg.global_batch;
		rt->epoch_loss += loss;
		rt->epoch_steps++;
		if (o->log_every && t->step % o->log_every == 0)
			emit_step(t, loss, acc);
		if (o->checkpoint_every && t->step % o->checkpoint_every == 0 && save_checkpoint(o, t, why) < 0)
			return -1;
		if ((t->step % t->steps_per_epoch == 0 || t->step == end) && end_epoch(t, rt, why) < 0)
			return -1;
	}
	return 0;
}

/* The last line: the final test figures and what the run was. */
static int emit_done(const struct opts *o, struct sd_trainer *t, const struct run_totals *rt, char **why)
{
	double test_loss, test_acc;
	if (sd_trainer_evaluate(t, &test_loss, &test_acc, why) < 0)
		return -1;
	char sum[16];
	snprintf(sum, sizeof sum, "%08x", sd_trainer_param_checksum(t));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "done");
	cJSON_AddStringToObject(ev, "model", o->cfg.model);
	cJSON_AddStringToObject(ev, "dataset", o->cfg.dataset);
	cJSON_AddNumberToObject(ev, "steps", (double)t->step);
	cJSON_AddNumberToObject(ev, "test_accuracy", test_acc);
	cJSON_AddNumberToObject(ev, "test_loss", test_loss);
	cJSON_AddNumberToObject(ev, "images_per_sec", rt->compute_s > 0 ? rt->total_images / rt->compute_s : 0);
	cJSON_AddNumberToObject(ev, "seconds", now_seconds() - rt->t0);
	cJSON_AddNumberToObject(ev, "flops_per_image", sd_model_flops_per_sample(t->model));
	cJSON_AddNumberToObject(ev, "threads", o->threads);
	cJSON_AddStringToObject(ev, "blas_kernel", sd_blas_kernel());
	cJSON_AddStringToObject(ev, "param_checksum", sum);
	cJSON_AddStringToObject(ev, "backend", t->backend.name);
	cJSON_AddStringToObject(ev, "device", t->backend.device.name);
	emit(ev);
	return 0;
}

static int run_standalone(struct opts *o)
{
	char *why = NULL;
	struct sd_trainer *t;
	if (sd_trainer_create(&t, &o->cfg, &why) < 0) {
		int rc = die(why);
		free(why);
		return rc;
	}
	emit_backend(t);
	int rc = prepare_state(o, t);
	if (rc) {
		sd_trainer_destroy(t);
		return rc;
	}
	long end = t->total_steps;
	if (o->max_steps && o->max_steps < end)
		end = o->max_steps;
	struct run_totals rt = { .t0 = now_seconds() };
	rt.epoch_t0 = rt.t0;
	if (train_to(o, t, end, &rt, &why) < 0 ||
	    (o->checkpoint_dir[0] && (!o->checkpoint_every || t->step % o->checkpoint_every) &&
	     save_checkpoint(o, t, &why) < 0) ||
	    emit_done(o, t, &rt, &why) < 0)
		rc = die(why);
	free(why);
	sd_trainer_destroy(t);
	return rc;
}

static int run_agent(struct opts *o)
{
	char *why = NULL, *token = NULL;
	if (o->token_file[0]) {
		if (sd_token_read_file(o->token_file, &token, &why) < 0) {
			int rc = die(why);
			free(why);
			return rc;
		}
	} else if (getenv("SPOTDECK_TOKEN")) {
		token = strdup(getenv("SPOTDECK_TOKEN"));
	} else {
		return die("agent mode needs --token-file FILE or SPOTDECK_TOKEN");
	}
	if (!o->server_id[0] && gethostname(o->server_id, sizeof o->server_id - 1) < 0)
		strcpy(o->server_id, "worker");
	const char *host = o->connect, *port = NULL;
	if (!strncmp(o->connect, "unix:", 5)) {
		host = o->connect + 5;
	} else {
		char *colon = strrchr(o->connect, ':');
		*colon = 0;
		port = colon + 1;
	}
	struct sd_agent_opts ao = {
		.host = host,
		.port = port,
		.token = token,
		.server_id = o->server_id,
		.threads = o->threads,
		.pace = o->pace > 0 ? o->pace : 1,
		.backend = o->cfg.backend,
		.device = o->cfg.device,
		.notice = o->notice[0] ? o->notice : NULL,
		.cpu_slot = o->cpu_slot,
	};
	int rc = sd_worker_agent_run(&ao);
	free(token);
	return rc;
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	struct opts o;
	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (o.list_devices)
		return list_devices();
	if (o.onnx_ops) {
		/* The loader's own table (engine/onnx.c), so this never lags it. */
		int n;
		const struct sd_onnx_op *t = sd_onnx_ops(&n);
		for (int i = 0; i < n; i++)
			printf("%-20s %s\n", t[i].op, t[i].lowering);
		return 0;
	}
	if (o.connect[0] && o.standalone) {
		fprintf(stderr, "spotdeck-worker: --standalone and --connect exclude each other\n");
		return 2;
	}
	if (o.connect[0])
		return run_agent(&o);
	if (!o.standalone) {
		fprintf(stderr, "spotdeck-worker: nothing to do: pass --standalone or --connect (see --help)\n");
		return 2;
	}
	if (!o.threads)
		o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (o.threads < 1)
		o.threads = 1;
	openblas_set_num_threads(o.threads);
	omp_set_num_threads(o.threads);
	return run_standalone(&o);
}
