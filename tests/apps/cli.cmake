# CLI suite: runs the built accelkit binary as a subprocess against the CPU plugin and the
# fake plugins (tests/fixtures/plugins), with configs from tests/fixtures/cli.
if(NOT TARGET accelkit OR NOT TARGET accelkit-plugin-cpu)
  message(STATUS "cli_test skipped: needs the accelkit CLI and the CPU plugin")
  return()
endif()
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()

accelkit_add_test(cli_test SOURCES apps/cli_test.cpp LINK accelkit::core nlohmann_json::nlohmann_json GROUP host)
target_compile_definitions(${cli_test_target} PRIVATE
  ACCELKIT_CLI_PATH="$<TARGET_FILE:accelkit>"
  ACCELKIT_CPU_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}"
  ACCELKIT_CLI_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cli")
target_include_directories(${cli_test_target} PRIVATE
  "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/plugins")
add_dependencies(${cli_test_target} accelkit accelkit-plugin-cpu accelkit_fixture_plugins)

# The accelkit executable refuses another LibTorch found first, naming both versions.
add_library(accelkit-fixture-fake-c10 SHARED fixtures/launcher/fake_c10.c)
set_target_properties(accelkit-fixture-fake-c10 PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/fixture-launcher")
add_test(NAME launcher_test
  COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/apps/launcher_test.sh" "$<TARGET_FILE:accelkit>" "${ACCELKIT_TORCH_VERSION}"
          "$<TARGET_SONAME_FILE_NAME:c10>" "$<TARGET_FILE:accelkit-fixture-fake-c10>")

# bench against a decision cache it cannot trust (FIFO and garbage entries, a directory that
# cannot be used), every run with a deadline.
accelkit_add_cli_test(bench_cache_test SOURCES apps/bench_cache_test.cpp)
