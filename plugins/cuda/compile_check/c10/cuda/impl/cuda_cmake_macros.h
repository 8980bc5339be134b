// Stand-in for the header a CUDA build of LibTorch generates (Debian's CPU-only LibTorch ships
// c10/cuda headers without it). Used only to compile-check the torch-CUDA glue.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
