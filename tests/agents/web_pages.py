"""A folder of test pages served over HTTP, plus one endpoint a page's script can call: what a chat widget's own
page and backend are, for the browser target's tests.

    python tests/agents/web_pages.py FOLDER      prints `listening on http://127.0.0.1:PORT/` once it serves

GET /echo?m=WORDS&t=TYPE&d=MS
                            answers `data: WORDS` (and a blank line) with the Content-Type TYPE (default
                            text/event-stream) after MS milliseconds (default 0): a widget's backend that streams
                            back what it was sent, as slowly as a model answers.
GET /hang...                never answers (a resource that keeps the page's load event from firing).
Anything else               the file under FOLDER.
"""

from __future__ import annotations

import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class _Pages(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/echo":
            query = parse_qs(parts.query)
            time.sleep(int(query.get("d", ["0"])[0]) / 1000)
            body = ("data: " + query.get("m", [""])[0] + "\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", query.get("t", ["text/event-stream"])[0])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if parts.path.startswith("/hang"):
            threading.Event().wait()  # the browser gives up first; the thread is a daemon
            return
        super().do_GET()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Pages, directory=sys.argv[1]))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
