# Loader suite: discovery, the handshake and every way a plugin can be refused, against the
# fixture plugins (tests/fixtures/plugins).
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()

accelkit_add_test(loader_test SOURCES core/host/loader_test.cpp LINK accelkit::core GROUP host)
target_compile_definitions(${loader_test_target} PRIVATE
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
target_include_directories(${loader_test_target} PRIVATE
  "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/plugins")
add_dependencies(${loader_test_target} accelkit_fixture_plugins)
# The pre-load ELF reader is internal to the core.
target_include_directories(${loader_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/core/host/src")

# Both LibTorch builds on one machine (scripts/setup --all sets ACCELKIT_OTHER_BUILD_DIR to the
# other build tree): this build's accelkit refuses the other build's plugins from the file,
# naming both LibTorch versions.
set(ACCELKIT_OTHER_BUILD_DIR "" CACHE PATH "An accelkit build tree made against another LibTorch")
if(ACCELKIT_OTHER_BUILD_DIR AND TARGET accelkit)
  add_test(NAME cross_libtorch_plugins
    COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/core/host/cross_libtorch_test.sh" "$<TARGET_FILE:accelkit>"
            "${ACCELKIT_TORCH_VERSION}" "${ACCELKIT_OTHER_BUILD_DIR}")
endif()
