#include "pg/connection.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <openssl/ssl.h>

#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "pg/connect_params.hpp"
#include "pg/counters.hpp"
#include "pg/log.hpp"

namespace idem::pg {

Connection::Connection(boost::asio::io_context& io, LostHandler on_lost_while_idle, StatementMode statement_mode)
    : io_(io),
      on_lost_while_idle_(std::move(on_lost_while_idle)),
      statement_mode_(statement_mode),
      socket_(io),
      deadline_(io) {}

// A destructor must not throw. The cleanup can only throw on allocation failure or an Asio
// cancel error, and the object is gone either way.
Connection::~Connection() {
  try {
    drop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): see above
  }
}

void Connection::connect(const std::string& dsn, std::chrono::milliseconds timeout, ConnectHandler handler) {
  if (state_ != State::fresh) {  // a caller bug; leave this connection as it is
    boost::asio::post(io_, [handler = std::move(handler)] {
      handler({PgErrorKind::internal, {}, "connect called twice on one connection"});
    });
    return;
  }
  connect_handler_ = std::move(handler);
  state_ = State::connecting;
  ++operation_;
  arm_deadline(timeout);
  // Note: a host name (not an address) in the DSN is resolved inside this call, synchronously.
  // Callers keep in the database what they must not forget: see kSessionServerOptions.
  // A DSN with several hosts is tried host by host inside PQconnectPoll (continue_connect follows
  // each new socket); target_session_attrs=read-write skips a standby or a read-only primary.
  const ConnectParams params(dsn, kSessionServerOptions);
  conn_.reset(!params.parsed() ? PQconnectStart(dsn.c_str())  // unparsable: libpq reports why
                               : PQconnectStartParams(params.keywords(), params.values(), /*expand_dbname=*/0));
  if (!conn_) {
    fail(PgErrorKind::unavailable, "out of memory starting a connection", Delivery::posted);
    return;
  }
  if (PQstatus(conn_.get()) == CONNECTION_BAD) {
    fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), Delivery::posted);
    return;
  }
  PQsetNoticeProcessor(conn_.get(), log_notice, nullptr);
  // libpq's protocol: before the first PQconnectPoll, act as if it had asked for writability.
  // Posted, so that no failure reaches the handler from inside this call.
  boost::asio::post(io_, [self = shared_from_this(), operation = operation_] {
    if (operation == self->operation_) self->continue_connect(PGRES_POLLING_WRITING);
  });
}

void Connection::continue_connect(PostgresPollingStatusType poll_status) {
  switch (poll_status) {
    case PGRES_POLLING_OK:
      if (PQsetnonblocking(conn_.get(), 1) != 0) {
        fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), Delivery::now);
        return;
      }
      if (!watch_socket()) return;
      finish_connect({}, Delivery::now);
      return;
    case PGRES_POLLING_FAILED: fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), Delivery::now); return;
    case PGRES_POLLING_READING:
      // libpq may have closed the socket and opened another (next host, SSL fallback), possibly
      // with the same number: re-register after every poll so the reactor never watches a stale fd.
      if (watch_socket()) wait_socket(WaitType::wait_read, &Connection::on_connect_socket_ready);
      return;
    case PGRES_POLLING_WRITING:
      if (watch_socket()) wait_socket(WaitType::wait_write, &Connection::on_connect_socket_ready);
      return;
    case PGRES_POLLING_ACTIVE:  // obsolete, never returned by current libpq: just poll again
      boost::asio::post(io_, [self = shared_from_this(), operation = operation_] {
        if (operation == self->operation_) self->on_connect_socket_ready();
      });
      return;
  }
  fail(PgErrorKind::internal, "unknown PQconnectPoll status", Delivery::now);
}

void Connection::on_connect_socket_ready() {
  // PQconnectPoll may close this socket (next host, SSL fallback), and another thread's new socket
  // may get its number at once: stop watching it first, so the reactor never touches a descriptor
  // number that is no longer ours (continue_connect watches whatever PQsocket() is afterwards).
  unwatch_socket();
  continue_connect(PQconnectPoll(conn_.get()));
}

