/* engine/train.h (being written) */
#ifndef SD_ENGINE_TRAIN_H
#define SD_ENGINE_TRAIN_H
#endif
