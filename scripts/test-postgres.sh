#!/usr/bin/env bash
# Runs the Postgres store tests against a real, throwaway Postgres cluster:
# initdb in a temp dir, postgres listening only on a unix socket there,
# `go test` with AGENTVAULT_TEST_POSTGRES pointing at it, then the cluster
# is stopped and the dir removed, whatever happens (trap). Each test makes
# its own schema (store/postgres/pgtest), so tests never collide.
#
#   scripts/test-postgres.sh                    # the store suites and their users (incl. proxyd replicas), then -race on ./store/... and ./broker/...
#   scripts/test-postgres.sh -run X ./store/... # any go test arguments instead
#
# Needs Debian's postgresql package (make test-system-deps installs it when
# missing). As root, the cluster runs as the postgres user (postgres
# refuses to run as root); otherwise as the calling user.
set -euo pipefail

GO=${GO:-go}
PKGS=(./store/... ./vault/... ./owner/... ./policy/... ./proxyd/)

bindir=""
if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
	bindir=$(pg_config --bindir)
fi
if [ -z "$bindir" ]; then
	bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
	echo "test-postgres: no initdb found; install Debian's postgresql package (make test-system-deps)" >&2
	exit 1
fi

run_as=()
if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || { echo "test-postgres: running as root and there is no postgres user" >&2; exit 1; }
	run_as=(runuser -u postgres --)
fi

dir=$(mktemp -d /tmp/agentvault-pg.XXXXXX)
chmod 700 "$dir"
[ ${#run_as[@]} -eq 0 ] || chown postgres: "$dir"
started=""
cleanup() {
	rc=$?
	if [ -n "$started" ]; then
		"${run_as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if [ $rc -ne 0 ] && [ -f "$dir/log" ]; then
		echo "test-postgres: server log (last lines):" >&2
		tail -n 20 "$dir/log" >&2 || true
	fi
	rm -rf "$dir"
	exit $rc
}
trap cleanup EXIT INT TERM

"${run_as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null
# Unix socket only (no TCP), in the temp dir; durable settings (fsync and
# synchronous_commit stay on: the store refuses anything less).
"${run_as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
	-o "-c listen_addresses='' -k $dir -p 5432 -c max_connections=200" start >/dev/null
started=1

export AGENTVAULT_TEST_POSTGRES="postgres://postgres@/postgres?host=$dir&port=5432&sslmode=disable"
echo "test-postgres: cluster up in $dir ($("$bindir/postgres" --version))"
if [ $# -gt 0 ]; then
	$GO test "$@"
else
	$GO test -count=1 "${PKGS[@]}"
	$GO test -race -count=1 ./store/... ./broker/...
fi
