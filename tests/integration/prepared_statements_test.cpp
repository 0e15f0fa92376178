// Named prepared statements per pooled connection, seen from the server: each statement is
// prepared once per session (pg_prepared_statements of that very session), a new session after
// a reconnect prepares again with no failed request, a session that lost its statements (26000)
// or already holds one under our name (42P05) is served transparently, and with
// prepared_statements off nothing is prepared at all.
#include "integration/pg_test_env.hpp"
#include "pg/binary_row.hpp"
#include "pg/counters.hpp"
#include "pg/handles.hpp"
#include "pg/pool.hpp"
#include "pg/prepared_statements.hpp"
#include "store/pg/record_codec.hpp"
#include "store/pg/sql.hpp"
#include "support/env.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using pg::PgError;
using pg::PgErrorKind;
using pg::Pool;
using pg::ResultHandle;
using pg::Statement;
using store::StoreError;

// Statements of the tests themselves, run on the pooled session they inspect.
constexpr const char* kPreparedNames = "SELECT name FROM pg_prepared_statements ORDER BY name";
constexpr const char* kBackendPid = "SELECT pg_backend_pid()";
constexpr const char* kDeallocateAll = "DEALLOCATE ALL";

struct Executed {
  PgError error;
  ResultHandle result;
};

class PreparedStatements : public PgTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PgTest::SetUp());
    application_ = fresh_name("idem-prepared-");
    scope_ = fresh_name("prepared-");
  }

  // A one-connection pool, so every statement runs in the same server session.
  std::shared_ptr<Pool> start_pool(bool prepared) {
    auto pool = std::make_shared<Pool>(
        io_, pg::PoolOptions{
                 .dsn = dsn_with(dsn(), "application_name", application_), .size = 1, .prepared_statements = prepared});
    pool->start();
    EXPECT_TRUE(run_until(io_, [&] { return pool->connected(); }));
    return pool;
  }

  Executed execute(Pool& pool, Statement statement) {
    auto outcome = std::make_shared<std::optional<Executed>>();
    pool.execute(std::make_shared<const Statement>(std::move(statement)),
                 [outcome](PgError error, ResultHandle result) {
                   *outcome = Executed{std::move(error), std::move(result)};
                 });
    if (!run_until(io_, [&] { return outcome->has_value(); })) {
      ADD_FAILURE() << "statement handler never ran";
      return {{PgErrorKind::internal, {}, "no outcome"}, nullptr};
    }
    return std::move(**outcome);
  }

  // The names of the statements the pool's session holds prepared.
  std::vector<std::string> prepared_names(Pool& pool) {
    Executed listed = execute(pool, Statement{.name = "list prepared", .sql = kPreparedNames, .params = {}});
    EXPECT_TRUE(listed.error.ok()) << listed.error.message;
    std::vector<std::string> names;
    if (!listed.result) return names;
    for (int row = 0; row < PQntuples(listed.result.get()); ++row) {
      const auto name = pg::BinaryRow(listed.result.get(), row).text(0);
      EXPECT_TRUE(name.has_value());
      if (name) names.emplace_back(*name);
    }
    return names;
  }

  std::int32_t backend_pid(Pool& pool) {
    Executed pid = execute(pool, Statement{.name = "backend pid", .sql = kBackendPid, .params = {}});
    EXPECT_TRUE(pid.error.ok()) << pid.error.message;
    if (!pid.result || PQntuples(pid.result.get()) != 1) return 0;
    return pg::BinaryRow(pid.result.get(), 0).int4(0).value_or(0);
  }

  // A claim of a fresh key through `pool`: ok and claimed, or a test failure.
  void claim_fresh(Pool& pool, const std::string& key) {
    Executed claimed = execute(pool, store::pg::claim_statement(claim_request(scope_, key, "owner-" + key)));
    ASSERT_TRUE(claimed.error.ok()) << claimed.error.sqlstate << " " << claimed.error.message;
    ASSERT_EQ(PQntuples(claimed.result.get()), 1);
    const store::pg::DecodedClaim decoded = store::pg::decode_claim_row(claimed.result.get(), 0);
    ASSERT_TRUE(decoded.claim) << decoded.error;
    EXPECT_TRUE(decoded.claim->claimed) << key;
  }

  void complete(Pool& pool, const std::string& key) {
    core::StoredResponse response;
    response.status = 201;
    response.body = "body of " + key;
    Executed completed = execute(pool, store::pg::complete_statement({.scope = scope_,
                                                                      .key = key,
                                                                      .owner = "owner-" + key,
                                                                      .state = core::RecordState::completed,
                                                                      .response = response}));
    ASSERT_TRUE(completed.error.ok()) << completed.error.sqlstate << " " << completed.error.message;
    EXPECT_STREQ(PQcmdTuples(completed.result.get()), "1");
  }

  // The session-wide name our connections give `statement`'s SQL with its parameter types.
  static std::string name_of(const Statement& statement) {
    std::vector<Oid> types;
    for (const auto& param : statement.params) types.push_back(param.type());
    return pg::prepared_statement_name(statement.sql, types);
  }
  std::string claim_name() const { return name_of(store::pg::claim_statement(claim_request(scope_, "k", "o"))); }
  std::string complete_name() const {
    return name_of(store::pg::complete_statement(
        {.scope = scope_, .key = "k", .owner = "o", .state = core::RecordState::completed, .response = {}}));
  }

  std::uint64_t prepared_count() const { return pg::pg_counters().statements_prepared.load(); }
  std::uint64_t sent_count() const { return pg::pg_counters().statements_sent.load(); }
  std::uint64_t lost_count() const { return pg::pg_counters().prepared_statements_lost.load(); }

  boost::asio::io_context io_{1};
  std::string application_;
  std::string scope_;
};

