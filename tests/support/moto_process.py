"""moto's S3 server in a process of its own, for :mod:`support.s3` (run as a script).

In the test process the server would share the GIL with ``deltalake``, some of whose calls
hold it while they wait for the server's answer: a deadlock. Usage::

    python moto_process.py REQUESTS_FILE

prints the port on the first line of stdout, appends one JSON line ``[method, path,
If-None-Match]`` to ``REQUESTS_FILE`` for every request it serves, and stops when its stdin
closes.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


def main(requests_file: str) -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    app = DomainDispatcherApplication(create_backend_app)

    def recording(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        seen = [environ.get("REQUEST_METHOD"), str(environ.get("PATH_INFO", "")), environ.get("HTTP_IF_NONE_MATCH")]
        with open(requests_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(seen) + "\n")
        return app(environ, start_response)  # type: ignore[no-any-return]

    server = make_server("127.0.0.1", 0, recording, threaded=True, request_handler=MotoRequestHandler)
    print(server.server_address[1], flush=True)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test session closes it
    server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
