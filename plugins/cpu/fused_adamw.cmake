# Fused AdamW and SGD, and the operator kernels (operator_kernels.cpp), for the CPU plugin:
# static library accelkit_cpu_adamw (PIC, hidden visibility).
# The ISA translation units get their -m flags per file and hold nothing but the element loops,
# so no inline function built for AVX-512 can be picked by the linker for other code.
# OpenMP: at::parallel_for's OpenMP body is compiled in fused_adamw.cpp; omp simd in the
# portable loop.
# A LibTorch that ships its own libgomp (the PyTorch wheel) gets that one linked by path: one
# OpenMP runtime serves LibTorch and this code, and no system copy competes for the search path.
find_package(OpenMP REQUIRED COMPONENTS CXX)
set(_accelkit_openmp OpenMP::OpenMP_CXX)
if(TORCH_INSTALL_PREFIX AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
  file(GLOB _accelkit_torch_gomp "${TORCH_INSTALL_PREFIX}/lib/libgomp*.so*")
  if(_accelkit_torch_gomp)
    list(GET _accelkit_torch_gomp 0 _accelkit_torch_gomp)
    if(NOT TARGET accelkit_torch_openmp)
      add_library(accelkit_torch_openmp INTERFACE)
      separate_arguments(_accelkit_omp_flags UNIX_COMMAND "${OpenMP_CXX_FLAGS}")
      target_compile_options(accelkit_torch_openmp INTERFACE ${_accelkit_omp_flags})
      target_link_libraries(accelkit_torch_openmp INTERFACE "${_accelkit_torch_gomp}")
    endif()
    set(_accelkit_openmp accelkit_torch_openmp)
  endif()
endif()

set(_accelkit_adamw_dir "${CMAKE_CURRENT_LIST_DIR}")
add_library(accelkit_cpu_adamw STATIC
  "${_accelkit_adamw_dir}/fused_adamw.cpp"
  "${_accelkit_adamw_dir}/fused_adamw_kernel_scalar.cpp"
  "${_accelkit_adamw_dir}/fused_sgd.cpp"
  "${_accelkit_adamw_dir}/fused_sgd_kernel_scalar.cpp"
  "${_accelkit_adamw_dir}/operator_kernels.cpp"
  "${_accelkit_adamw_dir}/conv_gemm.cpp"
  "${_accelkit_adamw_dir}/conv_planes.cpp"
  "${_accelkit_adamw_dir}/conv_choice.cpp"
  "${_accelkit_adamw_dir}/conv_winograd.cpp"
  "${_accelkit_adamw_dir}/batch_norm_op.cpp"
  "${_accelkit_adamw_dir}/bernoulli_op.cpp")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  target_sources(accelkit_cpu_adamw PRIVATE
    "${_accelkit_adamw_dir}/fused_adamw_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/fused_adamw_kernel_avx512.cpp"
    "${_accelkit_adamw_dir}/fused_sgd_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/max_pool_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/conv_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/winograd_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/batch_norm_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/bernoulli_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/bernoulli_kernel_avx512.cpp")
  set_source_files_properties("${_accelkit_adamw_dir}/max_pool_kernel_avx2.cpp" PROPERTIES COMPILE_OPTIONS "-mavx2")
  set_source_files_properties("${_accelkit_adamw_dir}/fused_adamw_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/fused_sgd_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/conv_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/batch_norm_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/bernoulli_kernel_avx2.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  # -O3 whatever the build type: at -O2 the Winograd products ran ResNet-20's 16-channel layer
  # about 10% slower (2.76 against 2.53 ms at batch 128 on a Zen 3's two cores).
  set_source_files_properties("${_accelkit_adamw_dir}/winograd_kernel_avx2.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-O3")
  set_source_files_properties("${_accelkit_adamw_dir}/fused_adamw_kernel_avx512.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw")
  set_source_files_properties("${_accelkit_adamw_dir}/bernoulli_kernel_avx512.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx2")
endif()
target_include_directories(accelkit_cpu_adamw PUBLIC "${_accelkit_adamw_dir}")
target_link_libraries(accelkit_cpu_adamw PUBLIC accelkit_torch accelkit::sdk PRIVATE ${_accelkit_openmp} ${CMAKE_DL_LIBS})
# Every path does the same float operations in the same order: no FMA contraction. No errno
# from sqrt, so the portable loop (#pragma omp simd) vectorises for the baseline ISA.
target_compile_options(accelkit_cpu_adamw PRIVATE
  "$<$<CXX_COMPILER_ID:GNU,Clang>:-ffp-contract=off;-fno-math-errno>")
set_target_properties(accelkit_cpu_adamw PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
accelkit_warnings(accelkit_cpu_adamw)
# The LibTorch glue (fused_adamw.cpp, fused_sgd.cpp, operator_kernels.cpp) combined; the
# element loops stay units of their own (their -m flags, and nothing else in them).
if(COMMAND accelkit_unity)
  accelkit_unity(accelkit_cpu_adamw)
  set_source_files_properties("${_accelkit_adamw_dir}/fused_adamw_kernel_scalar.cpp"
    "${_accelkit_adamw_dir}/fused_sgd_kernel_scalar.cpp" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endif()
