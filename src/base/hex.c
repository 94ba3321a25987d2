/* src/base/hex.c - see hex.h. */
#include "config.h"

#include "src/base/hex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

char *sd_hex_encode(const void *data, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	if (len > (SIZE_MAX - 1) / 2)
		sd_oom();
	const unsigned char *p = data;
	char *hex = sd_malloc(2 * len + 1);
	for (size_t i = 0; i < len; i++) {
		hex[2 * i] = digits[p[i] >> 4];
		hex[2 * i + 1] = digits[p[i] & 15];
	}
	hex[2 * len] = '\0';
	return hex;
}

static int sd_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void *sd_hex_decode(const char *hex, size_t *len)
{
	size_t n = strlen(hex);
	if (n % 2)
		return NULL;
	unsigned char *out = sd_malloc(n / 2);
	for (size_t i = 0; i < n / 2; i++) {
		int hi = sd_hex_digit(hex[2 * i]), lo = sd_hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(out);
			return NULL;
		}
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	*len = n / 2;
	return out;
}
