# accelkit_torch: LibTorch as accelkit code links it (needs find_package(Torch) first).
# torch_cpu and c10 only: on a CUDA build of LibTorch a CPU-only plugin must not pull the CUDA
# libraries in (a GPU plugin adds them with LINK). Include directories are SYSTEM, so
# LibTorch's own warnings stay out of ours. Shared by the build tree and the installed
# package (accelkitConfig.cmake); an imported target, so exported targets can name it.
if(NOT TARGET accelkit_torch)
  add_library(accelkit_torch INTERFACE IMPORTED)
  target_link_libraries(accelkit_torch INTERFACE torch_cpu c10)
  get_target_property(_accelkit_torch_inc torch INTERFACE_INCLUDE_DIRECTORIES)
  if(_accelkit_torch_inc)
    target_include_directories(accelkit_torch SYSTEM INTERFACE ${_accelkit_torch_inc})
  endif()
  if(TORCH_CXX_FLAGS)
    separate_arguments(_accelkit_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
    target_compile_options(accelkit_torch INTERFACE ${_accelkit_torch_flags})
  endif()
  unset(_accelkit_torch_inc)
  unset(_accelkit_torch_flags)
endif()
