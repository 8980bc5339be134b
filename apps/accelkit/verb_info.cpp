// accelkit info: the selected device and why, plugins, devices, settings.
#include <iostream>

#include "accelkit/loader.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/version.hpp"
#include "cli.hpp"
#include "json_out.hpp"
#include "render.hpp"

namespace accelkit::cli {

int verb_info(const Invocation& inv, const Context& ctx) {
  const Decision& d = ctx.decision();
  if (inv.json) {
    Json j{{"accelkit_version", ACCELKIT_VERSION_STRING},
           {"torch_version", host_torch_version()},
           {"selected", selected_json(d)},
           {"decision", decision_json(d)},
           {"plugins", plugins_json(ctx.discovery().plugins)},
           {"settings", settings_json(ctx.settings())}};
    if (ctx.settings().config_file()) j["config_file"] = *ctx.settings().config_file();
    print_json(j);
  } else {
    std::ostream& out = std::cout;
    out << "accelkit " << ACCELKIT_VERSION_STRING << " · LibTorch " << host_torch_version() << "\n\n";
    render_selected(out, d);
    out << '\n';
    render_candidates(out, d);
    out << '\n';
    render_plugins(out, ctx.discovery().plugins, false);
    out << '\n';
    render_devices(out, ctx.discovery().plugins);
    out << '\n';
    render_device_types(out, ctx.discovery().plugins);
    out << '\n';
    render_settings(out, ctx.settings());
    out << std::flush;
  }
  return d.ok ? kExitOk : report_device_failure(ctx);
}

int start_error_exit() {
  try {
    throw;
  } catch (const SettingsError& e) {
    std::cerr << "accelkit: " << e.what() << '\n';
    return kExitUsage;
  } catch (const DeviceUnavailableError& e) {
    std::cerr << "accelkit: device unavailable: " << e.what() << '\n';
    return kExitUnavailable;
  }
}

int report_device_failure(const Context& ctx) {
  const Decision& d = ctx.decision();
  if (d.explicit_request) {
    std::cerr << "accelkit: requested device unavailable: "
              << (d.error.empty() ? std::string("no reason given") : d.error) << '\n';
    return kExitUnavailable;
  }
  std::cerr << "accelkit: no usable device"
            << (d.error.empty() ? std::string(" (no plugin offered one)") : ": " + d.error) << '\n'
            << "accelkit: run 'accelkit plugins -v' to see every plugin tried and why.\n";
  return kExitFailure;
}

}  // namespace accelkit::cli
