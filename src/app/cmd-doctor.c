/* src/app/cmd-doctor.c - `spotdeck doctor`: whether a job's cloud could
 * start a run (doctor.c, doctor-aws.c). */
#include "config.h"

#include "src/app/doctor.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_doctor = {
	.name = "doctor",
	.synopsis = "doctor [--provider gce|aws] JOB   (could JOB's cloud start a run?)",
	.main = sd_doctor_main,
};
