/* engine/layers.c - CPU reference layers (stub; being written). */
#include "engine/layers.h"
