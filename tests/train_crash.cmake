# accelkit train killed (SIGKILL) at random points and resumed, twenty times.
if(NOT TARGET accelkit OR NOT TARGET accelkit-plugin-cpu)
  message(STATUS "train_crash_test skipped: needs the accelkit CLI and the CPU plugin")
  return()
endif()
accelkit_add_test(train_crash_test SOURCES train_crash_test.cpp LINK accelkit::train nlohmann_json::nlohmann_json GROUP host)
target_compile_definitions(${train_crash_test_target} PRIVATE
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>"
  ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${train_crash_test_target} accelkit accelkit-plugin-cpu)
set_tests_properties(train_crash_test PROPERTIES TIMEOUT 600)
