# The out-of-process plugin scan against fixture plugins that crash, hang, abort, exit, throw
# or allocate too much while being examined (tests/fixtures/plugins), in-process, through
# Runtime::start and through the CLI.
if(NOT TARGET accelkit OR NOT TARGET accelkit-plugin-cpu)
  message(STATUS "plugin_scan_test skipped: needs the accelkit CLI and the CPU plugin")
  return()
endif()
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()
accelkit_add_test(plugin_scan_test SOURCES plugin_scan_test.cpp LINK accelkit::core nlohmann_json::nlohmann_json GROUP host)
target_compile_definitions(${plugin_scan_test_target} PRIVATE
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>"
  ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
add_dependencies(${plugin_scan_test_target} accelkit accelkit-plugin-scanner accelkit-plugin-cpu accelkit_fixture_plugins)
set_tests_properties(plugin_scan_test PROPERTIES TIMEOUT 600)
