#pragma once
// One blocking libpq session, for the command line only (`--migrate`, `--check`'s replication
// report, idemrelay's `--list-parked` and `--redrive`): every call blocks the calling thread, so
// never on an io thread. The one place those commands connect, run a statement or a script, and
// say what failed (with the SQLSTATE).
#include <libpq-fe.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "pg/handles.hpp"
#include "pg/statement.hpp"

namespace idem::pg {

class BlockingSession {
 public:
  // Connects as the pool does: `server_options` appended to the DSN's own `options` (the DSN's
  // other settings, e.g. -c search_path=..., stay), every host in turn, `connect_timeout` per host
  // unless the DSN sets one (libpq counts whole seconds: 2 at the least). ok() says whether it did;
  // error() then says why not ("connect: ..."). Notices are dropped: the commands print their own
  // result, and "relation ... already exists, skipping" is not worth a line.
  BlockingSession(const std::string& dsn, std::chrono::milliseconds connect_timeout,
                  const std::string& server_options = kNoServerOptions);
  BlockingSession(const BlockingSession&) = delete;
  BlockingSession& operator=(const BlockingSession&) = delete;

  bool ok() const { return connection_ != nullptr; }
  // The last failure: "<step>: <server message> (SQLSTATE xxxxx)".
  const std::string& error() const { return error_; }

  // One statement, binary parameters and results. Null when it failed (error() says why).
  ResultHandle run(std::string_view step, const char* sql, const std::vector<Param>& params = {});
  // Several statements in one string (the simple protocol: a migration file). Null on failure.
  ResultHandle run_script(std::string_view step, const std::string& script);

  static constexpr const char* kNoServerOptions = "";

 private:
  ResultHandle checked(ResultHandle result, std::string_view step);

  ConnHandle connection_;
  std::string error_;
};

}  // namespace idem::pg
