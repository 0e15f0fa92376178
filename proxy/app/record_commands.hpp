#pragma once
// Operator commands on one record, run from the command line against the configured store:
//   idemproxy --config F --inspect ROUTE KEY [--header "Name: value"]...
//   idemproxy --config F --release ROUTE KEY [--header "Name: value"]...
// The headers are the route's scope headers as the original request sent them (e.g. the tenant),
// from which the record's scope is computed exactly as the proxy does.
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace idem::app {

struct RecordCommand {
  enum class Kind { inspect, release } kind = Kind::inspect;
  std::string route;
  std::string key;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Prints the outcome (inspect: the record as JSON) and returns the process exit code:
// 0 done, 3 no such record (or not releasable), 1 error.
int run_record_command(const config::Config& config, const RecordCommand& command);

}  // namespace idem::app