void Connection::execute(std::shared_ptr<const Statement> statement, std::chrono::milliseconds timeout,
                         ExecuteHandler handler) {
  if (state_ != State::idle) {
    boost::asio::post(io_, [handler = std::move(handler)] {
      handler({PgErrorKind::internal, {}, "statement on a connection that is not idle"}, nullptr);
    });
    return;
  }
  state_ = State::busy;
  ++operation_;
  // The idle watch's read wait stays armed: it is the one that sees the results arrive.
  execute_handler_ = std::move(handler);
  statement_ = std::move(statement);
  statement_sent_ = false;
  arm_deadline(timeout);
  bind_params();
  run_ = PreparedRun{};
  if (statement_mode_ == StatementMode::prepared) run_.entry = &prepared_.find_or_add(statement_->sql, param_types_);
  send_statement(Delivery::posted);
}

std::size_t Connection::prepared_count() const { return prepared_.prepared_count(); }

void Connection::bind_params() {
  const std::vector<Param>& params = statement_->params;
  param_types_.clear();
  param_values_.clear();
  param_lengths_.clear();
  param_formats_.assign(params.size(), 1);  // every parameter in binary
  for (const Param& param : params) {
    param_types_.push_back(param.type());
    param_values_.push_back(param.is_null() ? nullptr : param.bytes().data());
    param_lengths_.push_back(static_cast<int>(param.bytes().size()));
  }
}

void Connection::send_statement(Delivery delivery) {
  statement_error_ = {};
  statement_result_.reset();
  const int count = static_cast<int>(param_types_.size());
  bool sent = false;
  // A resend carries no session state: the session (or, behind a transaction pooler, the server
  // session the pooler lends next) may lack the named statement again.
  switch (run_.resent ? StatementMode::unnamed : statement_mode_) {
    case StatementMode::unnamed:
      // Unnamed statement, no session state: works behind PgBouncer in transaction pooling mode.
      run_.begin_attempt(Exchange::unnamed);
      sent = PQsendQueryParams(conn_.get(), statement_->sql, count, param_types_.data(), param_values_.data(),
                               param_lengths_.data(), param_formats_.data(), /*resultFormat=*/1) == 1;
      break;
    case StatementMode::prepared:
      if (run_.entry->prepared) {
        run_.begin_attempt(Exchange::execute_prepared);
        sent = PQsendQueryPrepared(conn_.get(), run_.entry->name.c_str(), count, param_values_.data(),
                                   param_lengths_.data(), param_formats_.data(), /*resultFormat=*/1) == 1;
      } else {
        run_.begin_attempt(Exchange::prepare_and_execute);
        sent = send_prepare_and_execute();
      }
      break;
  }
  if (!sent) {
    // A half-queued pipeline leaves the connection in no state to reuse: only a clean refusal
    // outside pipeline mode is a mere statement error.
    const bool clean = PQstatus(conn_.get()) == CONNECTION_OK && PQpipelineStatus(conn_.get()) == PQ_PIPELINE_OFF;
    fail(clean ? PgErrorKind::internal : PgErrorKind::unavailable, PQerrorMessage(conn_.get()), delivery);
    return;
  }
  // From here on some of the statement may have reached the server: a failure is a lost reply.
  statement_sent_ = true;
  pg_counters().statements_sent.fetch_add(1, std::memory_order_relaxed);
  flush_statement(delivery);
}

