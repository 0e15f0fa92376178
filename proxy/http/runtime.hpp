#pragma once
// What a worker's request handling needs: the current configuration snapshot and the worker's
// own store and upstream pool. All of it belongs to one io thread.
#include <memory>

#include "config/config.hpp"
#include "core/route_table.hpp"

namespace idem::store { class Store; }

namespace idem::http {

class UpstreamPool;

// An immutable configuration snapshot. Requests hold a shared_ptr to the one they started with,
// so a reload never changes the rules under a request in progress.
struct RuntimeConfig {
  config::Config config;
  core::RouteTable routes;
  explicit RuntimeConfig(config::Config loaded) : config(std::move(loaded)), routes(config.routes) {}
};

struct WorkerServices {
  std::shared_ptr<const RuntimeConfig> config;
  store::Store& store;
  UpstreamPool& upstream;
};

}  // namespace idem::http
