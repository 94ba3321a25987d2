/* engine/checkpoint.c - checkpoint container (stub; being written). */
#include "engine/checkpoint.h"
