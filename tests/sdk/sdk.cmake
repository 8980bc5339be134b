# SDK room: what the SDK ships to every plugin (header-only support helpers).
accelkit_add_test(host_file_test SOURCES sdk/host_file_test.cpp LINK accelkit::sdk)
