#!/bin/sh
# cluster.sh: a three-node Strand cluster in containers, with mutual TLS between the nodes, TLS
# to clients and auth enabled.
#
#   deploy/cluster.sh up      build the image, make certificates and configs, start, enable auth
#   deploy/cluster.sh join    add a fourth node (compose.grow.yaml) on a fresh volume: member add
#                             as a learner, start it (it joins with --join), member promote once
#                             caught up
#   deploy/cluster.sh restore FILE
#                             replace the cluster by a new one restored from the backup FILE
#                             (`strand snapshot restore` into fresh volumes of nodes 1-3; node
#                             1's restore draws the new cluster id), and start it
#   deploy/cluster.sh recover node 1 alone survives a lost quorum: nodes 2 and 3 and their volumes
#                             are deleted, node 1 starts once with --force-new-cluster
#                             (compose.recover.yaml), then again with its usual command
#   deploy/cluster.sh upgrade ID IMAGE
#                             a rolling upgrade's step: node ID's container is stopped (SIGTERM:
#                             it drains) and made again from IMAGE on the same volume, then it
#                             must answer and catch up; upgrade one node at a time
#   deploy/cluster.sh down    stop the cluster and delete its containers and data volumes
#   deploy/cluster.sh image [TAG]
#                             only build the image (default tag strand:dev)
#
# Environment:
#   STRAND_BIN          the strand binary to put in the image, with strand-node beside it
#                       (default: the release build, `make release`)
#   STRAND_CLUSTER_DIR  where certificates, node configs, the admin token and client.toml go
#                       (default: deploy/cluster; kept across runs)
#   STRAND_PROJECT      the compose project name (default: strand)
#   STRAND_PORT_1..4    host ports of the nodes' client listeners, on 127.0.0.1 (7400-7403)
#   STRAND_IMAGE_1..4   the image of each node (default strand:dev, which up builds)
# After `up`:  export STRAND_CONFIG=$STRAND_CLUSTER_DIR/client.toml; strand cluster status
set -eu

here=$(cd "$(dirname -- "$0")" && pwd)
dir=${STRAND_CLUSTER_DIR:-$here/cluster}
project=${STRAND_PROJECT:-strand}
strand=${STRAND_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/strand-target}/release/strand}
if command -v docker-compose >/dev/null 2>&1; then compose="docker-compose"; else compose="docker compose"; fi

# Runs a command, showing its output only when it fails.
quietly() {
    if ! out=$("$@" 2>&1); then
        echo "$out" >&2
        exit 1
    fi
}

run_compose() {
    STRAND_CLUSTER_DIR=$dir $compose -p "$project" -f "$here/compose.yaml" "$@"
}

# Runs the check "$2..." every half second until it succeeds; after 60 s, fails saying "$1".
wait_until() {
    what=$1
    shift
    tries=0
    until "$@"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 120 ]; then
            echo "cluster.sh: $what" >&2
            exit 1
        fi
        sleep 0.5
    done
}

has_controller() {
    "$strand" cluster status --json 2>/dev/null | grep -q '"controller": *[1-9]'
}

has_leader() {
    "$strand" cluster status --json 2>/dev/null | grep -q '"leader_id": *[1-9]'
}

node_1_leads_alone() {
    members=$("$strand" member list --json 2>/dev/null | tr -d ' \n') || return 1
    echo "$members" | grep -q '"id":1,[^}]*"leader":true' &&
        [ "$(echo "$members" | grep -o '"role":"voter"' | wc -l)" -eq 1 ]
}

node_4_caught_up() {
    "$strand" member list --json 2>/dev/null | tr -d ' \n' | grep -q '"id":4,[^}]*"lag":0,[^}]*"reachable":true'
}

# Whether node "$1" answers in the leader's member list, reachable and caught up.
node_caught_up() {
    "$strand" member list --json 2>/dev/null | tr -d ' \n' | grep -q "\"id\":$1,[^}]*\"lag\":0,[^}]*\"reachable\":true"
}

node_4_votes() {
    "$strand" member list --json 2>/dev/null | tr -d ' \n' | grep -q '"id":4,[^}]*"role":"voter"'
}

# The cluster with the fourth node of `join`.
run_compose_grown() {
    STRAND_CLUSTER_DIR=$dir $compose -p "$project" -f "$here/compose.yaml" -f "$here/compose.grow.yaml" "$@"
}