TEST_F(PreparedStatements, EachStatementIsPreparedOncePerSession) {
  const auto pool = start_pool(true);
  const auto prepared_before = prepared_count();
  const auto sent_before = sent_count();
  const auto lost_before = lost_count();
  constexpr int kRequests = 5;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "key-" + std::to_string(i)));
    ASSERT_NO_FATAL_FAILURE(complete(*pool, "key-" + std::to_string(i)));
  }
  // Two statements, each prepared on its first use, in the same round trip as that use.
  EXPECT_EQ(prepared_count() - prepared_before, 2u);
  EXPECT_EQ(sent_count() - sent_before, 2u * kRequests);

  // The session itself holds exactly these two, plus the listing statement.
  const std::vector<std::string> names = prepared_names(*pool);
  ASSERT_EQ(names.size(), 3u) << ::testing::PrintToString(names);
  EXPECT_EQ(std::count(names.begin(), names.end(), claim_name()), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), complete_name()), 1);
  EXPECT_NE(claim_name(), complete_name());
  EXPECT_EQ(lost_count() - lost_before, 0u);
}

TEST_F(PreparedStatements, AReconnectedSessionPreparesAgainWithoutAFailedRequest) {
  const auto pool = start_pool(true);
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "before"));
  ASSERT_NO_FATAL_FAILURE(complete(*pool, "before"));
  const std::int32_t first_pid = backend_pid(*pool);
  ASSERT_NE(first_pid, 0);

  const auto connects_before = pg::pg_counters().connects_succeeded.load();
  BlockingPg admin(dsn());
  ASSERT_TRUE(admin.ok()) << admin.error();
  const auto killed = admin.try_column("SELECT pg_terminate_backend($1::int)::text", {std::to_string(first_pid)});
  ASSERT_TRUE(killed) << admin.error();
  ASSERT_EQ(*killed, std::vector<std::string>{"true"});
  // The idle connection notices the hang-up and the pool connects a new session.
  ASSERT_TRUE(run_until(
      io_, [&] { return pg::pg_counters().connects_succeeded.load() > connects_before; }, 5s));

  const auto prepared_before = prepared_count();
  const auto sent_before = sent_count();
  const auto lost_before = lost_count();
  for (int i = 0; i < 3; ++i) {
    ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "after-" + std::to_string(i)));
    ASSERT_NO_FATAL_FAILURE(complete(*pool, "after-" + std::to_string(i)));
  }
  // Prepared again in the new session, each in its first use's round trip: no refusal, no retry.
  EXPECT_EQ(prepared_count() - prepared_before, 2u);
  EXPECT_EQ(sent_count() - sent_before, 6u);
  EXPECT_EQ(lost_count() - lost_before, 0u);
  EXPECT_NE(backend_pid(*pool), first_pid);
  const std::vector<std::string> names = prepared_names(*pool);
  EXPECT_EQ(std::count(names.begin(), names.end(), claim_name()), 1) << ::testing::PrintToString(names);
  EXPECT_EQ(std::count(names.begin(), names.end(), complete_name()), 1) << ::testing::PrintToString(names);
}

