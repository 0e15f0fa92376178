#pragma once
// One libpq connection driven by an io_context. Nothing here blocks the io thread: connecting is
// PQconnectStart + PQconnectPoll, a statement is a PQsend* call + PQflush + PQconsumeInput, and
// between steps we wait for socket readiness through Asio. Every operation has a deadline; when
// it passes the connection is closed. A statement that failed after it went out (deadline,
// connection lost) reports `reply_lost`: its effect is unknown, and only the caller, who knows
// what the statement does, can settle that (e.g. by a statement that is safe to run again).
//
// Lifecycle: fresh -> connecting -> idle <-> busy; any failure or close() -> closed, for good
// (the pool makes a new Connection to reconnect). One operation at a time.
// Handlers run on the io thread, exactly once, never inside connect()/execute()/close() (those
// post them). Every async step holds a shared_ptr to the connection, so it outlives its owner
// until the last step has run; an idle connection watches its socket (to notice a server that
// hangs up), so its owner must close() it to let it go.
//
// The socket belongs to libpq: the Asio descriptor only watches it and is always release()d,
// never closed, before libpq closes the socket or may replace it.
//
// Statements travel in one of two ways (StatementMode, fixed per connection):
// - unnamed: PQsendQueryParams, parsed and planned by the server every time; no session state,
//   so it works behind any pooler (PgBouncer in transaction mode before 1.21 included).
// - prepared: a named prepared statement per SQL text, created in this session on its first use
//   and executed with PQsendQueryPrepared afterwards. The first use costs no extra round trip:
//   the Parse and the Bind/Execute travel together in one libpq pipeline (Parse, Bind, Execute,
//   Sync), after which the connection leaves pipeline mode again. Should the session have lost the
//   statement (26000: DEALLOCATE, DISCARD ALL, a pooler that switched sessions), the server
//   refused it at Bind, so it certainly did not run: it is run once more, within the same
//   deadline, as an unnamed statement, and prepared again by its next execution. A prepare that
//   finds the name taken (42P05) is a statement this session holds already (names are derived
//   from the text and types: prepared_statements.hpp): the Execute, skipped in the aborted
//   pipeline, is run once more unnamed. A resend never relies on session state: behind a
//   transaction pooler that lends another server session per statement (PgBouncer before 1.21)
//   the session it lands on may lack the statement again.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "pg/errors.hpp"
#include "pg/handles.hpp"
#include "pg/prepared_statements.hpp"
#include "pg/statement.hpp"

namespace idem::pg {

enum class StatementMode { unnamed, prepared };

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using ConnectHandler = std::function<void(PgError)>;
  // On success `result` is the statement's result (PGRES_TUPLES_OK or PGRES_COMMAND_OK).
  using ExecuteHandler = std::function<void(PgError error, ResultHandle result)>;
  // Called when the server closes an idle connection (restart, idle timeout, failover).
  using LostHandler = std::function<void()>;
  // A NOTIFY on a channel this connection LISTENs to (LISTEN is run as an ordinary statement).
  using NotificationHandler = std::function<void(std::string channel, std::string payload)>;

  Connection(boost::asio::io_context& io, LostHandler on_lost_while_idle,
             StatementMode statement_mode = StatementMode::unnamed);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // fresh -> connecting -> idle (ok) or closed (error).
  void connect(const std::string& dsn, std::chrono::milliseconds timeout, ConnectHandler handler);
  // idle -> busy -> idle; -> closed when the connection failed or the deadline passed.
  // Results are requested in binary format. In prepared mode `statement->sql` must have static
  // storage duration: its address names the prepared statement.
  void execute(std::shared_ptr<const Statement> statement, std::chrono::milliseconds timeout, ExecuteHandler handler);
  // Any state -> closed; a pending operation completes with `unavailable`.
  void close();
  // Notifications arrive while idle or during a statement; each is posted to `handler` (never
  // run inside a libpq step). Without a handler they are read and dropped.
  void set_notification_handler(NotificationHandler handler) { notification_handler_ = std::move(handler); }

  bool idle() const { return state_ == State::idle; }
  bool closed() const { return state_ == State::closed; }
  // Statements this session holds prepared (prepared mode), for tests and diagnostics.
  std::size_t prepared_count() const;

