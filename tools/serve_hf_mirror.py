#!/usr/bin/env python3
"""A tiny loopback stand-in for the Hugging Face file endpoint, for tests.

Serves the files of one local checkpoint directory under the URL shape
tools/download.sh uses:  GET /{repo}/resolve/{revision}/{file}

Like huggingface.co, large files (*.safetensors) answer with a 302 redirect
to a content-addressed /lfs/{sha256} URL and carry X-Linked-ETag (the
file's SHA-256) and X-Linked-Size; other files are served directly.
Supports HEAD and single byte ranges ("bytes=N-" and "bytes=N-M", 206 /
416). Every request is appended to --log as one tab-separated line:
  METHOD  PATH  RANGE-or-"-"  AUTHORIZATION-or-"-"  STATUS
--cut-after N makes the first GET of each *.safetensors file send only N
bytes of its body and then close the connection (a dropped transfer).
--lifetime S bounds the server: it exits by itself after S seconds.

Standard library only. Binds 127.0.0.1 on a free port and writes the port
number to --port-file once it is listening.

usage: serve_hf_mirror.py --root DIR --repo REPO --revision REV
                          --port-file FILE --log FILE
                          [--cut-after N] [--lifetime S]
"""
import argparse
import hashlib
import http.server
import os
import re
import sys
import threading
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--cut-after", type=int, default=-1)
    ap.add_argument("--lifetime", type=float, default=120.0)
    args = ap.parse_args()

    root = os.path.abspath(args.root)
    files = {}  # name -> path; only plain files directly in root
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(path):
            files[name] = path
    digests = {}  # sha256 hex -> name, for the /lfs/ redirect targets
    for name, path in files.items():
        if name.endswith(".safetensors"):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digests[h.hexdigest()] = name
    sha_of = {v: k for k, v in digests.items()}
    cut_done = set()
    log_lock = threading.Lock()
    prefix = "/%s/resolve/%s/" % (args.repo, args.revision)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet stderr
            pass

        def record(self, status):
            line = "\t".join([
                self.command,
                self.path,
                self.headers.get("Range") or "-",
                self.headers.get("Authorization") or "-",
                str(status),
            ])
            with log_lock:
                with open(args.log, "a") as f:
                    f.write(line + "\n")

        def plain(self, status, text, extra=None):
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.record(status)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            if path.startswith(prefix):
                name = path[len(prefix):]
                if name not in files:
                    return self.plain(404, "Entry not found")
                if name in sha_of:  # LFS file: redirect like the real hub
                    sha = sha_of[name]
                    return self.plain(302, "Found", {
                        "Location": "/lfs/" + sha,
                        "X-Linked-ETag": '"%s"' % sha,
                        "X-Linked-Size": str(os.path.getsize(files[name])),
                    })
                return self.send_file(name)
            m = re.fullmatch(r"/lfs/([0-9a-f]{64})", path)
            if m and m.group(1) in digests:
                return self.send_file(digests[m.group(1)])
            if path.startswith("/%s/resolve/" % args.repo):
                return self.plain(404, "Revision not found")
            return self.plain(404, "Repository not found")

        def send_file(self, name):
            size = os.path.getsize(files[name])
            start, end = 0, size - 1
            status = 200
            rng = self.headers.get("Range")
            if rng:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m:
                    return self.plain(416, "bad range", {"Content-Range": "bytes */%d" % size})
                start = int(m.group(1))
                if m.group(2):
                    end = min(int(m.group(2)), size - 1)
                if start >= size or start > end:
                    return self.plain(416, "range not satisfiable",
                                      {"Content-Range": "bytes */%d" % size})
                status = 206
            length = end - start + 1
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            self.end_headers()
            self.record(status)
            if self.command == "HEAD":
                return
            limit = length
            if (args.cut_after >= 0 and name.endswith(".safetensors")
                    and name not in cut_done):
                cut_done.add(name)
                limit = min(length, args.cut_after)
            with open(files[name], "rb") as f:
                f.seek(start)
                left = limit
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
            if limit < length:  # drop the connection mid-body
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            # clients hanging up (curl after a 416, the dropped-transfer
            # test) are expected; report anything else
            if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, args.port_file)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
