/* src/worker/worker-options.c - see worker-options.h. */
#include "config.h"

#include "src/worker/worker-options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "src/worker/notice-watch.h"


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
"  --dataset NAME        fashion-mnist, mnist, cifar10, synthetic, npy, tokens\n"
"                        (default fashion-mnist)\n"
"  --data-dir DIR        dataset files (default /usr/share/datasets/fashion-mnist);\n"
"                        for npy: train_x.npy, train_y.npy, test_x.npy, test_y.npy\n"
"  --layout NCHW|NHWC    npy: the axis order of x (default NCHW)\n"
"  --normalize M,../S,.. npy: per-channel mean and std, x = (pixel/255 - M) / S\n"
"                        for uint8 images, (value - M) / S for float ones\n"
"  --classes N           npy: number of classes (default: largest label + 1)\n"
"  --block-size N        tokens: sequence length, the model's time dimension\n"
"  --augment NAME        none or crop4+flip (pad 4, random crop, mirror; default none)\n"
"  --precision P         fp32 (default), bf16 or auto: the CPU's oneDNN\n"
"                        convolutions in bf16 (spotdeck-job(5) \"precision\")\n"
"  --tf32                on a CUDA device, TF32 tensor cores for float32\n"
"                        (spotdeck-job(5) \"tf32\"; default strict float32)\n"
"  --epochs N            passes over the training set (default 3)\n"
"  --batch N             global batch, samples per step (default 64)\n"
"  --lr X                peak learning rate (default 0.05)\n"
"  --optimizer NAME      sgd or adamw (default sgd)\n"
"  --momentum X          SGD momentum (default 0.9)\n"
"  --weight-decay X      SGD's L2 weight decay, AdamW's decoupled one\n"
"                        (default 5e-4)\n"
"  --betas B1,B2         AdamW's betas, each in [0, 1) (default 0.9,0.999)\n"
"  --eps X               AdamW's epsilon (default 1e-8)\n"
"  --clip-grad-norm X    clip the gradients to global L2 norm X (default: off)\n"
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
       O_AUGMENT, O_PRECISION, O_TF32, O_ONNXOPS, O_OPTIMIZER, O_BETAS, O_EPS, O_CLIP, O_BLOCK };

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

/* The optimizer's options (--optimizer, --betas, --eps, --clip-grad-norm):
 * 0, -1 after an error message, or 1 when c is none of them. */
static int parse_optimizer_option(int c, const char *arg, struct sd_train_config *cfg)
{
	switch (c) {
	case O_OPTIMIZER: {
		enum sd_optim_kind k;
		if (sd_optim_kind_parse(arg, &k) < 0 || strlen(arg) >= sizeof cfg->optimizer) {
			fprintf(stderr, "spotdeck-worker: --optimizer: expected sgd or adamw, got '%s'\n",
			        arg);
			return -1;
		}
		strcpy(cfg->optimizer, arg);
		break;
	}
	case O_BETAS: {
		char *end, *end2 = NULL;
		errno = 0;
		double b1 = strtod(arg, &end);
		double b2 = *end == ',' ? strtod(end + 1, &end2) : -1;
		if (errno || end == arg || *end != ',' || *end2 || !(b1 >= 0 && b1 < 1) ||
		    !(b2 >= 0 && b2 < 1)) {
			fprintf(stderr, "spotdeck-worker: --betas: expected B1,B2 each in [0, 1), "
			        "got '%s'\n", arg);
			return -1;
		}
		cfg->betas[0] = (float)b1;
		cfg->betas[1] = (float)b2;
		break;
	}
	case O_EPS:
		return parse_float("eps", arg, 0, 1, &cfg->eps);
	case O_CLIP:
		if (parse_float("clip-grad-norm", arg, 0, 1e6, &cfg->clip_grad_norm) < 0)
			return -1;
		if (!(cfg->clip_grad_norm > 0)) {
			fprintf(stderr, "spotdeck-worker: --clip-grad-norm: must be positive, got '%s'\n",
			        arg);
			return -1;
		}
		break;
	default:
		return 1;
	}
	return 0;
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
	case O_PRECISION:
		if (strcmp(arg, "fp32") && strcmp(arg, "bf16") && strcmp(arg, "auto")) {
			fprintf(stderr, "spotdeck-worker: --precision: expected fp32, bf16 or auto, "
			        "got '%s'\n", arg);
			return -1;
		}
		snprintf(cfg->precision, sizeof cfg->precision, "%s", arg);
		break;
	case O_TF32:
		cfg->tf32 = 1;
		break;
	case O_NORMALIZE:
		return parse_normalize(arg, cfg);
	case O_CLASSES:
		if (parse_long("classes", arg, 0, SD_DATA_MAX_CLASSES, &v) < 0)
			return -1;
		cfg->classes = (int)v;
		break;
	case O_BLOCK:
		if (parse_long("block-size", arg, 1, 1048576, &v) < 0)
			return -1;
		cfg->block_size = (int)v;
		break;
	default:
		return parse_optimizer_option(c, arg, cfg);
	}
	return 0;
}

/* The options of this process: what it does (--standalone, --connect,
 * --list-devices), its threads, pace and checkpoints.  Returns 0, -1 after
 * printing what is wrong with the value, or 1 when c is none of them. */
static int parse_worker_option(int c, const char *arg, struct sd_worker_opts *o)
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
int sd_worker_parse_options(int argc, char **argv, struct sd_worker_opts *o)
{
	static const struct option longopts[] = {
		{ "model", required_argument, 0, O_MODEL },
		{ "dataset", required_argument, 0, O_DATASET },
		{ "data-dir", required_argument, 0, O_DATADIR },
		{ "layout", required_argument, 0, O_LAYOUT },
		{ "normalize", required_argument, 0, O_NORMALIZE },
		{ "classes", required_argument, 0, O_CLASSES },
		{ "block-size", required_argument, 0, O_BLOCK },
		{ "augment", required_argument, 0, O_AUGMENT },
		{ "precision", required_argument, 0, O_PRECISION },
		{ "tf32", no_argument, 0, O_TF32 },
		{ "epochs", required_argument, 0, O_EPOCHS },
		{ "batch", required_argument, 0, O_BATCH },
		{ "lr", required_argument, 0, O_LR },
		{ "momentum", required_argument, 0, O_MOMENTUM },
		{ "weight-decay", required_argument, 0, O_WD },
		{ "optimizer", required_argument, 0, O_OPTIMIZER },
		{ "betas", required_argument, 0, O_BETAS },
		{ "eps", required_argument, 0, O_EPS },
		{ "clip-grad-norm", required_argument, 0, O_CLIP },
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