TEST_F(PreparedStatements, AStatementTheSessionLostIsPreparedAgainAndRunOnce) {
  const auto pool = start_pool(true);
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "first"));
  Executed dropped = execute(*pool, Statement{.name = "deallocate all", .sql = kDeallocateAll, .params = {}});
  ASSERT_TRUE(dropped.error.ok()) << dropped.error.message;
  // Only the listing itself, prepared again by this very call.
  const std::string listing = name_of(Statement{.name = "list prepared", .sql = kPreparedNames, .params = {}});
  EXPECT_EQ(prepared_names(*pool), std::vector<std::string>{listing}) << "DEALLOCATE ALL left statements behind";

  // The claim is refused at Bind (26000), so it did not run: run once more, unnamed.
  const auto sent_before = sent_count();
  const auto lost_before = lost_count();
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "second"));
  EXPECT_EQ(lost_count() - lost_before, 1u);
  EXPECT_EQ(sent_count() - sent_before, 2u);
  BlockingPg reader(dsn());
  ASSERT_TRUE(reader.ok()) << reader.error();
  const auto rows =
      reader.try_column("SELECT count(*)::text FROM idempotency_records WHERE scope = $1 AND key = 'second'", {scope_});
  ASSERT_TRUE(rows) << reader.error();
  EXPECT_EQ(*rows, std::vector<std::string>{"1"});

  // From then on the statement is held again: one round trip.
  const auto sent_after = sent_count();
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "third"));
  EXPECT_EQ(sent_count() - sent_after, 1u);
  EXPECT_EQ(lost_count() - lost_before, 1u);
}

TEST_F(PreparedStatements, AStatementTheSessionAlreadyHoldsUnderOurNameIsUsedAsItIs) {
  const auto pool = start_pool(true);
  // The claim prepared by someone else in this session (a pooler's server session can come with
  // it): same text, same types, hence the same name. (Static: a statement's text must outlive it.)
  static const std::string prepare_claim = "PREPARE " + claim_name() +
                                           " (text, text, text, text, int8, int8, boolean) AS " +
                                           std::string(store::pg::sql::kClaim);
  Executed prepared = execute(*pool, Statement{.name = "prepare claim", .sql = prepare_claim.c_str(), .params = {}});
  ASSERT_TRUE(prepared.error.ok()) << prepared.error.message;

  // Our Parse meets 42P05; its Execute was skipped, so it is sent again on its own.
  const auto sent_before = sent_count();
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "key"));
  EXPECT_EQ(sent_count() - sent_before, 2u);
  const auto sent_after = sent_count();
  ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "next"));
  EXPECT_EQ(sent_count() - sent_after, 1u);
}

// Server sessions behind PgBouncer in transaction mode with two server connections lent in
// turn (deploy/local-env.sh: the `idem_alternating` database, server_round_robin): each
// statement lands on the other session. The second claim finds its statement missing (26000)
// and is sent once more: had that resend prepared again, it would land on the first session,
// which holds the name already (42P05), and its Execute by name on the second again. A resend
// that relies on no session state runs every statement, each exactly once.
// The claim's SQL carries a comment unique to this process, so its statement name is new to the
// pooler's server sessions, which outlive this test (every stage of tests/run.sh uses the same
// PgBouncer): sessions that already held it would never lose it.
TEST_F(PreparedStatements, BehindAPoolerAlternatingServerSessionsEveryStatementRunsOnce) {
  const std::optional<std::string> pgbouncer = env_var("IDEMPROXY_TEST_PGBOUNCER_DSN");
  ASSERT_TRUE(pgbouncer) << "IDEMPROXY_TEST_PGBOUNCER_DSN is not set (tests/run.sh starts PgBouncer)";
  const std::string alternating_dsn = *pgbouncer + " dbname=idem_alternating";
  auto pool =
      std::make_shared<Pool>(io_, pg::PoolOptions{.dsn = alternating_dsn, .size = 1, .prepared_statements = true});
  pool->start();
  ASSERT_TRUE(run_until(io_, [&] { return pool->connected(); }));
  // Both server sessions lent at once, then given back in turn: both idle and queued. (A session
  // left idle past server_check_delay, as after an earlier stage of tests/run.sh, waits for a check
  // query, and the pooler prefers any session just given back: every statement would then land on
  // that one.)
  {
    BlockingPg first(alternating_dsn);
    BlockingPg second(alternating_dsn);
    first.execute("BEGIN");
    second.execute("BEGIN");
    first.execute("COMMIT");
    second.execute("COMMIT");
  }
  pg::ConnHandle console(PQconnectdb((*pgbouncer + " dbname=pgbouncer").c_str()));
  ASSERT_EQ(PQstatus(console.get()), CONNECTION_OK) << PQerrorMessage(console.get());
  const auto idle_sessions = [&] {
    pg::ResultHandle pools(PQexec(console.get(), "SHOW POOLS"));
    if (PQresultStatus(pools.get()) != PGRES_TUPLES_OK) return -1;
    const int database = PQfnumber(pools.get(), "database");
    const int idle = PQfnumber(pools.get(), "sv_idle");
    for (int row = 0; row < PQntuples(pools.get()); ++row) {
      if (std::string_view(PQgetvalue(pools.get(), row, database)) != "idem_alternating") continue;
      return std::atoi(PQgetvalue(pools.get(), row, idle));
    }
    return 0;
  };
  ASSERT_EQ(idle_sessions(), 2) << "the pooler's two server sessions are not both idle";

  static const std::string claim_sql =
      std::string(store::pg::sql::kClaim) + "\n-- " + fresh_name("alternating-run-");  // static: outlives its use
  const auto lost_before = lost_count();
  constexpr int kClaims = 8;
  for (int i = 0; i < kClaims; ++i) {
    const std::string key = "turn-" + std::to_string(i);
    pg::Statement claim = store::pg::claim_statement(claim_request(scope_, key, "owner-" + key));
    claim.sql = claim_sql.c_str();
    Executed claimed = execute(*pool, std::move(claim));
    ASSERT_TRUE(claimed.error.ok()) << i << ": " << claimed.error.sqlstate << " " << claimed.error.message;
    ASSERT_EQ(PQntuples(claimed.result.get()), 1) << i;
    const store::pg::DecodedClaim decoded = store::pg::decode_claim_row(claimed.result.get(), 0);
    ASSERT_TRUE(decoded.claim) << i << ": " << decoded.error;
    EXPECT_TRUE(decoded.claim->claimed) << i;
  }
  EXPECT_GE(lost_count() - lost_before, 1u) << "the pooler never switched sessions: this test proves nothing";
  BlockingPg reader(dsn());
  ASSERT_TRUE(reader.ok()) << reader.error();
  const auto rows = reader.try_column(
      "SELECT count(*)::text FROM idempotency_records WHERE scope = $1 AND key LIKE 'turn-%'", {scope_});
  ASSERT_TRUE(rows) << reader.error();
  EXPECT_EQ(*rows, std::vector<std::string>{std::to_string(kClaims)});
}

