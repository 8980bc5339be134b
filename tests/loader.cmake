# Loader suite: discovery, the handshake and every way a plugin can be refused, against the
# fixture plugins (tests/fixtures/plugins).
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()

accelkit_add_test(loader_test SOURCES loader_test.cpp LINK accelkit::core)
target_compile_definitions(loader_test PRIVATE
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
target_include_directories(loader_test PRIVATE
  "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/plugins")
add_dependencies(loader_test accelkit_fixture_plugins)
