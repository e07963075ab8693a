"""A stand-in for guardian 0.1.0, the previous release, on loopback: it
refuses a request carrying a field that release does not know (400
unknown_field), as it does, and answers the rest with scripted decisions.
client/testdata/api-0.1.0.json lists the fields it knows."""

import http.server
import json
import os
import threading

from .fleet import ROOT

with open(os.path.join(ROOT, "client", "testdata", "api-0.1.0.json"), encoding="utf-8") as _f:
    PREVIOUS = json.load(_f)


class OldGuardian:
    """Serves until close(); refused lists "PATH FIELD" of every refusal."""

    def __init__(self, decision: str = '{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}'):
        self.decision, self.refused, self.checks = decision, [], []
        known = PREVIOUS["requests"]
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                for k in body:
                    if k not in known.get("POST " + self.path, []):
                        outer.refused.append(f"{self.path} {k}")
                        return self.answer(400, {"error": {"code": "unknown_field", "message": f"{k}: unknown field"}})
                if self.path == "/v1/check":
                    outer.checks.append(body)
                    status = 429 if '"slow"' in outer.decision or '"block"' in outer.decision else 200
                    return self.answer(status, json.loads(outer.decision))
                if self.path == "/v1/report":
                    return self.answer(200, {"recorded": True, "device_token": "dev-old"})
                return self.answer(200, {"reset": True})

            def answer(self, status, doc):
                out = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
