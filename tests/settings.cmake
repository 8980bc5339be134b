accelkit_add_test(settings_test SOURCES settings_test.cpp LINK accelkit_core tomlplusplus::tomlplusplus)
