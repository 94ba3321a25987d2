/* src/app/doctor.h - `spotdeck doctor --provider gce JOB.json`: checks that a
 * run could start on a cloud, without creating anything there: the
 * credentials give a token, the project answers and has GPU quota left,
 * each zone is UP and offers the machine type and the GPU, each region has
 * Spot GPU quota, the boot image exists, and the Billing Catalog has a Spot
 * price for the GPU (man/spotdeck.1, DOCTOR).
 *
 * One line per check on stdout: "ok    CHECK: detail", "FAIL  CHECK: why"
 * or "warn  CHECK: why" (a warning does not stop a run).  Exit status: 0
 * when every check passed or warned, 1 when one failed, 2 for a bad
 * command line or job file. */
#ifndef SD_APP_DOCTOR_H
#define SD_APP_DOCTOR_H

/* argv[0] is "doctor". */
int sd_doctor_main(int argc, char **argv);

#endif
