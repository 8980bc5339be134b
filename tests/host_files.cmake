# The machine's own files at their worst (FIFOs, implausible values), through the CLI.
accelkit_add_cli_test(host_files_test SOURCES host_files_test.cpp)
