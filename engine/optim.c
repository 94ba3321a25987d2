/* engine/optim.c (being written). */
#include "engine/optim.h"
