// Stand-in for a CUDA math library header, used only to compile-check the CUDA plugin's
// LibTorch glue where the CUDA toolkit ships without its math libraries (never linked, never
// run): the handle and status types that LibTorch's ATen/cuda headers name.
#pragma once
typedef enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3 } cusolverStatus_t;
