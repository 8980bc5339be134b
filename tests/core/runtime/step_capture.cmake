# Graph capture through the plugin contract without a GPU: Runtime::capture_step on the built
# CPU plugin (the compile setting's rules), a fake Device's CapturedStep (record, refuse, fall
# back), and the bench's step mode.
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "step_capture_test skipped: needs the CPU plugin")
  return()
endif()
accelkit_add_test(step_capture_test SOURCES core/runtime/step_capture_test.cpp LINK accelkit::bench nlohmann_json::nlohmann_json GROUP runtime)
target_compile_definitions(${step_capture_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${step_capture_test_target} accelkit-plugin-cpu)
