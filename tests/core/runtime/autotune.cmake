# Auto-tuner suite: the pure choice, and accelkit::autotune on a small model through the built
# CPU plugin with the cache in a temporary directory (hit, corrupt, stale, --no-cache, fixed
# settings, the model restored).
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "autotune_test skipped: needs the CPU plugin")
  return()
endif()
accelkit_add_test(autotune_test SOURCES core/runtime/autotune_test.cpp LINK accelkit::train GROUP runtime)
target_compile_definitions(${autotune_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${autotune_test_target} accelkit-plugin-cpu)
# Observe, then switch: the step tuner on a scripted clock and on a real loop through the CPU plugin.
accelkit_add_test(step_tuning_test SOURCES core/runtime/step_tuning_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${step_tuning_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${step_tuning_test_target} accelkit-plugin-cpu)

# The channels-last watch: its view check against LibTorch's view(), and a step's operators.
accelkit_add_test(layout_watch_test SOURCES core/runtime/layout_watch_test.cpp LINK accelkit::core GROUP runtime)
