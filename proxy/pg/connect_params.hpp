#pragma once
// A DSN (key=value or URI, one host or several: host=a,b port=p,q) as the keyword/value arrays
// PQconnectStartParams and PQconnectdbParams take, with the server options every session of ours
// asks for appended to the DSN's own `options` (so they win over a setting there while the DSN's
// other settings, e.g. -c search_path=..., stay).
#include <optional>
#include <string>
#include <vector>

#include "pg/handles.hpp"

namespace idem::pg {

// What every session of ours asks the server for: a commit the server acknowledged must survive a
// server crash, whatever the server's default. (Poolers that refuse the `options` startup
// parameter need the setting on the role instead: see the README.)
inline constexpr const char* kSessionServerOptions = "-c synchronous_commit=on";

class ConnectParams {
 public:
  // `connect_timeout_seconds`: libpq's per-host connect_timeout, added when the DSN has none
  // (blocking connections only: the async driver keeps its own deadline).
  ConnectParams(const std::string& dsn, const std::string& extra_options,
                std::optional<int> connect_timeout_seconds = std::nullopt);
  ConnectParams(const ConnectParams&) = delete;
  ConnectParams& operator=(const ConnectParams&) = delete;

  // False when libpq cannot parse the DSN (connecting with the raw DSN then reports why).
  bool parsed() const { return !keywords_.empty(); }
  // NULL-terminated, valid while this object lives (expand_dbname = 0).
  const char* const* keywords() const { return keywords_.data(); }
  const char* const* values() const { return values_.data(); }

 private:
  ConninfoHandle parsed_;
  std::string options_;
  std::string connect_timeout_;
  std::vector<const char*> keywords_;
  std::vector<const char*> values_;
};

}  // namespace idem::pg
