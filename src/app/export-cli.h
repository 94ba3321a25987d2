/* src/app/export-cli.h - `spotdeck export`: a run's trained model as ONNX
 * and safetensors files (spotdeck-export(1)).  src/main.c hands it the
 * arguments after "spotdeck". */
#ifndef SD_APP_EXPORT_CLI_H
#define SD_APP_EXPORT_CLI_H

/* Runs `spotdeck export RUNDIR [--step N] [--onnx OUT] [--safetensors OUT]`;
 * argv[0] is "export".  Reads the run's newest intact checkpoint (or the
 * one of step N), writes each output to OUT.tmp and renames it into place
 * only when every output was written, so a failure leaves no output, and
 * prints one line per file on stdout.  Returns the process exit status: 0,
 * 1 for bad input (one line on stderr), 2 for a usage error. */
int sd_export_main(int argc, char **argv);

#endif