join_config() {
    if [ ! -f "$dir/certs/node-4.pem" ]; then
        "$strand" certs node --id 4 --ca-dir "$dir/certs" --dir "$dir/certs" --hosts node4,127.0.0.1,localhost >/dev/null
    fi
    cat > "$dir/node-4.toml" <<TOML
id = 4
listen_client = "0.0.0.0:7400"
advertise_client = "node4:7400"
listen_peer = "0.0.0.0:7500"
advertise_peer = "node4:7500"
data_dir = "/data"
metrics_auth = true
join = ["node1:7500", "node2:7500"]

[tls]
cert = "/etc/strand/certs/node-4.pem"
key = "/etc/strand/certs/node-4.key"
ca = "/etc/strand/certs/ca.pem"
TOML
}

build_image() {
    [ -x "$strand" ] || { echo "cluster.sh: no strand binary at $strand; run make release or set STRAND_BIN" >&2; exit 1; }
    strand_node="$(dirname "$strand")/strand-node"
    [ -x "$strand_node" ] || { echo "cluster.sh: no strand-node beside $strand (strand runs its nodes); run make release" >&2; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/rootfs/usr/local/bin" "$work/rootfs/tmp" "$work/rootfs/data"
    cp "$strand" "$work/rootfs/usr/local/bin/strand"
    cp "$strand_node" "$work/rootfs/usr/local/bin/strand-node"
    # The full build's shared libraries (glibc, libstdc++ for RocksDB) and the loader, at their
    # paths; the client's are a subset of them.
    for lib in $(ldd "$strand_node" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
        mkdir -p "$work/rootfs$(dirname "$lib")"
        cp -L "$lib" "$work/rootfs$lib"
    done
    cp "$here/image/Dockerfile" "$work/Dockerfile"
    quietly docker build -q -t "${1:-strand:dev}" "$work"
}

write_configs() {
    mkdir -p "$dir"
    if [ ! -f "$dir/certs/ca.pem" ]; then
        "$strand" certs init --dir "$dir/certs" --nodes 3 --hosts node1,node2,node3,127.0.0.1,localhost >/dev/null
    fi
    for id in 1 2 3; do
        cat > "$dir/node-$id.toml" <<TOML
id = $id
listen_client = "0.0.0.0:7400"
advertise_client = "node$id:7400"
listen_peer = "0.0.0.0:7500"
advertise_peer = "node$id:7500"
data_dir = "/data"
metrics_auth = true

[peers]
1 = "node1:7500"
2 = "node2:7500"
3 = "node3:7500"

[tls]
cert = "/etc/strand/certs/node-$id.pem"
key = "/etc/strand/certs/node-$id.key"
ca = "/etc/strand/certs/ca.pem"
TOML
    done
}

client_config() {
    {
        echo "endpoints = [\"127.0.0.1:${STRAND_PORT_1:-7400}\", \"127.0.0.1:${STRAND_PORT_2:-7401}\", \"127.0.0.1:${STRAND_PORT_3:-7402}\"]"
        echo 'cacert = "certs/ca.pem"'
        echo 'cert = "certs/client.pem"'
        echo 'key = "certs/client.key"'
        if [ -f "$dir/admin.token" ]; then echo "token = \"$(cat "$dir/admin.token")\""; fi
    } > "$dir/client.toml"
    chmod 0600 "$dir/client.toml"
}

case "${1:-}" in
    up)
        build_image
        write_configs
        client_config
        quietly run_compose up -d
        export STRAND_CONFIG="$dir/client.toml"
        wait_until "no leader after 60 s; see: $compose -p $project logs" has_controller
        # Fresh volumes have auth off: enable it, replacing a token of earlier volumes.
        if ! "$strand" auth whoami --json | grep -q '"enabled": *true'; then
            rm -f "$dir/admin.token"
            client_config
            "$strand" auth enable --token-file "$dir/admin.token" >/dev/null
            client_config
        fi
        echo "cluster up: 3 nodes, mutual TLS between them, TLS and auth for clients"
        echo "export STRAND_CONFIG=$dir/client.toml    (endpoints, TLS files and the admin token)"
        ;;
    join)
        [ -f "$dir/admin.token" ] || { echo "cluster.sh: no admin token in $dir; run cluster.sh up first" >&2; exit 1; }
        join_config
        export STRAND_CONFIG="$dir/client.toml"
        # A node joins on an empty data directory: a volume of an earlier node 4 goes first.
        quietly run_compose_grown rm -fsv node4
        docker volume rm -f "${project}_data4" >/dev/null
        # Added first as a learner that waits for `member promote`, as etcd's `member add`; then
        # started, it joins with --join and catches up.
        quietly "$strand" member add 4 node4:7500 --client-address node4:7400 --learner
        STRAND_JOIN_TOKEN=$(cat "$dir/admin.token") quietly run_compose_grown up -d node4
        wait_until "node 4 did not catch up within 60 s; see: $compose -p $project logs node4" node_4_caught_up
        quietly "$strand" member promote 4
        wait_until "node 4 is not a voter after 60 s; see: $compose -p $project logs node4" node_4_votes
        echo "node 4 joined and is a voter"
        ;;
    restore)
        backup=${2:-}
        [ -f "$backup" ] || { echo "cluster.sh: usage: cluster.sh restore FILE (a strand snapshot save backup)" >&2; exit 2; }
        backup=$(cd "$(dirname -- "$backup")" && pwd)/$(basename -- "$backup")
        build_image
        write_configs
        quietly run_compose_grown down -v
        # One restore per member, into its fresh volume, with the same --peers for all.
        for id in 1 2 3; do
            quietly run_compose run --rm --no-deps -v "$backup:/backup.strand:ro" "node$id" \
                snapshot restore /backup.strand --data-dir /data --id "$id" \
                --peers 1=node1:7500,2=node2:7500,3=node3:7500
        done
        quietly run_compose up -d
        export STRAND_CONFIG="$dir/client.toml"
        wait_until "the restored cluster has no leader after 60 s; see: $compose -p $project logs" has_leader
        echo "cluster restored from $backup: 3 nodes, a new cluster id"
        ;;
    recover)
        export STRAND_CONFIG="$dir/client.toml"
        # Nodes 2 and 3 are lost for good, with their data.
        quietly run_compose rm -fsv node2 node3
        docker volume rm -f "${project}_data2" "${project}_data3" >/dev/null
        # Node 1 starts once with --force-new-cluster, then with its usual command.
        quietly run_compose -f "$here/compose.recover.yaml" up -d node1
        wait_until "node 1 does not lead alone after 60 s; see: $compose -p $project logs node1" node_1_leads_alone
        quietly run_compose up -d node1
        wait_until "node 1 does not lead after its restart; see: $compose -p $project logs node1" node_1_leads_alone
        echo "node 1 leads a one-voter cluster with every entry of its log; add members with cluster.sh join"
        ;;
    upgrade)
        id=${2:-}
        image=${3:-}
        case "$id" in 1|2|3|4) ;; *) echo "cluster.sh: usage: cluster.sh upgrade ID IMAGE (ID: 1 to 4)" >&2; exit 2 ;; esac
        [ -n "$image" ] || { echo "cluster.sh: usage: cluster.sh upgrade ID IMAGE (the image to run node $id from)" >&2; exit 2; }
        docker image inspect "$image" >/dev/null 2>&1 || { echo "cluster.sh: no image $image here; build or load it first" >&2; exit 2; }
        [ -f "$dir/admin.token" ] || { echo "cluster.sh: no admin token in $dir; run cluster.sh up first" >&2; exit 1; }
        export STRAND_CONFIG="$dir/client.toml"
        # Recreated on the same volume: compose stops the old container with SIGTERM (the node
        # drains, handing its leadership over) and starts one from the new image.
        export "STRAND_IMAGE_$id=$image"
        quietly run_compose_grown up -d --no-deps "node$id"
        wait_until "node $id did not catch up within 60 s of its upgrade; see: $compose -p $project logs node$id" node_caught_up "$id"
        echo "node $id runs $image and is caught up"
        ;;
    down)
        quietly run_compose_grown down -v
        echo "cluster down: containers and data volumes removed (certificates and token stay in $dir)"
        ;;
    image)
        build_image "${2:-strand:dev}"
        echo "built image ${2:-strand:dev} from $strand"
        ;;
    *)
        echo "usage: deploy/cluster.sh up|join|upgrade ID IMAGE|restore FILE|recover|down|image [TAG]" >&2
        exit 2
        ;;
esac
