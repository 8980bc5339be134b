# Third-party packages, all from the distribution. LibTorch is found once here; its include
# directories are marked SYSTEM so its own warnings stay out of ours.
find_package(Torch REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)

# torch_cpu only: CLI parts that touch LibTorch need nothing else, and on a CUDA build of
# LibTorch the CPU plugin must not pull the CUDA libraries in.
if(NOT TARGET accelkit_torch)
  add_library(accelkit_torch INTERFACE)
  target_link_libraries(accelkit_torch INTERFACE torch_cpu c10)
  get_target_property(_torch_inc torch INTERFACE_INCLUDE_DIRECTORIES)
  if(_torch_inc)
    target_include_directories(accelkit_torch SYSTEM INTERFACE ${_torch_inc})
  endif()
  if(TORCH_CXX_FLAGS)
    separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
    target_compile_options(accelkit_torch INTERFACE ${_torch_flags})
  endif()
endif()
