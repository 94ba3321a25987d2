/* engine/data.c - datasets (stub; being written). */
#include "engine/data.h"
