/* src/provider/registry.c - providers by name (provider.h).  Built in: sim, ssh, gce, aws. */
#include "config.h"

#include "src/provider/provider.h"

#include <stdio.h>

#include "src/base/errors.h"
#include <stdlib.h>
#include <string.h>

#define SD_PROVIDERS_MAX 16

static const struct sd_provider_ops *registry[SD_PROVIDERS_MAX] = {
	&sd_provider_sim,
	&sd_provider_ssh,
	&sd_provider_gce,
	&sd_provider_aws,
};
static int nregistry = 4;

int sd_provider_register(const struct sd_provider_ops *ops)
{
	if (!ops || !ops->name || sd_provider_find(ops->name) || nregistry >= SD_PROVIDERS_MAX)
		return -1;
	registry[nregistry++] = ops;
	return 0;
}

const struct sd_provider_ops *sd_provider_find(const char *name)
{
	for (int i = 0; i < nregistry; i++)
		if (!strcmp(registry[i]->name, name))
			return registry[i];
	return NULL;
}

const char *sd_provider_names(char *buf, size_t len)
{
	size_t n = 0;
	if (len)
		buf[0] = '\0';
	for (int i = 0; i < nregistry && n < len; i++) {
		int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", registry[i]->name);
		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

int sd_provider_check_settings(const struct sd_provider_ops *ops, const cJSON *settings,
                               const char *file, char **why)
{
	if (ops->check)
		return ops->check(settings, file, why);
	if (settings && settings->child)
		return sd_why(why, "%s: provider.%s: provider '%s' has no settings of its own", file,
		              settings->child->string, ops->name);
	return 0;
}

int sd_host_is_loopback(const char *host_or_host_port, int has_port)
{
	char host[300];
	snprintf(host, sizeof host, "%s", host_or_host_port);
	char *colon = has_port ? strrchr(host, ':') : NULL;
	if (colon)
		*colon = '\0';
	return !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "localhost");
}

void sd_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
}