bool Connection::send_prepare_and_execute() {
  const int count = static_cast<int>(param_types_.size());
  const char* name = run_.entry->name.c_str();
  // Parse, then Bind/Describe/Execute, then one Sync: one round trip. Should the Parse fail, the
  // server skips the Execute (the pipeline is aborted up to the Sync).
  const bool sent = PQenterPipelineMode(conn_.get()) == 1 &&
                    PQsendPrepare(conn_.get(), name, statement_->sql, count, param_types_.data()) == 1 &&
                    PQsendQueryPrepared(conn_.get(), name, count, param_values_.data(), param_lengths_.data(),
                                        param_formats_.data(), /*resultFormat=*/1) == 1 &&
                    PQpipelineSync(conn_.get()) == 1;
  if (sent) pg_counters().statements_prepared.fetch_add(1, std::memory_order_relaxed);
  return sent;
}

void Connection::flush_statement(Delivery delivery) {
  switch (PQflush(conn_.get())) {
    case 0: ensure_read_wait(); return;
    case 1: wait_socket(WaitType::wait_write, &Connection::on_writable); return;
    default: fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), delivery); return;
  }
}

void Connection::on_writable() {
  // libpq asks to absorb input while sending, so the server can never stall writing to us.
  if (PQconsumeInput(conn_.get()) == 0) {
    fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), Delivery::now);
    return;
  }
  flush_statement(Delivery::now);
}

void Connection::on_readable() {
  if (PQconsumeInput(conn_.get()) == 0) {
    fail(PgErrorKind::unavailable, PQerrorMessage(conn_.get()), Delivery::now);
    return;
  }
  deliver_notifications();
  while (PQisBusy(conn_.get()) == 0) {
    ResultHandle result(PQgetResult(conn_.get()));
    if (run_.exchange != Exchange::prepare_and_execute) {
      if (!result) {  // the statement is over
        end_of_results(Delivery::now);
        return;
      }
      take_result(std::move(result));
      continue;
    }
    if (!result) {  // one query of the pipeline is over
      switch (run_.pipeline_stage) {
        case PipelineStage::prepare: run_.pipeline_stage = PipelineStage::execute; continue;
        case PipelineStage::execute: run_.pipeline_stage = PipelineStage::sync; continue;
        case PipelineStage::sync:  // libpq ends a pipeline with its Sync result, never a NULL
          fail(PgErrorKind::internal, "pipeline ended without its sync result", Delivery::now);
          return;
      }
    }
    if (PQresultStatus(result.get()) == PGRES_PIPELINE_SYNC) {
      if (PQexitPipelineMode(conn_.get()) != 1) {
        fail(PgErrorKind::internal, PQerrorMessage(conn_.get()), Delivery::now);
        return;
      }
      end_of_results(Delivery::now);
      return;
    }
    take_pipeline_result(std::move(result));
  }
  // Over TLS, libpq may have pulled a whole record off the socket and taken only part of it: the
  // rest sits in OpenSSL's buffer and the socket may never become readable for it.
  if (ssl_has_buffered_input()) {
    boost::asio::post(io_, [self = shared_from_this(), operation = operation_] {
      if (operation == self->operation_) self->on_readable();
    });
    return;
  }
  ensure_read_wait();
}

void Connection::take_result(ResultHandle result) {
  switch (PQresultStatus(result.get())) {
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK: statement_result_ = std::move(result); return;
    case PGRES_FATAL_ERROR:
    case PGRES_NONFATAL_ERROR:
    case PGRES_BAD_RESPONSE:
      if (statement_error_.ok()) statement_error_ = error_from_result(result.get(), conn_.get());
      return;
    default:  // COPY, single-row mode, pipeline results outside a pipeline: never asked for
      if (statement_error_.ok()) {
        statement_error_ = {PgErrorKind::internal,
                            {},
                            std::string("unexpected result status ") + PQresStatus(PQresultStatus(result.get()))};
      }
      return;
  }
}

