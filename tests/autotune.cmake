# Auto-tuner suite: the pure choice, and Runtime::autotune on a small model through the built
# CPU plugin with the cache in a temporary directory (hit, corrupt, stale, --no-cache, fixed
# settings, the model restored).
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "autotune_test skipped: needs the CPU plugin")
  return()
endif()
accelkit_add_test(autotune_test SOURCES autotune_test.cpp LINK accelkit::train GROUP runtime)
target_compile_definitions(${autotune_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${autotune_test_target} accelkit-plugin-cpu)
# Observe, then switch: the step tuner on a scripted clock and on a real loop through the CPU plugin.
accelkit_add_test(step_tuning_test SOURCES step_tuning_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${step_tuning_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${step_tuning_test_target} accelkit-plugin-cpu)

# Runtime::optimize_for_inference on TorchScript modules made in C++.
accelkit_add_test(inference_test SOURCES inference_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${inference_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# Runtime::quantize: dynamic INT8 Linear through the engine the CPU plugin names.
accelkit_add_test(quantize_test SOURCES quantize_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${quantize_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# check_alignment: model sizes against the multiples a device states.
accelkit_add_test(alignment_test SOURCES alignment_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${alignment_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# accelkit report --model FILE: the alignment through the CLI.
accelkit_add_cli_test(report_model_test SOURCES report_model_test.cpp LINK accelkit::core)
