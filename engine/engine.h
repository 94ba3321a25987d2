/* engine/engine.h - the training engine's C API, one include for programs
 * that use all of it (the worker).  Each part has its own header. */
#ifndef SD_ENGINE_ENGINE_H
#define SD_ENGINE_ENGINE_H
#include "src/base/errors.h"
#include "src/base/rng.h"
#include "engine/blas.h"
#include "engine/layers.h"
#include "engine/data.h"
#include "engine/checkpoint.h"
#include "engine/model.h"
#include "engine/onnx.h"
#include "engine/optim.h"
#include "engine/train.h"
#endif
