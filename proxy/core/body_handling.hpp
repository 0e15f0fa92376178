#pragma once
// Which requests the proxy streams: those no idempotency rule applies to, known from the head
// alone (route, method, whether the key header came), so the body can go upstream as it arrives
// and the answer back as it comes. A guarded request is read whole (it is fingerprinted before
// the claim), and so is one whose key may be in its JSON body.
#include <string_view>

#include "core/route.hpp"

namespace idem::core {

enum class BodyHandling {
  streamed,    // no route, a safe method, `key: off`, or `key: optional` with no key header sent
  read_whole,  // the idempotency flow: fingerprint, claim, store
};

// `route`: the matched route's policy, null when none matched. `key_header_sent`: a line of the
// route's key header is in the head (its value is not looked at: an empty or malformed key is
// the guarded flow's 400); read only for a `key: optional` route.
BodyHandling body_handling(const RoutePolicy* route, std::string_view method, bool key_header_sent);

}  // namespace idem::core
