#include "support/blocking_pg.hpp"

#include <libpq-fe.h>

#include <stdexcept>
#include <string_view>
#include <utility>

#include "pg/handles.hpp"

namespace idem::test {
namespace {

using Result = pg::ResultHandle;
using Conninfo = pg::ConninfoHandle;

// A conninfo value: as it is when it is a plain word (so that `port=5432` stays greppable), else
// single-quoted with ' and \ escaped.
std::string conninfo_value(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789_.-/:") == std::string::npos;
  if (plain) return text;
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "'";
}

Conninfo parse_dsn(const std::string& dsn) {
  char* error = nullptr;
  Conninfo options(PQconninfoParse(dsn.c_str(), &error));
  if (!options) {
    const std::string message = error != nullptr ? error : "cannot parse the DSN";
    PQfreemem(error);
    throw std::runtime_error(message);
  }
  return options;
}

std::string trimmed(std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message;
}

}  // namespace

void BlockingPg::Closer::operator()(pg_conn* connection) const noexcept { pg::PgConnDeleter{}(connection); }

BlockingPg::BlockingPg(const std::string& dsn) : connection_(PQconnectdb(dsn.c_str())) {
  if (!connection_ || PQstatus(connection_.get()) != CONNECTION_OK) {
    throw std::runtime_error("connect: " +
                             trimmed(connection_ ? PQerrorMessage(connection_.get()) : "out of memory"));
  }
  // NOTICEs (DROP ... CASCADE lists what it drops) are not worth a test log.
  PQsetNoticeProcessor(connection_.get(), [](void*, const char*) {}, nullptr);
}

BlockingPg::~BlockingPg() = default;
BlockingPg::BlockingPg(BlockingPg&&) noexcept = default;
BlockingPg& BlockingPg::operator=(BlockingPg&&) noexcept = default;

bool BlockingPg::ok() const { return connection_ && PQstatus(connection_.get()) == CONNECTION_OK; }

std::vector<PgRow> BlockingPg::query(const std::string& sql, const std::vector<std::string>& params,
                                     PgFormat format) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::string& param : params) values.push_back(param.c_str());
  const Result result(PQexecParams(connection_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                                   values.data(), nullptr, nullptr, format == PgFormat::binary ? 1 : 0));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    last_error_ = trimmed(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(connection_.get()));
    throw std::runtime_error(sql + ": " + last_error_);
  }
  last_error_.clear();
  std::vector<PgRow> rows;
  rows.reserve(static_cast<std::size_t>(PQntuples(result.get())));
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    PgRow values_of_row;
    for (int column = 0; column < PQnfields(result.get()); ++column) {
      if (PQgetisnull(result.get(), row, column)) {
        values_of_row.emplace_back(std::nullopt);
      } else {
        values_of_row.emplace_back(std::string(PQgetvalue(result.get(), row, column),
                                               static_cast<std::size_t>(PQgetlength(result.get(), row, column))));
      }
    }
    rows.push_back(std::move(values_of_row));
  }
  if (status == PGRES_COMMAND_OK) {
    const std::string_view affected = PQcmdTuples(result.get());
    affected_ = affected.empty() ? 0 : std::stoll(std::string(affected));
  } else {
    affected_ = static_cast<std::int64_t>(rows.size());
  }
  return rows;
}

std::int64_t BlockingPg::execute(const std::string& sql, const std::vector<std::string>& params) {
  query(sql, params);
  return affected_;
}

std::optional<std::string> BlockingPg::scalar(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<PgRow> rows = query(sql, params);
  if (rows.size() != 1 || rows[0].size() != 1) throw std::runtime_error(sql + ": expected one value");
  return std::move(rows[0][0]);
}

std::int64_t BlockingPg::scalar_int(const std::string& sql, const std::vector<std::string>& params) {
  const std::optional<std::string> value = scalar(sql, params);
  if (!value) throw std::runtime_error(sql + ": expected one value");
  return std::stoll(*value);
}

std::vector<std::string> BlockingPg::column(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<std::string> values;
  for (PgRow& row : query(sql, params)) values.push_back(row.empty() ? std::string() : row[0].value_or(""));
  return values;
}

std::optional<std::vector<std::string>> BlockingPg::try_column(const std::string& sql,
                                                               const std::vector<std::string>& params) {
  try {
    return column(sql, params);
  } catch (const std::runtime_error&) {
    return std::nullopt;  // last_error_ holds the server's message
  }
}

std::string dsn_with(const std::string& dsn, const std::string& keyword, const std::string& value) {
  const Conninfo options = parse_dsn(dsn);
  std::string result;
  for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
    if (keyword == option->keyword || option->val == nullptr) continue;
    result += std::string(option->keyword) + "=" + conninfo_value(option->val) + " ";
  }
  return result + keyword + "=" + conninfo_value(value);
}

std::string dsn_with_search_path(const std::string& dsn, const std::string& schema) {
  std::string server_options;
  const Conninfo options = parse_dsn(dsn);
  for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
    if (std::string_view(option->keyword) == "options" && option->val != nullptr) server_options = option->val;
  }
  if (!server_options.empty()) server_options += " ";
  return dsn_with(dsn, "options", server_options + "-c search_path=" + schema);
}

}  // namespace idem::test
