#include "pg/blocking_session.hpp"

#include <algorithm>
#include <utility>

#include "pg/connect_params.hpp"

namespace idem::pg {
namespace {

void drop_notice(void* /*arg*/, const char* /*message*/) {}

std::string describe_failure(std::string_view step, const PGconn* connection, const PGresult* result) {
  std::string message = std::string(step) + ": ";
  const char* text = result != nullptr ? PQresultErrorMessage(result) : nullptr;
  if (text != nullptr && *text != '\0') {
    message += text;
  } else {
    message += connection != nullptr ? PQerrorMessage(connection) : "out of memory";
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  std::replace(message.begin(), message.end(), '\n', ' ');  // libpq's connect errors span lines
  const char* code = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (code != nullptr) message += std::string(" (SQLSTATE ") + code + ")";
  return message;
}

}  // namespace

BlockingSession::BlockingSession(const std::string& dsn, std::chrono::milliseconds connect_timeout,
                                 const std::string& server_options) {
  const auto seconds =
      static_cast<int>(std::max<std::chrono::milliseconds::rep>(2, (connect_timeout.count() + 999) / 1000));
  const ConnectParams params(dsn, server_options, seconds);
  ConnHandle connection(params.parsed() ? PQconnectdbParams(params.keywords(), params.values(), 0)
                                        : PQconnectdb(dsn.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    error_ = describe_failure("connect", connection.get(), nullptr);
    return;
  }
  PQsetNoticeProcessor(connection.get(), drop_notice, nullptr);
  connection_ = std::move(connection);
}

ResultHandle BlockingSession::checked(ResultHandle result, std::string_view step) {
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  error_ = describe_failure(step, connection_.get(), result.get());
  return nullptr;
}

ResultHandle BlockingSession::run(std::string_view step, const char* sql, const std::vector<Param>& params) {
  if (!connection_) return nullptr;
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& param : params) {
    types.push_back(param.type());
    values.push_back(param.is_null() ? nullptr : param.bytes().data());
    lengths.push_back(static_cast<int>(param.bytes().size()));
    formats.push_back(1);
  }
  return checked(ResultHandle(PQexecParams(connection_.get(), sql, static_cast<int>(params.size()), types.data(),
                                           values.data(), lengths.data(), formats.data(), /*resultFormat=*/1)),
                 step);
}

ResultHandle BlockingSession::run_script(std::string_view step, const std::string& script) {
  if (!connection_) return nullptr;
  return checked(ResultHandle(PQexec(connection_.get(), script.c_str())), step);
}

}  // namespace idem::pg