void Connection::take_pipeline_result(ResultHandle result) {
  const ExecStatusType status = PQresultStatus(result.get());
  switch (run_.pipeline_stage) {
    case PipelineStage::prepare:
      if (status == PGRES_COMMAND_OK) {
        run_.entry->prepared = true;
      } else if (run_.prepare_error.ok()) {
        const bool error_result =
            status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR || status == PGRES_BAD_RESPONSE;
        run_.prepare_error = error_result
                                 ? error_from_result(result.get(), conn_.get())
                                 : PgError{PgErrorKind::internal,
                                           {},
                                           std::string("unexpected prepare result status ") + PQresStatus(status)};
      }
      return;
    case PipelineStage::execute:
      if (status == PGRES_PIPELINE_ABORTED) {
        run_.execute_skipped = true;
        return;
      }
      take_result(std::move(result));
      return;
    case PipelineStage::sync:
      if (statement_error_.ok()) {
        statement_error_ = {
            PgErrorKind::internal,
            {},
            std::string("unexpected result status ") + PQresStatus(status) + " before the pipeline's sync"};
      }
      return;
  }
}

void Connection::end_of_results(Delivery delivery) {
  switch (run_.exchange) {
    case Exchange::unnamed: break;
    case Exchange::execute_prepared:
      // The session lost the statement (DEALLOCATE, DISCARD ALL, a pooler that switched server
      // sessions). Refused at Bind, so it did not run: run it once more, unnamed. (Prepared again
      // by the next execution, in its own pipeline: preparing now could land on yet another
      // pooled session.)
      if (statement_error_.sqlstate == sqlstate::invalid_sql_statement_name && !run_.resent) {
        pg_counters().prepared_statements_lost.fetch_add(1, std::memory_order_relaxed);
        log_event("prepared statement " + run_.entry->name + " (" + std::string(statement_->name) +
                      ") missing from the session, running it unnamed",
                  statement_error_.message);
        run_.entry->prepared = false;
        run_.resent = true;
        send_statement(delivery);
        return;
      }
      break;
    case Exchange::prepare_and_execute:
      if (!run_.prepare_error.ok()) {
        // The name is taken: by this very statement (names follow the text and types), which the
        // session held without our knowing. The Execute was skipped: run it once more, unnamed (an
        // Execute by name could reach a pooled server session that lacks the statement).
        if (run_.prepare_error.sqlstate == sqlstate::duplicate_prepared_statement && run_.execute_skipped &&
            !run_.resent) {
          run_.entry->prepared = true;
          run_.resent = true;
          send_statement(delivery);
          return;
        }
        finish_execute(std::move(run_.prepare_error), nullptr, delivery);
        return;
      }
      break;
  }
  if (!statement_error_.ok()) {
    finish_execute(std::move(statement_error_), nullptr, delivery);
  } else if (!statement_result_) {
    finish_execute({PgErrorKind::internal, {}, "statement returned no result"}, nullptr, delivery);
  } else {
    finish_execute({}, std::move(statement_result_), delivery);
  }
}

bool Connection::ssl_has_buffered_input() const {
  if (PQsslInUse(conn_.get()) == 0) return false;
  const auto* ssl = static_cast<const SSL*>(PQsslStruct(conn_.get(), "OpenSSL"));
  return ssl != nullptr && SSL_pending(ssl) > 0;
}

void Connection::watch_idle() { ensure_read_wait(); }

void Connection::ensure_read_wait() {
  // Each async_wait costs an epoll_ctl (Asio re-arms the edge-triggered descriptor), so one wait
  // serves the idle watch and the statement that follows it.
  if (read_wait_armed_) return;
  read_wait_armed_ = true;
  socket_.async_wait(WaitType::wait_read, [self = shared_from_this(), descriptor = descriptor_generation_](
                                              const boost::system::error_code& error) {
    if (descriptor != self->descriptor_generation_) return;  // released since: not ours to report
    self->read_wait_armed_ = false;
    self->on_socket_readable(error);
  });
}

