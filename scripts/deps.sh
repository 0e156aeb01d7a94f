#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: the Kafka clients faultline did
# not write, which internal/compat checks the broker against — kcat
# (librdkafka), kafka-python with its compression codecs and
# confluent-kafka-python, all from Debian's packages; a C compiler (gcc), for
# confluent-kafka-go's bundled librdkafka (internal/compat/goclients) — and
# Debian's chromium,
# in which the reports tests render a run's page headless and fail on any
# script error (skipped where it is missing, failed in CI). Idempotent: it does
# nothing when they are present. Needs root or password-less sudo; when it
# cannot install, it says so and exits 0, and internal/compat then skips
# those tests with the command to run (or, with CI=true, fails them).
set -uo pipefail

packages=(kcat python3-kafka python3-confluent-kafka python3-lz4 python3-snappy python3-zstandard gcc libc6-dev)
# Installed on its own, so a failure here never costs internal/compat its
# clients.
separate=(chromium)

present() {
	{ command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1; } &&
		/usr/bin/python3 -c 'import kafka, confluent_kafka, lz4, snappy, zstandard' >/dev/null 2>&1 &&
		command -v chromium >/dev/null 2>&1 &&
		command -v gcc >/dev/null 2>&1
}

if present; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "make deps: no apt-get here; install ${packages[*]} (or their equivalents) by hand for internal/compat" >&2
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! sudo -n true 2>/dev/null; then
		echo "make deps: not root and no password-less sudo; run: sudo apt-get install -y ${packages[*]}" >&2
		exit 0
	fi
	sudo="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
echo "make deps: installing ${packages[*]} ${separate[*]}" >&2
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"; }; then
	echo "make deps: could not install ${packages[*]}; internal/compat will say which client is missing" >&2
fi
if ! command -v chromium >/dev/null 2>&1 && ! $sudo apt-get install -y -qq --no-install-recommends "${separate[@]}"; then
	echo "make deps: could not install ${separate[*]}; the reports' browser tests will skip (or fail in CI)" >&2
fi
exit 0
