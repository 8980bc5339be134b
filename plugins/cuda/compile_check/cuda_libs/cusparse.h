// Stand-in for a CUDA math library header, used only to compile-check the CUDA plugin's
// LibTorch glue where the CUDA toolkit ships without its math libraries (never linked, never
// run): the handle and status types that LibTorch's ATen/cuda headers name.
#pragma once
typedef struct cusparseContext* cusparseHandle_t;
typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
const char* cusparseGetErrorString(cusparseStatus_t status);
