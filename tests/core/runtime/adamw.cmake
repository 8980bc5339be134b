if(NOT TARGET accelkit_cpu_adamw)
  include(${PROJECT_SOURCE_DIR}/plugins/cpu/fused_adamw.cmake)
endif()
accelkit_add_test(adamw_test SOURCES core/runtime/adamw_test.cpp LINK accelkit_cpu_adamw accelkit_torch GROUP runtime)
accelkit_add_test(master_weights_test SOURCES core/runtime/master_weights_test.cpp LINK accelkit_cpu_adamw accelkit_torch GROUP runtime)
# The out-of-tree example plugin's SimpleAdamW, compiled from its source.
accelkit_add_test(example_adamw_test
  SOURCES core/runtime/example_adamw_test.cpp ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin/simple_adamw.cpp
  LINK accelkit::sdk accelkit_torch GROUP runtime)
target_include_directories(${example_adamw_test_target} PRIVATE ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin)
# LibTorch's fused SGD (support::AtenFusedSGD) against torch::optim::SGD.
accelkit_add_test(aten_sgd_test SOURCES core/runtime/aten_sgd_test.cpp LINK accelkit::sdk accelkit_torch GROUP runtime)
# LibTorch's fused AdamW (support::AtenFusedAdamW) and the core's measured choice among a
# plugin's AdamW implementations, against the built CPU plugin.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(aten_adamw_test SOURCES core/runtime/aten_adamw_test.cpp LINK accelkit::core GROUP runtime)
  target_compile_definitions(${aten_adamw_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${aten_adamw_test_target} accelkit-plugin-cpu)
endif()
# Replacing one interface: the example add-on plugin (no device; an AdamW for CPU devices),
# built from the example's sources into its own directory.
if(TARGET accelkit-plugin-cpu)
  set(ACCELKIT_ADDON_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/addon-plugins")
  accelkit_add_plugin(adamw_addon NO_INSTALL OUTPUT_DIRECTORY "${ACCELKIT_ADDON_PLUGIN_DIR}"
    SOURCES ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin/adamw_addon_plugin.cpp
            ${PROJECT_SOURCE_DIR}/examples/out-of-tree-plugin/simple_adamw.cpp)
  accelkit_add_test(adamw_addon_test SOURCES core/runtime/adamw_addon_test.cpp LINK accelkit::core GROUP runtime)
  target_compile_definitions(${adamw_addon_test_target} PRIVATE
    ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
    ACCELKIT_ADDON_PLUGIN_DIR="${ACCELKIT_ADDON_PLUGIN_DIR}")
  add_dependencies(${adamw_addon_test_target} accelkit-plugin-cpu accelkit-plugin-adamw_addon)
endif()
# The CPU plugin's fused SGD against torch::optim::SGD, checkpoints both ways, Runtime::make_sgd
# on the built CPU plugin, and the program's random streams across Runtime::start.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(sgd_test SOURCES core/runtime/sgd_test.cpp LINK accelkit::core accelkit_cpu_adamw GROUP runtime)
  target_compile_definitions(${sgd_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${sgd_test_target} accelkit-plugin-cpu)
endif()
# The program's own optimizer (Adam, AdamW, SGD, others) taken by Runtime::prepare and stepped by
# Runtime::step with the CPU plugin's fused update, against torch::optim on fresh random data.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(adopt_test SOURCES core/runtime/adopt_test.cpp LINK accelkit::core GROUP runtime)
  target_compile_definitions(${adopt_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${adopt_test_target} accelkit-plugin-cpu)
endif()
# The CPU plugin's operator kernels through a Runtime: the plan, the setting, the gate, and
# max_pool2d against LibTorch's own kernel (the pure plan rules from accelkit_cpu_adamw).
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(operator_kernels_test SOURCES core/runtime/operator_kernels_test.cpp LINK accelkit::core accelkit_cpu_adamw GROUP runtime)
  target_compile_definitions(${operator_kernels_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${operator_kernels_test_target} accelkit-plugin-cpu)
endif()
# Decision-cache entries that are no entries (FIFO, socket, directory, oversized, garbage) and
# cache directories that cannot be used, through the base's reader and the AdamW choice on the
# built CPU plugin: one line each, no hang, the decision still made.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(cache_entry_test SOURCES core/runtime/cache_entry_test.cpp
    LINK accelkit::core nlohmann_json::nlohmann_json GROUP runtime)
  target_compile_definitions(${cache_entry_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${cache_entry_test_target} accelkit-plugin-cpu)
endif()
# The CPU plugin's GEMM path for convolutions (plugins/cpu/conv_gemm.hpp) through a Runtime and
# called directly, and its per-shape timed choice (conv_choice.hpp), against LibTorch's own
# kernel and fp64 on fresh random inputs.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(conv_gemm_test SOURCES core/runtime/conv_gemm_test.cpp LINK accelkit::core accelkit_cpu_adamw
    GROUP runtime)
  target_compile_definitions(${conv_gemm_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${conv_gemm_test_target} accelkit-plugin-cpu)
endif()
# The CPU plugin's Winograd F(2x2,3x3) convolution (plugins/cpu/conv_winograd.hpp) called
# directly, against fp64 on fresh random inputs.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(conv_winograd_test SOURCES core/runtime/conv_winograd_test.cpp LINK accelkit::core accelkit_cpu_adamw
    GROUP runtime)
endif()
# malloc_reuse: the decision for each setting, environment and malloc, and its effect through a
# Runtime on the built CPU plugin (a block above glibc's own mmap limit comes from the heap).
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(malloc_reuse_test SOURCES core/runtime/malloc_reuse_test.cpp LINK accelkit::core GROUP runtime)
  target_compile_definitions(${malloc_reuse_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${malloc_reuse_test_target} accelkit-plugin-cpu)
endif()
# The CPU plugin's training-mode batch_norm (plugins/cpu/batch_norm_op.hpp) through a Runtime,
# against LibTorch's own kernel and fp64 on fresh random inputs.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(batch_norm_kernel_test SOURCES core/runtime/batch_norm_kernel_test.cpp LINK accelkit::core
    GROUP runtime)
  target_compile_definitions(${batch_norm_kernel_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${batch_norm_kernel_test_target} accelkit-plugin-cpu)
endif()
# The CPU plugin's bernoulli_ (plugins/cpu/bernoulli_op.hpp), dropout's mask, through a Runtime,
# element by element against LibTorch's own Philox engine; its AVX2 and AVX-512 loops against the
# scalar Philox.
if(TARGET accelkit-plugin-cpu)
  accelkit_add_test(dropout_kernel_test SOURCES core/runtime/dropout_kernel_test.cpp LINK accelkit::core
    accelkit_cpu_adamw GROUP runtime)
  target_compile_definitions(${dropout_kernel_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${dropout_kernel_test_target} accelkit-plugin-cpu)
endif()