void Connection::on_socket_readable(const boost::system::error_code& error) {
  switch (state_) {
    case State::idle:
      if (error) {
        log_event("idle connection lost", "socket wait failed: " + error.message());
        ++operation_;
        drop();
        if (on_lost_while_idle_) on_lost_while_idle_();
        return;
      }
      on_idle_readable();
      return;
    case State::busy:
      if (error) {
        fail(PgErrorKind::unavailable, "socket wait failed: " + error.message(), Delivery::now);
        return;
      }
      on_readable();
      return;
    case State::fresh:
    case State::connecting:
    case State::closed: return;  // unreachable: armed only once connected, and dropping the descriptor disowns it
  }
}

void Connection::on_idle_readable() {
  // Input on an idle connection is a notice, a notification (LISTEN), an error before a shutdown, or EOF.
  if (PQconsumeInput(conn_.get()) == 0 || PQstatus(conn_.get()) != CONNECTION_OK) {
    log_event("idle connection lost", PQerrorMessage(conn_.get()));
    ++operation_;
    drop();
    if (on_lost_while_idle_) on_lost_while_idle_();
    return;
  }
  deliver_notifications();
  watch_idle();
}

void Connection::deliver_notifications() {
  struct NotifyDeleter {
    void operator()(PGnotify* notify) const noexcept { PQfreemem(notify); }
  };
  while (PGnotify* raw = PQnotifies(conn_.get())) {
    const std::unique_ptr<PGnotify, NotifyDeleter> notify(raw);
    if (!notification_handler_) continue;
    boost::asio::post(io_, [handler = notification_handler_, channel = std::string(notify->relname),
                            payload = std::string(notify->extra != nullptr ? notify->extra : "")]() mutable {
      handler(std::move(channel), std::move(payload));
    });
  }
}

void Connection::close() {
  fail(PgErrorKind::unavailable,
       state_ == State::busy ? "connection closed while a statement was running" : "connection closed",
       Delivery::posted);
}

void Connection::on_deadline() {
  switch (state_) {
    case State::connecting: fail(PgErrorKind::unavailable, "connect timed out", Delivery::now); return;
    case State::busy:
      pg_counters().query_timeouts.fetch_add(1, std::memory_order_relaxed);
      fail(PgErrorKind::unavailable, std::string(statement_->name) + " timed out", Delivery::now);
      return;
    case State::fresh:
    case State::idle:
    case State::closed: return;  // unreachable: the deadline is cancelled when an operation ends
  }
}

void Connection::wait_socket(WaitType type, Step next) {
  socket_.async_wait(type,
                     [self = shared_from_this(), operation = operation_, next](const boost::system::error_code& error) {
                       if (operation != self->operation_) return;
                       if (error) {
                         self->fail(PgErrorKind::unavailable, "socket wait failed: " + error.message(), Delivery::now);
                         return;
                       }
                       ((*self).*next)();
                     });
}

void Connection::arm_deadline(std::chrono::milliseconds timeout) {
  deadline_.expires_after(timeout);
  deadline_.async_wait([self = shared_from_this(), operation = operation_](const boost::system::error_code& error) {
    if (error || operation != self->operation_) return;
    self->on_deadline();
  });
}

void Connection::unwatch_socket() {
  // The reactor watches this connection's own duplicate (watch_socket): deregistered while the
  // number is still ours, then closed.
  if (socket_.is_open()) ::close(socket_.release());
  ++descriptor_generation_;
  read_wait_armed_ = false;
}

bool Connection::watch_socket() {
  unwatch_socket();
  const int fd = PQsocket(conn_.get());
  if (fd < 0) {
    fail(PgErrorKind::unavailable, "libpq has no socket", Delivery::now);
    return false;
  }
  // A duplicate, not libpq's descriptor: libpq closes its own the moment it reads the end of the
  // connection (inside PQconsumeInput), and another thread may get that number at once. The
  // reactor must only ever deregister a number this connection still holds.
  const int watched = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (watched < 0) {
    fail(PgErrorKind::internal, "cannot watch the socket: " + std::system_category().message(errno), Delivery::now);
    return false;
  }
  boost::system::error_code error;
  socket_.assign(watched, error);
  if (error) {
    ::close(watched);
    fail(PgErrorKind::internal, "cannot watch the socket: " + error.message(), Delivery::now);
    return false;
  }
  return true;
}

