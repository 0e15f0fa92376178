#pragma once
// The tests' one blocking Postgres client: a libpq connection owned by this object, statements
// with text parameters, results as strings (text, or the raw bytes Postgres holds). Test threads
// only: every call blocks. Throws std::runtime_error with the server's message on failure, except
// try_column(), which reports failure through error() for tests that expect a statement to fail.
// libpq stays out of this header: only blocking_pg.cpp includes libpq-fe.h.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct pg_conn;  // libpq's PGconn

namespace idem::test {

using PgRow = std::vector<std::optional<std::string>>;  // nullopt: SQL NULL

enum class PgFormat {
  text,    // values as Postgres prints them
  binary,  // raw bytes as stored (bytea as is, int4 in network order)
};

class BlockingPg {
 public:
  // Connects to dsn (key=value or URI). Throws std::runtime_error("connect: <libpq message>").
  explicit BlockingPg(const std::string& dsn);
  ~BlockingPg();
  BlockingPg(BlockingPg&&) noexcept;
  BlockingPg& operator=(BlockingPg&&) noexcept;

  // Every row of one statement. Throws std::runtime_error("<sql>: <server message>").
  std::vector<PgRow> query(const std::string& sql, const std::vector<std::string>& params = {},
                           PgFormat format = PgFormat::text);
  // A command; the rows it affected (PQcmdTuples; 0 when it reports none).
  std::int64_t execute(const std::string& sql, const std::vector<std::string>& params = {});
  // The one value of a one-row, one-column result (nullopt for NULL); throws for any other shape.
  std::optional<std::string> scalar(const std::string& sql, const std::vector<std::string>& params = {});
  // scalar() as an integer; throws for NULL.
  std::int64_t scalar_int(const std::string& sql, const std::vector<std::string>& params = {});
  // The first column of every row ("" for NULL; no rows for a command).
  std::vector<std::string> column(const std::string& sql, const std::vector<std::string>& params = {});
  // column() that does not throw: nullopt on failure, with the server's message in error().
  std::optional<std::vector<std::string>> try_column(const std::string& sql,
                                                     const std::vector<std::string>& params = {});

  // True while the session is up (false once the server terminated it).
  bool ok() const;
  // The last failure's message ("" after a success).
  const std::string& error() const { return last_error_; }

 private:
  struct Closer {
    void operator()(pg_conn* connection) const noexcept;
  };
  std::unique_ptr<pg_conn, Closer> connection_;
  std::string last_error_;
  std::int64_t affected_ = 0;  // of the last statement
};

// dsn (key=value or URI) in key=value form with one keyword replaced or added.
std::string dsn_with(const std::string& dsn, const std::string& keyword, const std::string& value);
// dsn whose sessions resolve unqualified names in schema: `-c search_path=<schema>` added to its
// server options (any it had are kept).
std::string dsn_with_search_path(const std::string& dsn, const std::string& schema);

}  // namespace idem::test
