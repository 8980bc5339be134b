# The machine's own files at their worst (FIFOs, implausible values), through the CLI.
if(NOT TARGET accelkit OR NOT TARGET accelkit-plugin-cpu)
  message(STATUS "host_files_test skipped: needs the accelkit CLI and the CPU plugin")
  return()
endif()
accelkit_add_test(host_files_test SOURCES host_files_test.cpp LINK nlohmann_json::nlohmann_json GROUP host)
target_compile_definitions(${host_files_test_target} PRIVATE
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>"
  ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${host_files_test_target} accelkit accelkit-plugin-scanner accelkit-plugin-cpu)
