# Settings under hostile input: a generated corpus, in process and through the CLI.
if(NOT TARGET accelkit OR NOT TARGET accelkit-plugin-cpu)
  message(STATUS "settings_fuzz_test skipped: needs the accelkit CLI and the CPU plugin")
  return()
endif()
accelkit_add_test(settings_fuzz_test SOURCES settings_fuzz_test.cpp LINK accelkit_core GROUP host)
target_compile_definitions(${settings_fuzz_test_target} PRIVATE
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>"
  ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${settings_fuzz_test_target} accelkit accelkit-plugin-cpu)
