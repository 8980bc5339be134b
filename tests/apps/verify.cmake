# accelkit verify and accelkit::conformance: the CPU plugin and an honest fixture plugin pass,
# each lying fixture plugin (tests/fixtures/plugins/liar_plugin.cpp) fails naming its claim.
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()
accelkit_add_cli_test(verify_test SOURCES apps/verify_test.cpp LINK accelkit::conformance)
if(TARGET ${verify_test_target})
  target_compile_definitions(${verify_test_target} PRIVATE
    ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}"
    ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  add_dependencies(${verify_test_target} accelkit_fixture_plugins)
endif()
