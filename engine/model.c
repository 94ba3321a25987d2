/* engine/model.c (being written). */
#include "engine/model.h"
