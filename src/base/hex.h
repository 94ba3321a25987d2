/* src/base/hex.h - bytes as hexadecimal text, for binary payloads in JSON
 * (the worker protocol's store values, checkpoint and model chunks) and
 * for random tokens. */
#ifndef SD_BASE_HEX_H
#define SD_BASE_HEX_H

#include <stddef.h>

/* Hex codec for binary payloads (store values, checkpoint chunks).  encode:
 * malloc'd NUL-terminated lowercase hex of 2 * len chars.  decode (upper or
 * lower case): returns malloc'd bytes (non-NULL even for "") and *len, or
 * NULL on odd length / non-hex char.  Both abort via sd_oom on OOM. */
char *sd_hex_encode(const void *data, size_t len);
void *sd_hex_decode(const char *hex, size_t *len);

#endif
