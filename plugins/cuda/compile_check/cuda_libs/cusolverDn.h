// Stand-in for a CUDA math library header, used only to compile-check the CUDA plugin's
// LibTorch glue where the CUDA toolkit ships without its math libraries (never linked, never
// run): the handle and status types that LibTorch's ATen/cuda headers name.
#pragma once
#include "cusolver_common.h"
typedef struct cusolverDnContext* cusolverDnHandle_t;
