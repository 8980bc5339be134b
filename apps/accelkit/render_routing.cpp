#include "render_routing.hpp"

#include "accelkit/routing.hpp"
#include "table.hpp"

namespace accelkit::cli {
namespace {
std::vector<Route> routes(const Context& ctx) {
  return routes_for(ctx.require_device().device, ctx.settings());
}
}  // namespace

void render_routing(std::ostream& out, const Context& ctx) {
  out << "Operation routing (device " << ctx.require_device().device.id << "):\n";
  Table t({"OP", "DEVICE", "ORIGIN", "SOURCE", "WHY"});
  for (const Route& r : routes(ctx))
    t.add_row({std::string(to_string(r.op)), r.device.str(), r.origin, r.source, r.reason});
  t.print(out);
}

Json routing_json(const Context& ctx) {
  Json list = Json::array();
  for (const Route& r : routes(ctx))
    list.push_back(Json{{"op", std::string(to_string(r.op))},
                        {"device", r.device.str()},
                        {"on_device", r.on_device},
                        {"origin", r.origin},
                        {"source", r.source},
                        {"reason", r.reason}});
  return list;
}

}  // namespace accelkit::cli
