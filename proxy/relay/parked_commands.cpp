#include "relay/parked_commands.hpp"

#include <libpq-fe.h>

#include "pg/binary_row.hpp"
#include "pg/statement.hpp"
#include "relay/sql.hpp"

namespace idem::relay {
namespace {

pg::ResultHandle run_redrive(pg::BlockingSession& session, const RedriveTarget& target) {
  if (const auto* id = std::get_if<std::int64_t>(&target)) {
    return session.run("redrive", sql::kRedriveOne, {pg::Param::int8(*id)});
  }
  if (const auto* aggregate = std::get_if<AggregateRef>(&target)) {
    return session.run("redrive", sql::kRedriveAggregate,
                       {pg::Param::text(aggregate->type), pg::Param::text(aggregate->id)});
  }
  return session.run("redrive", sql::kRedriveAll);
}

}  // namespace

RedriveResult redrive(pg::BlockingSession& session, const RedriveTarget& target) {
  RedriveResult outcome;
  const pg::ResultHandle result = run_redrive(session, target);
  if (!result) {
    outcome.error = session.error();
    return outcome;
  }
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    if (const auto value = pg::BinaryRow(result.get(), row).int8(0)) outcome.ids.push_back(*value);
  }
  // Wake idle relays now rather than at their next poll (best effort).
  session.run("wake relays", sql::kWakeRelays);
  outcome.ok = true;
  return outcome;
}

ListParkedResult list_parked(pg::BlockingSession& session, const ParkedQuery& query) {
  ListParkedResult outcome;
  const pg::Statement statement = parked_statement(query);
  const pg::ResultHandle result = session.run("list parked", statement.sql, statement.params);
  if (!result) {
    outcome.error = session.error();
    return outcome;
  }
  outcome.list = decode_parked(result.get(), query.limit);
  if (!outcome.list) outcome.error = "list parked: unexpected row shape";
  return outcome;
}

}  // namespace idem::relay
