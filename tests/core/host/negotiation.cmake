# Negotiation suite: negotiate() on hand-built records and on the loaded fake plugins.
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()

accelkit_add_test(negotiation_test SOURCES core/host/negotiation_test.cpp LINK accelkit::core GROUP host)
target_compile_definitions(${negotiation_test_target} PRIVATE
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
target_include_directories(${negotiation_test_target} PRIVATE
  "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/plugins")
add_dependencies(${negotiation_test_target} accelkit_fixture_plugins)
