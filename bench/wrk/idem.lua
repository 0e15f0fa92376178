-- wrk script for bench/run.sh: POSTs the bench's request (the body and Content-Type idem-loadgen
-- sends) and prints the run as one JSON line ("WRK_JSON {...}") when wrk is done.
--   wrk ... -s idem.lua URL -- plain            no Idempotency-Key
--   wrk ... -s idem.lua URL -- unique PREFIX    a fresh key per request: PREFIX-t<thread>-<n>
--   wrk ... -s idem.lua URL -- fixed KEY        the same key on every request (a completed one: replays)
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

function init(args)
  mode = args[1] or "plain"
  prefix = args[2] or "wrk"
  sent = 0
  wrk.method = "POST"
  wrk.body = '{"amount":100}'
  wrk.headers["Content-Type"] = "application/json"
  if mode == "fixed" then
    wrk.headers["Idempotency-Key"] = prefix
  end
  prebuilt = wrk.format()
end

function request()
  if mode ~= "unique" then
    return prebuilt
  end
  sent = sent + 1
  wrk.headers["Idempotency-Key"] = prefix .. "-t" .. thread_id .. "-" .. sent
  return wrk.format()
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p99_9":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean))
end
