// accelkit plugins [-v]: every plugin found and what became of it.
#include <algorithm>
#include <iostream>

#include "cli.hpp"
#include "json_out.hpp"
#include "render.hpp"
#include "table.hpp"

namespace accelkit::cli {

// Lists plugins whatever the device request: this is where one looks to see why a device is
// missing, so an unavailable device does not fail it.
int verb_plugins(const Invocation& inv, const Context& ctx) {
  const Discovery& disc = ctx.discovery();
  if (inv.json) {
    Json j{{"plugins", plugins_json(disc.plugins)}, {"scan", disc.scan_note}};
    if (inv.verbose) {
      Json dirs = Json::array();
      for (const auto& dir : disc.dirs) dirs.push_back(Json{{"path", dir.path}, {"origin", dir.origin}});
      j["search_dirs"] = std::move(dirs);
      j["trace"] = disc.trace;
    }
    print_json(j);
    return kExitOk;
  }
  std::ostream& out = std::cout;
  if (inv.verbose) {
    out << "Search path (in order):\n";
    if (disc.dirs.empty()) {
      out << "  none\n";
    } else {
      Table t({"#", "DIRECTORY", "FROM"});
      t.right_align(0);
      for (std::size_t i = 0; i < disc.dirs.size(); ++i)
        t.add_row({std::to_string(i + 1), disc.dirs[i].path, disc.dirs[i].origin});
      t.print(out);
    }
    out << '\n';
  }
  render_plugins(out, disc.plugins, inv.verbose);
  if (inv.verbose || std::any_of(disc.plugins.begin(), disc.plugins.end(),
                                 [](const PluginRecord& p) { return p.scan.rfind("failed", 0) == 0; }))
    out << "Scan: " << disc.scan_note << '\n';
  if (inv.verbose) {
    out << "\nTrace:\n";
    if (disc.trace.empty()) out << "  (empty)\n";
    for (const auto& line : disc.trace) out << "  " << line << '\n';
  }
  out << std::flush;
  return kExitOk;
}

}  // namespace accelkit::cli
