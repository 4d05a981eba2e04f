"""A third-party compactor speaking evalkit's external protocol (docs/external-candidates.md).

Keeps system messages and the last 6 messages by reference and puts a one-line summary
message in front. ``argv[1]`` picks a failure mode for the tests: crash, sleep, badjson, badref.
"""

import json
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
req = json.load(sys.stdin)
if mode == "crash":
    print("compactor exploded: KeyError 'budget'", file=sys.stderr)
    sys.exit(3)
if mode == "sleep":
    time.sleep(30)
if mode == "badjson":
    print("this is not json {")
    sys.exit(0)
ctx = req["context"]
system = [{"ref": m["id"]} for m in ctx if m["role"] == "system"]
tail = ctx[-6:]
while tail and tail[0]["role"] == "tool":  # never orphan a tool result
    tail = tail[1:]
summary = f"round {req['round']}: {len(ctx) - len(tail)} messages compacted"
made = {
    "id": f"ext:r{req['round']}",
    "role": "user",
    "blocks": [{"type": "text", "text": summary}],
    "meta": {"evalkit_summary": summary},
}
refs = [{"ref": m["id"]} for m in tail]
if mode == "badref":
    refs.append({"ref": "no-such-id"})
json.dump({"context": [*system, {"message": made}, *refs], "summary": summary}, sys.stdout)
