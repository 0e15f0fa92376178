#pragma once
// Which subjects a JetStream stream stores: its subject filters, matched as NATS matches them.
// The NATS sink checks each row's rendered subject against the configured stream's filters before
// publishing: a subject no filter covers would be answered "no responders" (or, worse, stored by
// another stream), which is that row's failure, not the server's.
#include <string>
#include <string_view>
#include <vector>

namespace idem::relay {

// NATS subject matching: tokens split on '.', `*` matches exactly one token, `>` (last token only)
// one or more. "outbox.*" covers "outbox.order", not "outbox.billing.invoice"; "outbox.>" both.
bool subject_matches(std::string_view filter, std::string_view subject);

// True when any filter matches. A stream created without subjects stores its own name's subject:
// pass {stream name} then.
bool stream_covers(const std::vector<std::string>& filters, std::string_view subject);

// "outbox.*, audit.>" for messages.
std::string describe_filters(const std::vector<std::string>& filters);

}  // namespace idem::relay