TEST_F(PreparedStatements, OffMeansUnnamedStatementsOnly) {
  const auto pool = start_pool(false);
  const auto prepared_before = prepared_count();
  const auto sent_before = sent_count();
  for (int i = 0; i < 3; ++i) {
    ASSERT_NO_FATAL_FAILURE(claim_fresh(*pool, "key-" + std::to_string(i)));
    ASSERT_NO_FATAL_FAILURE(complete(*pool, "key-" + std::to_string(i)));
  }
  EXPECT_EQ(prepared_count() - prepared_before, 0u);
  EXPECT_EQ(sent_count() - sent_before, 6u);
  EXPECT_TRUE(prepared_names(*pool).empty());
}

TEST_F(PreparedStatements, StoreOperationsStayCorrectThroughPreparedStatements) {
  // The whole first-request and replay path through PgStore, prepared, on two connections.
  store::pg::PgStore store(io_, {.dsn = dsn(), .size = 2, .prepared_statements = true});
  store.start();
  ASSERT_TRUE(run_until(io_, [&] { return store.connected(); }));
  const auto prepared_before = prepared_count();
  int done = 0;
  constexpr int kKeys = 20;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "key-" + std::to_string(i);
    store.claim(claim_request(scope_, key, "owner"), [&, key](StoreError error, core::ClaimResult result) {
      ASSERT_EQ(error, StoreError::ok);
      ASSERT_TRUE(result.claimed);
      core::StoredResponse response;
      response.status = 200;
      response.body = key;
      store.complete({.scope = scope_, .key = key, .owner = "owner", .response = response, .ttl = 60s},
                     [&](StoreError completed) {
                       EXPECT_EQ(completed, StoreError::ok);
                       ++done;
                     });
    });
  }
  ASSERT_TRUE(run_until(io_, [&] { return done == kKeys; }));
  // At most claim and complete on each of the two sessions.
  EXPECT_GE(prepared_count() - prepared_before, 2u);
  EXPECT_LE(prepared_count() - prepared_before, 4u);

  std::optional<core::ClaimResult> replay;
  store.claim(claim_request(scope_, "key-7", "other"), [&](StoreError error, core::ClaimResult result) {
    EXPECT_EQ(error, StoreError::ok);
    replay = std::move(result);
  });
  ASSERT_TRUE(run_until(io_, [&] { return replay.has_value(); }));
  EXPECT_FALSE(replay->claimed);
  EXPECT_EQ(replay->existing.state, core::RecordState::completed);
  EXPECT_EQ(replay->existing.response.body, "key-7");
}

}  // namespace
}  // namespace idem::test
