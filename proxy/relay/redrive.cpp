#include "relay/redrive.hpp"

#include <libpq-fe.h>

#include <vector>

#include "pg/binary_row.hpp"
#include "pg/handles.hpp"
#include "pg/log.hpp"
#include "pg/statement.hpp"
#include "relay/sql.hpp"

namespace idem::relay {
namespace {

pg::ResultHandle run(PGconn* connection, const char* sql, const std::vector<pg::Param>& params) {
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const pg::Param& param : params) {
    types.push_back(param.type());
    values.push_back(param.is_null() ? nullptr : param.bytes().data());
    lengths.push_back(static_cast<int>(param.bytes().size()));
    formats.push_back(1);
  }
  return pg::ResultHandle(PQexecParams(connection, sql, static_cast<int>(params.size()), types.data(), values.data(),
                                       lengths.data(), formats.data(), /*resultFormat=*/1));
}

std::string failure(PGconn* connection, const PGresult* result) {
  std::string message = result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(connection);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message;
}

}  // namespace

RedriveResult redrive(const std::string& dsn, std::optional<std::int64_t> id) {
  RedriveResult outcome;
  const pg::ConnHandle connection(PQconnectdb(dsn.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    outcome.error = "connect: " + (connection ? failure(connection.get(), nullptr) : std::string("out of memory"));
    return outcome;
  }
  PQsetNoticeProcessor(connection.get(), pg::log_notice, nullptr);
  const pg::ResultHandle result = id ? run(connection.get(), sql::kRedriveOne, {pg::Param::int8(*id)})
                                     : run(connection.get(), sql::kRedriveAll, {});
  if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    outcome.error = "redrive: " + failure(connection.get(), result.get());
    return outcome;
  }
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    if (const auto value = pg::BinaryRow(result.get(), row).int8(0)) outcome.ids.push_back(*value);
  }
  // Wake idle relays now rather than at their next poll (best effort).
  pg::ResultHandle wake(PQexec(connection.get(), sql::kWakeRelays));
  outcome.ok = true;
  return outcome;
}

}  // namespace idem::relay
