# Fused AdamW for the CPU plugin: static library accelkit_cpu_adamw (PIC, hidden visibility).
# The ISA translation units get their -m flags per file and hold nothing but the element loops,
# so no inline function built for AVX-512 can be picked by the linker for other code.
# OpenMP: at::parallel_for's OpenMP body is compiled in fused_adamw.cpp; omp simd in the
# portable loop.
find_package(OpenMP REQUIRED COMPONENTS CXX)

set(_accelkit_adamw_dir "${CMAKE_CURRENT_LIST_DIR}")
add_library(accelkit_cpu_adamw STATIC
  "${_accelkit_adamw_dir}/fused_adamw.cpp"
  "${_accelkit_adamw_dir}/fused_adamw_kernel_scalar.cpp")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  target_sources(accelkit_cpu_adamw PRIVATE
    "${_accelkit_adamw_dir}/fused_adamw_kernel_avx2.cpp"
    "${_accelkit_adamw_dir}/fused_adamw_kernel_avx512.cpp")
  set_source_files_properties("${_accelkit_adamw_dir}/fused_adamw_kernel_avx2.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  set_source_files_properties("${_accelkit_adamw_dir}/fused_adamw_kernel_avx512.cpp"
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw")
endif()
target_include_directories(accelkit_cpu_adamw PUBLIC "${_accelkit_adamw_dir}")
target_link_libraries(accelkit_cpu_adamw PUBLIC accelkit_torch accelkit::sdk PRIVATE OpenMP::OpenMP_CXX)
# Every path does the same float operations in the same order: no FMA contraction. No errno
# from sqrt, so the portable loop (#pragma omp simd) vectorises for the baseline ISA.
target_compile_options(accelkit_cpu_adamw PRIVATE
  "$<$<CXX_COMPILER_ID:GNU,Clang>:-ffp-contract=off;-fno-math-errno>")
set_target_properties(accelkit_cpu_adamw PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
accelkit_warnings(accelkit_cpu_adamw)
