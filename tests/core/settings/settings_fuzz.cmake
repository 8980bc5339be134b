# Settings under hostile input: a generated corpus, in process and through the CLI.
accelkit_add_cli_test(settings_fuzz_test SOURCES core/settings/settings_fuzz_test.cpp LINK accelkit_core)
