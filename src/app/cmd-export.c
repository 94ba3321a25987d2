/* src/app/cmd-export.c - `spotdeck export`: a run's model out of its
 * checkpoints (export-cli.c). */
#include "config.h"

#include "src/app/export-cli.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_export = {
	.name = "export",
	.synopsis = "export RUNDIR [--step N] [--onnx OUT] [--safetensors OUT]   (the model out)",
	.main = sd_export_main,
};
