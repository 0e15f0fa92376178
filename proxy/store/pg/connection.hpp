#pragma once
// One libpq connection driven by an io_context. Nothing here blocks the io thread: connecting is
// PQconnectStart + PQconnectPoll, a statement is PQsendQueryParams + PQflush + PQconsumeInput, and
// between steps we wait for socket readiness through Asio. Every operation has a deadline; when
// it passes the connection is closed (a statement's effect is then unknown) and the handler gets
// `timeout`.
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
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "store/pg/errors.hpp"
#include "store/pg/handles.hpp"
#include "store/pg/statement.hpp"

namespace idem::store::pg {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using ConnectHandler = std::function<void(PgError)>;
  // On success `result` is the statement's result (PGRES_TUPLES_OK or PGRES_COMMAND_OK).
  using ExecuteHandler = std::function<void(PgError error, ResultHandle result)>;
  // Called when the server closes an idle connection (restart, idle timeout, failover).
  using LostHandler = std::function<void()>;
  // A NOTIFY on a channel this connection LISTENs to (LISTEN is run as an ordinary statement).
  using NotificationHandler = std::function<void(std::string channel, std::string payload)>;

  Connection(boost::asio::io_context& io, LostHandler on_lost_while_idle);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // fresh -> connecting -> idle (ok) or closed (error).
  void connect(const std::string& dsn, std::chrono::milliseconds timeout, ConnectHandler handler);
  // idle -> busy -> idle; -> closed when the connection failed or the deadline passed.
  // Results are requested in binary format.
  void execute(std::shared_ptr<const Statement> statement, std::chrono::milliseconds timeout,
               ExecuteHandler handler);
  // Any state -> closed; a pending operation completes with `unavailable`.
  void close();
  // Notifications arrive while idle or during a statement; each is posted to `handler` (never
  // run inside a libpq step). Without a handler they are read and dropped.
  void set_notification_handler(NotificationHandler handler) { notification_handler_ = std::move(handler); }

  bool idle() const { return state_ == State::idle; }
  bool closed() const { return state_ == State::closed; }

 private:
  enum class State { fresh, connecting, idle, busy, closed };
  enum class Delivery { now, posted };  // call the handler now (inside an async step) or post it
  using WaitType = boost::asio::posix::descriptor_base::wait_type;
  using Step = void (Connection::*)();

  void continue_connect(PostgresPollingStatusType poll_status);
  void on_connect_socket_ready();
  void flush_statement(Delivery delivery);
  void on_writable();
  void on_readable();
  bool ssl_has_buffered_input() const;
  void watch_idle();
  void on_idle_readable();
  void on_deadline();
  void deliver_notifications();

  void wait_socket(WaitType type, Step next);
  void arm_deadline(std::chrono::milliseconds timeout);
  bool watch_socket();  // (re)binds the descriptor to PQsocket(); false when libpq has none
  void drop();          // releases the descriptor, then PQfinish; state -> closed
  void fail(PgErrorKind kind, std::string message, Delivery delivery);
  void finish_connect(PgError error, Delivery delivery);
  void finish_execute(PgError error, ResultHandle result, Delivery delivery);

  boost::asio::io_context& io_;
  LostHandler on_lost_while_idle_;
  NotificationHandler notification_handler_;
  ConnHandle conn_;
  boost::asio::posix::stream_descriptor socket_;
  boost::asio::steady_timer deadline_;
  State state_ = State::fresh;
  // Bumped whenever an operation starts or ends; an async step carrying an older value is stale
  // (its operation already finished through the deadline or close()) and does nothing.
  std::uint64_t operation_ = 0;
  ConnectHandler connect_handler_;
  ExecuteHandler execute_handler_;
  std::shared_ptr<const Statement> statement_;
  PgError statement_error_;    // first error result of the running statement
  ResultHandle statement_result_;  // last success result of the running statement
};

}  // namespace idem::store::pg
