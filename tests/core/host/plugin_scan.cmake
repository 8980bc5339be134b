# The out-of-process plugin scan against fixture plugins that crash, hang, abort, exit, throw
# or allocate too much while being examined (tests/fixtures/plugins), in-process, through
# Runtime::start and through the CLI.
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()
accelkit_add_cli_test(plugin_scan_test SOURCES core/host/plugin_scan_test.cpp LINK accelkit::core)
if(TEST plugin_scan_test)
  target_compile_definitions(${plugin_scan_test_target} PRIVATE ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
  add_dependencies(${plugin_scan_test_target} accelkit_fixture_plugins)
  set_tests_properties(plugin_scan_test PROPERTIES TIMEOUT 600)
endif()
