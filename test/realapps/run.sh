#!/bin/bash
# make realapps: checkpoints and restores real programs from Debian's packages with
# criu/criu, one script each (test/realapps/APP_test.py: redis-server with a live client,
# on a Unix socket and (redis_tcp) on a TCP connection of the loopback, an asyncio server
# with its clients, a tmux session, iputils ping). Each prints "PASS APP" or
# "FAIL APP: why" and its dump and restore times; images and logs are kept in
# test/realapps/out/APP/. Ends with "N passed, N failed"; non-zero on a failure. Run as root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "realapps: run as root (criu needs it)"; exit 1; }
[ -x "$here/../../criu/criu" ] || { echo "realapps: no criu/criu (run make first)"; exit 1; }
passed=0
failed=0
for app in redis redis_tcp asyncio tmux ping; do
	if [ "$app" = redis_tcp ]; then
		run=("$here/redis_test.py" tcp)
	else
		run=("$here/${app}_test.py")
	fi
	if "${run[@]}"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "realapps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
