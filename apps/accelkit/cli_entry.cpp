// The CLI module's one export, called by the accelkit executable (launcher.cpp) once it has
// checked the LibTorch this module links.
namespace accelkit::cli {
int command_line_main(int argc, char** argv);  // cli_main.cpp
}

extern "C" __attribute__((visibility("default"))) int accelkit_cli_main(int argc, char** argv) {
  return accelkit::cli::command_line_main(argc, argv);
}
