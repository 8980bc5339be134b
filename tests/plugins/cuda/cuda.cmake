# CUDA plugin suites. Without a GPU: the probe, rules and monitor against fake drivers, the
# fixture libcuda through the real dlopen path, the built plugin through dlopen and the CLI.
# The kernel suite is built wherever nvcc is (it skips without a GPU); the LibTorch-CUDA
# suite only where LibTorch has CUDA.
if(NOT TARGET accelkit_cuda_probe)
  return()
endif()

# A stand-in libcuda.so.1: two fake GPUs (fixtures/cuda/fake_libcuda.c).
add_library(cuda_fake_libcuda MODULE fixtures/cuda/fake_libcuda.c)
set_target_properties(cuda_fake_libcuda PROPERTIES
  OUTPUT_NAME fake_libcuda PREFIX lib
  LIBRARY_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/fixtures/cuda"
  C_VISIBILITY_PRESET hidden)
set(_fake_libcuda "${CMAKE_CURRENT_BINARY_DIR}/fixtures/cuda/libfake_libcuda.so")

accelkit_add_test(cuda_rules_test SOURCES plugins/cuda/cuda_rules_test.cpp LINK accelkit_cuda_probe)
accelkit_add_test(cuda_probe_test SOURCES plugins/cuda/cuda_probe_test.cpp LINK accelkit_cuda_probe)
target_compile_definitions(cuda_probe_test PRIVATE ACCELKIT_FAKE_LIBCUDA="${_fake_libcuda}")
add_dependencies(cuda_probe_test cuda_fake_libcuda)

# The built module, dlopened as the host does: with the real driver name, then the fixture.
accelkit_add_test(cuda_plugin_test SOURCES plugins/cuda/cuda_plugin_test.cpp
  LINK accelkit::sdk accelkit_torch ${CMAKE_DL_LIBS})
target_compile_definitions(cuda_plugin_test PRIVATE
  ACCELKIT_CUDA_PLUGIN_PATH="$<TARGET_FILE:accelkit-plugin-cuda>")
add_dependencies(cuda_plugin_test accelkit-plugin-cuda cuda_fake_libcuda)
add_test(NAME cuda_plugin_fake_driver_test COMMAND cuda_plugin_test)
set_tests_properties(cuda_plugin_fake_driver_test PROPERTIES ENVIRONMENT
  "ACCELKIT_CUDA_DRIVER_LIB=${_fake_libcuda};ACCELKIT_NVML_LIB=/nonexistent/libnvidia-ml.so.1")

# The CLI with the plugin present: it still works and shows what the plugin found.
if(TARGET accelkit)
  set(_plugin_dir "$<TARGET_FILE_DIR:accelkit-plugin-cuda>")
  add_test(NAME cuda_cli_plugins_test COMMAND accelkit plugins -v)
  set_tests_properties(cuda_cli_plugins_test PROPERTIES
    ENVIRONMENT "ACCELKIT_PLUGIN_PATH=${_plugin_dir}"
    PASS_REGULAR_EXPRESSION "libaccelkit-cuda\\.so")
  add_test(NAME cuda_cli_info_test COMMAND accelkit info)
  set_tests_properties(cuda_cli_info_test PROPERTIES
    ENVIRONMENT "ACCELKIT_PLUGIN_PATH=${_plugin_dir};ACCELKIT_CUDA_DRIVER_LIB=${_fake_libcuda}"
    PASS_REGULAR_EXPRESSION "H100")
  # An explicit request for a GPU LibTorch here cannot drive: exit 3, never a CPU fallback.
  # (Only where LibTorch has no CUDA: a CUDA LibTorch drives the fake driver's cuda:0.)
  if(NOT TARGET accelkit_cuda_torch)
    add_test(NAME cuda_cli_device_test
      COMMAND sh -c "\"$1\" info --device cuda:0; test $? -eq 3" sh "$<TARGET_FILE:accelkit>")
    set_tests_properties(cuda_cli_device_test PROPERTIES
      ENVIRONMENT "ACCELKIT_PLUGIN_PATH=${_plugin_dir};ACCELKIT_CUDA_DRIVER_LIB=${_fake_libcuda}")
  endif()
endif()

if(TARGET accelkit_cuda_adamw_kernel)
  find_package(CUDAToolkit REQUIRED)  # its imported targets are per directory
  accelkit_add_test(cuda_adamw_kernel_test SOURCES plugins/cuda/cuda_adamw_kernel_test.cpp
    LINK accelkit_cuda_adamw_kernel CUDA::cudart_static)
  set_target_properties(cuda_adamw_kernel_test PROPERTIES LINKER_LANGUAGE CXX)
  target_compile_options(cuda_adamw_kernel_test PRIVATE "$<$<CXX_COMPILER_ID:GNU,Clang>:-ffp-contract=off>")
endif()

if(TARGET accelkit_cuda_torch)
  accelkit_add_test(cuda_torch_gpu_test SOURCES plugins/cuda/cuda_torch_gpu_test.cpp
    LINK accelkit_cuda_torch accelkit_cuda_probe torch)
  # accelkit/prefetch.hpp (header-only) from the core.
  target_include_directories(${cuda_torch_gpu_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/core/data/include")
endif()
