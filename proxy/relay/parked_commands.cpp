#include "relay/parked_commands.hpp"

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

// Opens a blocking connection; nullptr with `error` set when it fails.
pg::ConnHandle connect(const std::string& dsn, std::string& error) {
  pg::ConnHandle connection(PQconnectdb(dsn.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    error = "connect: " + (connection ? failure(connection.get(), nullptr) : std::string("out of memory"));
    return pg::ConnHandle();
  }
  PQsetNoticeProcessor(connection.get(), pg::log_notice, nullptr);
  return connection;
}

pg::ResultHandle run_redrive(PGconn* connection, const RedriveTarget& target) {
  if (const auto* id = std::get_if<std::int64_t>(&target)) {
    return run(connection, sql::kRedriveOne, {pg::Param::int8(*id)});
  }
  if (const auto* aggregate = std::get_if<AggregateRef>(&target)) {
    return run(connection, sql::kRedriveAggregate, {pg::Param::text(aggregate->type), pg::Param::text(aggregate->id)});
  }
  return run(connection, sql::kRedriveAll, {});
}

}  // namespace

RedriveResult redrive(const std::string& dsn, const RedriveTarget& target) {
  RedriveResult outcome;
  const pg::ConnHandle connection = connect(dsn, outcome.error);
  if (!connection) return outcome;
  const pg::ResultHandle result = run_redrive(connection.get(), target);
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

ListParkedResult list_parked(const std::string& dsn, const ParkedQuery& query) {
  ListParkedResult outcome;
  const pg::ConnHandle connection = connect(dsn, outcome.error);
  if (!connection) return outcome;
  const pg::Statement statement = parked_statement(query);
  const pg::ResultHandle result = run(connection.get(), statement.sql, statement.params);
  if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    outcome.error = "list parked: " + failure(connection.get(), result.get());
    return outcome;
  }
  outcome.list = decode_parked(result.get(), query.limit);
  if (!outcome.list) outcome.error = "list parked: unexpected row shape";
  return outcome;
}

}  // namespace idem::relay