void Connection::drop() {
  unwatch_socket();  // before PQfinish closes libpq's descriptor
  deadline_.cancel();
  conn_.reset();
  state_ = State::closed;
}

// A statement went out and no answer came: the connection ends with RST, not FIN. With a FIN,
// bytes the kernel has not delivered yet (a silent partition holds them in the send queue) are
// retransmitted once the network heals, and the server would run a statement we gave up on and
// have already fenced: a claim committed after its release, a key locked that never ran. RST
// discards them, and tells the server at once that nobody reads its answer.
void Connection::reset_on_drop() {
  const int fd = conn_ ? PQsocket(conn_.get()) : -1;
  if (fd < 0) return;
  const linger abort_on_close{1, 0};
  static_cast<void>(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close));
}

void Connection::fail(PgErrorKind kind, std::string message, Delivery delivery) {
  PgError error{kind, {}, std::move(message)};
  switch (state_) {
    case State::connecting: finish_connect(std::move(error), delivery); return;
    case State::busy: finish_execute(std::move(error), nullptr, delivery); return;
    case State::fresh:
    case State::idle:
    case State::closed:
      ++operation_;
      drop();
      return;
  }
}

void Connection::finish_connect(PgError error, Delivery delivery) {
  ++operation_;
  deadline_.cancel();
  if (error.ok()) {
    state_ = State::idle;
    watch_idle();
  } else {
    drop();
  }
  ConnectHandler handler = std::move(connect_handler_);
  connect_handler_ = nullptr;
  if (!handler) return;
  if (delivery == Delivery::posted) {
    boost::asio::post(
        io_, [handler = std::move(handler), error = std::move(error)]() mutable { handler(std::move(error)); });
  } else {
    handler(std::move(error));
  }
}

// A failure after the statement went out is a lost reply unless the server itself answered with
// an error and the session is still healthy: only then do we know it rolled back. (A server that
// dies mid-statement may send its FATAL after the commit, so an error that ends the session
// proves nothing.)
PgErrorKind Connection::failure_kind(const PgError& error) const {
  if (!statement_sent_ || (error.kind != PgErrorKind::unavailable && error.kind != PgErrorKind::busy &&
                           error.kind != PgErrorKind::read_only)) {
    return error.kind;
  }
  const bool server_refused = !error.sqlstate.empty() && conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
  return server_refused ? error.kind : PgErrorKind::reply_lost;
}

void Connection::finish_execute(PgError error, ResultHandle result, Delivery delivery) {
  ++operation_;
  deadline_.cancel();
  error.kind = failure_kind(error);
  // Keep the connection only when it is known to be healthy and between statements.
  const bool healthy = conn_ && PQstatus(conn_.get()) == CONNECTION_OK &&
                       (error.ok() || error.kind == PgErrorKind::retryable || error.kind == PgErrorKind::internal) &&
                       PQpipelineStatus(conn_.get()) == PQ_PIPELINE_OFF &&
                       PQtransactionStatus(conn_.get()) == PQTRANS_IDLE;
  if (healthy) {
    state_ = State::idle;
    watch_idle();
  } else {
    if (error.kind == PgErrorKind::reply_lost) reset_on_drop();
    drop();
  }
  statement_.reset();
  statement_result_.reset();
  ExecuteHandler handler = std::move(execute_handler_);
  execute_handler_ = nullptr;
  if (!handler) return;
  if (delivery == Delivery::posted) {
    boost::asio::post(io_, [handler = std::move(handler), error = std::move(error),
                            result = std::move(result)]() mutable { handler(std::move(error), std::move(result)); });
  } else {
    handler(std::move(error), std::move(result));
  }
}

}  // namespace idem::pg
