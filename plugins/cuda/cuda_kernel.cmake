# The fused AdamW kernel (fused_adamw_kernel.cu), built whenever nvcc is found - also where
# LibTorch has no CUDA, so CI compiles it. Defines ACCELKIT_CUDA_KERNEL (ON/OFF), the static
# library accelkit_cuda_adamw_kernel (no CUDA runtime linked: its users pick static or shared
# cudart) and ACCELKIT_CUDA_ARCH_LIST ("80,90").
option(ACCELKIT_CUDA_KERNELS "Build the CUDA plugin's kernels when nvcc is found" ON)
set(ACCELKIT_CUDA_KERNEL OFF)
if(ACCELKIT_CUDA_KERNELS)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
endif()
if(ACCELKIT_CUDA_KERNELS AND CMAKE_CUDA_COMPILER)
  # CMAKE_CUDA_ARCHITECTURES: set (and kept through LibTorch's CUDA config) in AccelkitDependencies.cmake.
  if(NOT CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "OFF")
    message(FATAL_ERROR "accelkit cuda: CMAKE_CUDA_ARCHITECTURES is '${CMAKE_CUDA_ARCHITECTURES}': name the GPU architectures (e.g. 90)")
  endif()
  if(NOT CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(ACCELKIT_CUDA_KERNEL ON)

  set(ACCELKIT_CUDA_ARCH_LIST "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX MATCH "^[0-9]+" num "${arch}")
    if(num)
      list(APPEND ACCELKIT_CUDA_ARCH_LIST ${num})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES ACCELKIT_CUDA_ARCH_LIST)
  list(JOIN ACCELKIT_CUDA_ARCH_LIST "," ACCELKIT_CUDA_ARCH_LIST)

  add_library(accelkit_cuda_adamw_kernel STATIC "${CMAKE_CURRENT_LIST_DIR}/fused_adamw_kernel.cu")
  # nvcc splits -D values at commas: the list travels in a generated header.
  file(CONFIGURE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/generated/fused_adamw_archs.h"
    CONTENT "// Generated from CMAKE_CUDA_ARCHITECTURES.\n#define ACCELKIT_CUDA_ARCH_LIST @ACCELKIT_CUDA_ARCH_LIST@\n" @ONLY)
  target_include_directories(accelkit_cuda_adamw_kernel PUBLIC "${CMAKE_CURRENT_LIST_DIR}"
    PRIVATE "${CMAKE_CURRENT_BINARY_DIR}/generated")
  set_target_properties(accelkit_cuda_adamw_kernel PROPERTIES
    CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON
    CUDA_RUNTIME_LIBRARY None
    POSITION_INDEPENDENT_CODE ON
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Same float operations in the same order as the CPU kernel and torch::optim::AdamW: no FMA
  # contraction; IEEE sqrt and division (nvcc's defaults, stated).
  target_compile_options(accelkit_cuda_adamw_kernel PRIVATE
    -fmad=false -prec-sqrt=true -prec-div=true
    "-Xcompiler=-Wall,-Wextra" $<$<BOOL:${ACCELKIT_WERROR}>:--Werror=all-warnings>)
  message(STATUS "accelkit cuda: fused AdamW kernel for ${CMAKE_CUDA_ARCHITECTURES} (nvcc ${CMAKE_CUDA_COMPILER_VERSION})")
else()
  message(STATUS "accelkit cuda: no nvcc found - the plugin is built without its fused AdamW kernel")
endif()