 private:
  enum class State { fresh, connecting, idle, busy, closed };
  enum class Delivery { now, posted };  // call the handler now (inside an async step) or post it
  // How the running statement went out, which says how to read its results.
  enum class Exchange {
    unnamed,              // PQsendQueryParams
    execute_prepared,     // PQsendQueryPrepared of a statement the session holds
    prepare_and_execute,  // pipeline: Parse, then Bind/Execute, then Sync
  };
  // Where the results of a prepare_and_execute pipeline are: each query's results end with a
  // NULL from PQgetResult, the whole pipeline with a PGRES_PIPELINE_SYNC result.
  enum class PipelineStage { prepare, execute, sync };
  // The running statement's way through the prepared-statement machinery: which entry it uses,
  // whether it was sent again, and how the current attempt went out and what each part of its
  // pipeline answered. One per statement, started afresh by execute(); each (re)send starts a
  // new attempt (begin_attempt), keeping the entry and `resent`.
  struct PreparedRun {
    // The statement's entry in prepared_ (prepared mode, else null); no other entry is added meanwhile.
    PreparedStatements::Entry* entry = nullptr;
    bool resent = false;                    // the statement was sent a second time already (26000, 42P05)
    Exchange exchange = Exchange::unnamed;  // how the current attempt went out
    PipelineStage pipeline_stage = PipelineStage::prepare;
    PgError prepare_error;         // the Parse's error in a prepare_and_execute pipeline
    bool execute_skipped = false;  // ... whose Execute the server skipped (PGRES_PIPELINE_ABORTED)

    void begin_attempt(Exchange how) {
      exchange = how;
      pipeline_stage = PipelineStage::prepare;
      prepare_error = {};
      execute_skipped = false;
    }
  };
  using WaitType = boost::asio::posix::descriptor_base::wait_type;
  using Step = void (Connection::*)();

  void continue_connect(PostgresPollingStatusType poll_status);
  void on_connect_socket_ready();
  void bind_params();
  void send_statement(Delivery delivery);
  bool send_prepare_and_execute();
  void flush_statement(Delivery delivery);
  void on_writable();
  void on_readable();
  void take_result(ResultHandle result);
  void take_pipeline_result(ResultHandle result);
  void end_of_results(Delivery delivery);
  bool resend_after_prepare_conflict(Delivery delivery);
  bool ssl_has_buffered_input() const;
  void watch_idle();
  void ensure_read_wait();
  void on_socket_readable(const boost::system::error_code& error);
  void on_idle_readable();
  void on_deadline();
  void deliver_notifications();

  void wait_socket(WaitType type, Step next);
  void arm_deadline(std::chrono::milliseconds timeout);
  bool watch_socket();    // (re)binds the descriptor to PQsocket(); false when libpq has none
  void unwatch_socket();  // stops watching the descriptor (never closes it: it is libpq's)
  void drop();            // releases the descriptor, then PQfinish; state -> closed
  void reset_on_drop();   // the next drop() ends the TCP connection with RST (reply_lost)
  void fail(PgErrorKind kind, std::string message, Delivery delivery);
  void finish_connect(PgError error, Delivery delivery);
  void finish_execute(PgError error, ResultHandle result, Delivery delivery);
  PgErrorKind failure_kind(const PgError& error) const;

  boost::asio::io_context& io_;
  LostHandler on_lost_while_idle_;
  const StatementMode statement_mode_;
  NotificationHandler notification_handler_;
  ConnHandle conn_;
  boost::asio::posix::stream_descriptor socket_;
  boost::asio::steady_timer deadline_;
  State state_ = State::fresh;
  // Bumped whenever an operation starts or ends; an async step carrying an older value is stale
  // (its operation already finished through the deadline or close()) and does nothing.
  std::uint64_t operation_ = 0;
  // Once connected, at most one read wait is armed at any time, serving whatever state the
  // connection is in when it fires (idle: a notice or a hang-up; busy: results). A released
  // descriptor's wait completes with a stale generation and is ignored.
  bool read_wait_armed_ = false;
  std::uint64_t descriptor_generation_ = 0;
  ConnectHandler connect_handler_;
  ExecuteHandler execute_handler_;
  std::shared_ptr<const Statement> statement_;
  PgError statement_error_;        // first error result of the running statement
  ResultHandle statement_result_;  // last success result of the running statement
  bool statement_sent_ = false;    // some of the running statement may have reached the server
  PreparedRun run_;                // how the running statement travels; reset by execute()
  PreparedStatements prepared_;
  // The running statement's parameters as libpq takes them; reused, so no statement allocates.
  std::vector<Oid> param_types_;
  std::vector<const char*> param_values_;
  std::vector<int> param_lengths_;
  std::vector<int> param_formats_;
};

}  // namespace idem::pg
