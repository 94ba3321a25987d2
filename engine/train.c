/* engine/train.c (being written). */
#include "engine/train.h"
