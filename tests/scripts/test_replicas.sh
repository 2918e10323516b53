#!/bin/sh
# Two `kipp serve` replicas behind nginx on loopback with consistent hashing
# on X-Session-Id (docs/DEPLOY.md): each conversation sticks to one replica,
# whose prefix counter shows the reuse, and answers equal a single server's.
# Needs nginx (Debian package `nginx`); exits 77 without it.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$MODEL"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
need_tool "$NGINX" "Debian package nginx"
need_tool node
need_node_module openai
need_tool python3

start() {
    name=$1; shift
    start_server "$name" -m "$MODEL" --threads 1 "$@"
}
start r1
start r2
start single
LB_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$T/nginx/logs"
cat >"$T/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/logs/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    upstream kipp {
        hash \$http_x_session_id consistent;
        server 127.0.0.1:$PORT_r1;
        server 127.0.0.1:$PORT_r2;
    }
    server {
        listen 127.0.0.1:$LB_PORT;
        location / {
            proxy_pass http://kipp;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }
    }
}
CONF
"$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" 2>"$T/nginx.err" &
PIDS="$PIDS $!"
i=0
until curl -sf --max-time 2 "http://127.0.0.1:$LB_PORT/health" >/dev/null; do
    i=$((i + 1))
    [ $i -gt 50 ] && { echo "FAIL: nginx did not come up: $(cat "$T/nginx.err")"; exit 1; }
    sleep 0.1
done
LB_URL="http://127.0.0.1:$LB_PORT" R1_URL="http://127.0.0.1:$PORT_r1" R2_URL="http://127.0.0.1:$PORT_r2" \
SINGLE_URL="http://127.0.0.1:$PORT_single" timeout 600 node tests/node/replicas.mjs || exit 1
stop_servers
exit $fail
