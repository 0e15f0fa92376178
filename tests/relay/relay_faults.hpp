#pragma once
// A FaultProxy between idemrelay and Postgres or Redis: matchers for the relay's requests, and
// the moments the relay tests reach through it from outside the process (no hook in the binary).
//
// Statements are told apart by their SQL text, which the relay sends in every Parse (its pool uses
// unnamed statements). The Redis publish is the only EVALSHA (one per row, a batch pipelined in one
// write).
#include <chrono>
#include <cstdint>
#include <string>

#include "support/fault_proxy.hpp"
#include "support/process.hpp"

namespace idem::test::relay {

// Distinctive snippets of sql::kClaim and sql::kSettle (proxy/relay/sql.hpp).
FaultProxy::Matcher claim_statement();
FaultProxy::Matcher settle_statement();
FaultProxy::Matcher publish_script();

std::uint16_t suite_postgres_port();
// `schema_dsn` through `proxy`. sslmode=disable: the bytes stay readable for matchers.
std::string dsn_through(const std::string& schema_dsn, const FaultProxy& proxy);

// Arms `proxy` to hold the reply to the next request `matches` matches for a while: long enough
// for stop_while_reply_held to stop the relay first, well inside the relay's own deadlines (500 ms
// for a Redis command, 1 s for a statement in the tests' config).
void hold_next_reply(FaultProxy& proxy, FaultProxy::Matcher matches);
// Once the held reply is back from the server (the request ran there), SIGSTOPs `relay` before the
// reply reaches it and waits until it is stopped. The relay stays where it was: the claim leased
// its rows (or the batch is in the stream) and the relay has not seen it. On SIGCONT it reads the
// reply before its own deadline, expired by then, fires: Asio runs the socket's completion before
// the timers' from the same wake-up. False when the reply or the stop did not come in `timeout`.
// `proxy` must hold only this one fault.
bool stop_while_reply_held(const FaultProxy& proxy, Process& relay, std::chrono::milliseconds timeout);

}  // namespace idem::test::relay
