#!/usr/bin/env bash
# Writes the Secrets the manifests in this directory read, as files to
# apply, and the private halves an operator keeps out of the cluster:
#
#   deploy/kubernetes/secrets.sh OUT
#   kubectl -n shardwise apply -f OUT/secrets.yaml
#
# OUT (created; it must not exist) then holds
#   secrets.yaml   shardwise-zone-certs, shardwise-econ-certs (the cluster CA
#                  and one certificate per node, naming the host the node
#                  advertises), shardwise-login (the login public key),
#                  shardwise-postgres and shardwise-valkey (new random
#                  passwords) and shardwise-urls (the URLs the nodes use,
#                  with those passwords)
#   certs/         what "shardwise certs" wrote (every node's key: keep it
#                  safe); add nodes to it and rotate their certificates with
#                  ca.key (docs/operators.md, "Certificates")
#   ca.key         the cluster CA's key: keep it out of the cluster
#   login.key      the login private key, for "shardwise token": keep it
#                  out of the cluster
#
#   deploy/kubernetes/secrets.sh --certs OUT
#
# writes OUT/certs.yaml: only the two certificate Secrets, from OUT/certs as
# it is now (after "shardwise certs --rotate" or nodes added), to apply
# without touching the passwords. The running nodes read their certificate
# again at every new connection, so an applied rotation needs no restart.
#
# Environment: SHARDWISE (the shardwise binary; default: the one on PATH),
# ZONES and ECONS (node counts, default 4 and 3: the StatefulSets'
# replicas), NAMESPACE (default shardwise: added to each node's names),
# POSTGRES_URL and DIRECTORY_URL (an existing PostgreSQL or Valkey instead
# of postgres.yaml's and valkey.yaml's).
# manifests_test.go runs this script with its defaults and checks the
# result against the manifests, and its --certs form after a rotation.
set -euo pipefail
certs_only=false
if [ "${1:-}" = --certs ]; then
	certs_only=true
	shift
fi
out=${1:?usage: secrets.sh [--certs] OUT_DIR}
shardwise=${SHARDWISE:-shardwise}
zones=${ZONES:-4}
econs=${ECONS:-3}
ns=${NAMESPACE:-shardwise}
umask 077

b64() { base64 | tr -d '\n'; }
secret() { # name, then key=file or key:=value pairs
	local name=$1
	shift
	printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  labels: {app.kubernetes.io/part-of: shardwise}\ntype: Opaque\ndata:\n' "$name"
	for kv in "$@"; do
		case $kv in
		*:=*) printf '  %s: %s\n' "${kv%%:=*}" "$(printf %s "${kv#*:=}" | b64)" ;;
		*) printf '  %s: %s\n' "${kv%%=*}" "$(b64 <"${kv#*=}")" ;;
		esac
	done
}
certs_of() { # the CA and the nodes of one role
	local role=$1 count=$2
	echo "ca.pem=$out/certs/ca.pem"
	for ((i = 0; i < count; i++)); do
		echo "$role-$i.cert.pem=$out/certs/$role-$i.cert.pem"
		echo "$role-$i.key.pem=$out/certs/$role-$i.key.pem"
	done
}
cert_secrets() { # (no mapfile: macOS's bash 3.2 has none)
	local f zone_files=() econ_files=()
	while IFS= read -r f; do zone_files+=("$f"); done < <(certs_of zone "$zones")
	while IFS= read -r f; do econ_files+=("$f"); done < <(certs_of econ "$econs")
	secret shardwise-zone-certs "${zone_files[@]}"
	secret shardwise-econ-certs "${econ_files[@]}"
}

if $certs_only; then
	if [ ! -f "$out/certs/ca.pem" ]; then
		echo "secrets.sh --certs: $out/certs/ca.pem not found: give the directory secrets.sh OUT made" >&2
		exit 1
	fi
	cert_secrets >"$out/certs.yaml"
	echo "wrote $out/certs.yaml (apply it: kubectl -n $ns apply -f $out/certs.yaml)"
	exit 0
fi

if [ -e "$out" ]; then
	echo "secrets.sh: $out exists; give a new directory (or --certs to rewrite only the certificate Secrets)" >&2
	exit 1
fi
mkdir -p "$out"

# Each node is reached at <pod>.<service> (its --advertise), which the
# pods' search path completes, and at the fully qualified name.
nodes=() sans=()
for role in zone:"$zones" econ:"$econs"; do
	svc=${role%%:*}
	for ((i = 0; i < ${role#*:}; i++)); do
		n=$svc-$i
		nodes+=("$n")
		sans+=(--san "$n=$n.$svc,$n.$svc.$ns.svc,$n.$svc.$ns.svc.cluster.local")
	done
done
(IFS=,; "$shardwise" certs --dir "$out/certs" --ca-key "$out/ca.key" --cluster "$ns" --nodes "${nodes[*]}" "${sans[@]}" >/dev/null)
"$shardwise" token keygen --key "$out/login.key" --pub "$out/login.pub" >/dev/null

password() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
pg_password=$(password)
valkey_password=$(password)
postgres_url=${POSTGRES_URL:-postgres://shardwise:$pg_password@postgres:5432/shardwise?sslmode=disable}
directory_url=${DIRECTORY_URL:-redis://:$valkey_password@valkey:6379/0}

{
	cert_secrets
	secret shardwise-login "login.pub=$out/login.pub"
	secret shardwise-postgres "password:=$pg_password"
	secret shardwise-valkey "password:=$valkey_password"
	secret shardwise-urls "econ-store-url:=$postgres_url" "world-store-url:=$postgres_url" "directory-url:=$directory_url"
} >"$out/secrets.yaml"
echo "wrote $out/secrets.yaml (apply it: kubectl -n $ns apply -f $out/secrets.yaml); keep $out/ca.key, $out/login.key and $out/certs out of the cluster"
