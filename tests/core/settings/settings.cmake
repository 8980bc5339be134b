accelkit_add_test(settings_test SOURCES core/settings/settings_test.cpp LINK accelkit_core tomlplusplus::tomlplusplus GROUP host)
# The parse counter is internal to the core.
target_include_directories(${settings_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/core/settings/src")
