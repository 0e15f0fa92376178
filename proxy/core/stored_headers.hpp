#pragma once
// Which response headers are kept in a record, and how a header list is laid out in the store.
#include <optional>
#include <string>
#include <string_view>

#include "core/record.hpp"
#include "core/route.hpp"

namespace idem::core {

// RFC 9110 §7.6.1 hop-by-hop fields: Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade, plus any field named in `connection_header` (comma list).
bool is_hop_by_hop(std::string_view name, std::string_view connection_header);

// Whether a message leaves its connection open (RFC 9112 §9.3), from its version and every
// Connection line joined into one list: `close` anywhere closes; HTTP/1.0 stays open only with
// `keep-alive`. (Beast's keep_alive() reads the first Connection line only.)
bool keeps_connection_open(unsigned version, std::string_view connection_header);

// The record's expiry as an HTTP-date (RFC 9110 §5.6.7), sent when a route sets
// key_expires_header. Experimental; the name follows the IETF httpapi discussion of the
// Idempotency-Key draft. The proxy's own value is stored with the response (so every replay, from
// any tier, repeats the first answer's); an upstream's is never stored nor passed on.
inline constexpr std::string_view kKeyExpiresHeader = "Idempotency-Key-Expires";

// Drops hop-by-hop fields, Content-Length (recomputed on replay), Idempotency-Transient, the
// route's replay headers (added on replay), Idempotency-Key-Expires (the proxy's own is added
// after this filter), and Set-Cookie unless the policy allows it. Authorization/Cookie/Proxy-Authorization are never
// stored.
HeaderList filter_for_storage(const HeaderList& headers, const RoutePolicy& policy);

// Store layout: "Name: value\r\n" per field (values cannot hold CR/LF in HTTP).
std::string encode_header_block(const HeaderList& headers);
std::optional<HeaderList> decode_header_block(std::string_view block);

}  // namespace idem::core
