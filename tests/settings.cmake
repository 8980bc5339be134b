accelkit_add_test(settings_test SOURCES settings_test.cpp LINK accelkit_core tomlplusplus::tomlplusplus)
# The parse counter is internal to the core.
target_include_directories(settings_test PRIVATE "${PROJECT_SOURCE_DIR}/core/src")
